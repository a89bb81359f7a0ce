//go:build unix

package main

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// running is a coordinator and its workers, with the job running and a
// checkpoint complete.
type running struct {
	coord   *child
	addr    string
	workers []*child
	addrs   []string
	placed  placement // the placement of epoch 1
	at      int       // the index of the coordinator's line of the first checkpoint
	// checkpoint is the first checkpoint completed.
	checkpoint uint64
}

// startRunning starts a coordinator and n workers and waits until a
// checkpoint has completed. The sources are then held halfway, at the
// latest: the job cannot end before the test releases them.
func startRunning(c *testCluster, n int, coordExtra ...string) *running {
	c.t.Helper()
	r := &running{}
	r.coord, r.addr = c.startCoordinator("coordinator", "127.0.0.1:0", n, coordExtra...)
	for i := range n {
		w, a := c.startWorker("worker "+string(rune('1'+i)), r.addr, "-register-timeout", "2m")
		r.workers, r.addrs = append(r.workers, w), append(r.addrs, a)
	}
	_, placed := c.awaitEvent(r.coord, 0, "placed", nil)
	p, err := parsePlacement(placed.get("placement"))
	if err != nil {
		c.t.Fatal(err)
	}
	r.placed = p
	var cp eventLine
	r.at, cp = c.awaitEvent(r.coord, 0, "checkpoint-completed", func(e eventLine) bool { return e.get("final") == "false" })
	r.checkpoint = cp.uint("checkpoint")
	return r
}

// victim returns the worker running the most tasks, sum tasks among them.
func (r *running) victim(t *testing.T) int {
	t.Helper()
	v := busiest(r.placed, r.addrs)
	if v < 0 {
		t.Fatalf("no worker runs a sum task in placement %v", r.placed)
	}
	return v
}

// expectRollback waits, from index from, for the loss of the worker at
// addr with an error containing reason, a rollback to a complete checkpoint
// and a placement without that worker; it returns the index of the
// placement line.
func expectRollback(c *testCluster, coord *child, from int, addr, reason string) int {
	c.t.Helper()
	_, lost := c.awaitEvent(coord, from, "node-lost", func(e eventLine) bool { return nodeAddr(e.get("node")) == addr })
	if !strings.Contains(lost.get("err"), reason) {
		c.t.Errorf("node-lost of %s says %q, want a reason containing %q", addr, lost.get("err"), reason)
	}
	_, restoring := c.awaitEvent(coord, from, "restoring", nil)
	if restoring.uint("checkpoint") == 0 || restoring.uint("epoch") < 2 {
		c.t.Errorf("rollback to checkpoint %s in epoch %s: want a checkpoint > 0 (one completed before the failure) and epoch >= 2",
			restoring.get("checkpoint"), restoring.get("epoch"))
	}
	i, placed := c.awaitEvent(coord, from, "placed", func(e eventLine) bool { return e.uint("epoch") >= 2 })
	p, err := parsePlacement(placed.get("placement"))
	if err != nil {
		c.t.Fatal(err)
	}
	if tasks := p.tasksOn(addr); len(tasks) > 0 {
		c.t.Errorf("epoch %s places %v on the lost worker %s: %s", placed.get("epoch"), tasks, addr, placed.get("placement"))
	}
	return i
}

// TestWorkerKilled: a worker is SIGKILLed while the job runs, after a
// checkpoint has completed. The coordinator reports the node loss, rolls
// back, places the tasks on the two workers left, and the final state is
// exact.
func TestWorkerKilled(t *testing.T) {
	c := newTestCluster(t)
	r, v := killBusiest(c)
	if code := c.exit(r.workers[v]); code != -1 {
		t.Errorf("the killed worker exited %d", code)
	}
}

// killBusiest starts a coordinator (with coordExtra) and 3 workers,
// SIGKILLs the busiest worker once a checkpoint has completed, and expects
// a rollback without it and an exact result; it returns the cluster and
// the index of the worker killed.
func killBusiest(c *testCluster, coordExtra ...string) (*running, int) {
	c.t.Helper()
	r := startRunning(c, 3, coordExtra...)
	v := r.victim(c.t)
	if err := r.workers[v].cmd.Process.Kill(); err != nil {
		c.t.Fatal(err)
	}
	c.release()
	expectRollback(c, r.coord, r.at, r.addrs[v], "connection broke")
	c.expectExact(r.coord, append(append([]*child(nil), r.workers[:v]...), r.workers[v+1:]...)...)
	return r, v
}

// TestWorkerKilledUnaligned is TestWorkerKilled with unaligned
// checkpoints, and with the alignment timeout: the coordinator sends the
// mode to the workers (their checkpoints store records in flight), and the
// rollback after the loss is exact.
func TestWorkerKilledUnaligned(t *testing.T) {
	for _, mode := range [][]string{{"-checkpoint-mode", "unaligned"}, {"-align-timeout", "1ms"}} {
		t.Run(mode[0][1:], func(t *testing.T) {
			c := newTestCluster(t)
			r, _ := killBusiest(c, mode...)
			with := 0
			for _, e := range events(r.coord, 0) {
				if e.get("in_flight") != "" {
					with++
				}
			}
			t.Logf("%d checkpoints stored records in flight", with)
			if with == 0 { // the workers did not take the coordinator's mode
				t.Error("no checkpoint stored a record in flight")
			}
		})
	}
}

// TestRescaleFromUnalignedCheckpoint: a job with unaligned checkpoints is
// killed, coordinator and workers, and started again from a checkpoint
// that stored records in flight, with the keyed sum over 2 tasks instead
// of 3 (-variant 2): the coordinator redistributes the records in flight
// by key group and sends each worker those of its tasks, which replay
// them, and the result is exact.
func TestRescaleFromUnalignedCheckpoint(t *testing.T) {
	c := newTestCluster(t)
	c.job = []string{"-records", "60000", "-rate", "20000"}
	r := startRunning(c, 2, "-checkpoint-mode", "unaligned", "-retain", "1000")
	ctx := context.Background()
	store, err := snapshots.Open(ctx, c.store)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	// The first checkpoint that stored records in flight into the sum.
	var id uint64
	toSum := 0
	for at := 0; toSum == 0; at++ {
		var cp eventLine
		at, cp = c.awaitEvent(r.coord, at, "checkpoint-completed", func(e eventLine) bool {
			return e.get("in_flight") != "" && e.get("final") == "false"
		})
		id = cp.uint("checkpoint")
		rp, err := snapshots.NewCheckpoints(store, jobName, nil).LoadCheckpoint(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range rp.States {
			for _, it := range st.InFlight {
				if it.ToOperatorId == "sum" {
					toSum += len(it.Ends)
				}
			}
		}
	}
	for _, p := range append([]*child{r.coord}, r.workers...) {
		killGroup(p.cmd.Process)
		c.exit(p)
	}
	t.Logf("checkpoint %d held %d records in flight into the sum", id, toSum)

	second, addr := c.startCoordinator("coordinator 2", "127.0.0.1:0", 2,
		"-checkpoint-mode", "unaligned", "-variant", "2", "-from-checkpoint", strconv.FormatUint(id, 10), "-takeover")
	var workers []*child
	for i := range 2 {
		w, _ := c.startWorker("worker 2."+strconv.Itoa(i+1), addr, "-variant", "2")
		workers = append(workers, w)
	}
	_, ev := c.awaitEvent(second, 0, "running", nil)
	if got := ev.uint("checkpoint"); got != id {
		t.Fatalf("the second coordinator restored checkpoint %d, want %d", got, id)
	}
	c.release()
	c.expectExact(second, workers...)
	replayed := 0
	for _, w := range workers {
		for _, l := range w.linesFrom(0) {
			if strings.Contains(l, "replaying the channel state") {
				replayed++
			}
		}
	}
	t.Logf("%d tasks replayed channel state", replayed)
	if replayed == 0 {
		t.Error("no task replayed the checkpoint's records in flight")
	}
}

// TestWorkerStopped: a worker is SIGSTOPped while the job runs. Its
// connections stay open, so only the heartbeat notices: the coordinator
// reports it lost for want of heartbeats, rolls back and places the tasks
// on the others. Then the stopped worker is resumed: it finds itself cut
// off from its coordinator and drops its stale tasks, and their messages,
// of an old epoch, disturb nothing: no failure follows and the result is
// exact.
func TestWorkerStopped(t *testing.T) {
	c := newTestCluster(t)
	r := startRunning(c, 3)
	v := r.victim(t)
	stale := r.workers[v]
	if err := stale.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	placedAt := expectRollback(c, r.coord, r.at, r.addrs[v], "no heartbeat")
	_, running := c.awaitEvent(r.coord, placedAt, "running", nil)
	resumedAt := len(r.coord.linesFrom(0))
	if err := stale.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	c.await(stale, 0, "its log saying it drops its stale tasks", func(l string) bool {
		return strings.Contains(l, "dropping the tasks")
	})
	c.release()
	c.expectExact(r.coord, r.workers...)
	for _, ev := range events(r.coord, resumedAt) {
		switch ev.kind {
		case "node-lost", "task-failed", "restoring":
			t.Errorf("after the stopped worker resumed (the job running in epoch %s): event %s %v", running.get("epoch"), ev.kind, ev.fields)
		}
	}
}

// TestCoordinatorKilled: the coordinator is SIGKILLed after a checkpoint
// has completed, and a new coordinator starts on the same address and
// store. The workers drop the tasks of the dead coordinator and register
// with the new one, which resumes from the newest complete checkpoint in
// the store, and the final state is exact.
func TestCoordinatorKilled(t *testing.T) {
	c := newTestCluster(t)
	r := startRunning(c, 3)
	killGroup(r.coord.cmd.Process)
	if code := c.exit(r.coord); code != -1 {
		t.Fatalf("the killed coordinator exited %d", code)
	}

	store, err := snapshots.Open(context.Background(), c.store)
	if err != nil {
		t.Fatal(err)
	}
	newest, err := snapshots.NewCheckpoints(store, jobName, nil).LatestCompleteID(context.Background())
	store.Close()
	if err != nil {
		t.Fatal(err)
	}
	if newest < r.checkpoint {
		t.Fatalf("the store's newest complete checkpoint is %d, but the coordinator reported checkpoint %d complete", newest, r.checkpoint)
	}

	second, addr := c.startCoordinator("coordinator 2", r.addr, 3)
	if addr != r.addr {
		t.Fatalf("the second coordinator listens on %s, want %s", addr, r.addr)
	}
	_, ev := c.awaitEvent(second, 0, "running", nil)
	if got := ev.uint("checkpoint"); got != newest {
		t.Errorf("the second coordinator restored checkpoint %d, want the newest complete one, %d", got, newest)
	}
	for _, w := range r.workers {
		c.await(w, 0, "its log saying it lost the coordinator", func(l string) bool { return strings.Contains(l, "lost the coordinator") })
	}
	c.release()
	c.expectExact(second, r.workers...)
}

// TestLargeRecords: records of 1 MiB cross nodes in small batches. Nothing
// is lost (no failure, no rollback: a lost batch would be a sequence gap and
// fail a task), no gRPC stream is closed by its message limit, and the
// result is exact.
func TestLargeRecords(t *testing.T) {
	c := newTestCluster(t)
	// A heartbeat timeout that a loaded machine does not reach: the test
	// asserts that nothing fails, and a late heartbeat is not what it checks.
	coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 3,
		"-records", "200", "-keys", "10", "-rate", "100", "-record-bytes", "1048576", "-batch", "4", "-heartbeat-timeout", "1m")
	var workers []*child
	for i := range 3 {
		w, _ := c.startWorker("worker "+string(rune('1'+i)), addr,
			"-records", "200", "-keys", "10", "-rate", "100", "-record-bytes", "1048576")
		workers = append(workers, w)
	}
	_, placed := c.awaitEvent(coord, 0, "placed", nil)
	p, err := parsePlacement(placed.get("placement"))
	if err != nil {
		t.Fatal(err)
	}
	if !crossesNodes(p) {
		t.Fatalf("no source task and sum task on different workers: %s", placed.get("placement"))
	}
	c.release()
	c.expectExact(coord, workers...)
	for _, ev := range events(coord, 0) {
		switch ev.kind {
		case "node-lost", "task-failed", "restoring", "checkpoint-aborted":
			t.Errorf("event %s %v", ev.kind, ev.fields)
		}
	}
	for _, p := range append([]*child{coord}, workers...) {
		for _, l := range p.linesFrom(0) {
			if strings.Contains(l, "ResourceExhausted") || strings.Contains(l, "larger than max") {
				t.Errorf("%s: %s", p.name, l)
			}
		}
	}
}

// crossesNodes says whether some source task and some sum task run on
// different workers: the keyed edge then crosses nodes.
func crossesNodes(p placement) bool {
	var sources, sums []string
	for _, w := range p {
		for _, t := range w.tasks {
			switch {
			case strings.HasPrefix(t, "source#"):
				sources = append(sources, w.node)
			case strings.HasPrefix(t, "sum#"):
				sums = append(sums, w.node)
			}
		}
	}
	for _, a := range sources {
		for _, b := range sums {
			if a != b {
				return true
			}
		}
	}
	return false
}

// TestSecondCoordinatorCannotListen: a coordinator started by mistake on
// the address of a running one, with the same store, cannot listen: it
// exits 1 naming the address, and the running job goes on undisturbed to an
// exact end.
func TestSecondCoordinatorCannotListen(t *testing.T) {
	c := newTestCluster(t)
	r := startRunning(c, 3)
	second := c.start("coordinator 2", append(c.coordinatorFlags(r.addr, 3), c.jobFlags()...)...)
	c.expectRefused(second, r.addr, "address already in use")
	c.release()
	c.expectExact(r.coord, r.workers...)
}
