//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

// TestCoordinatorTakeOverDir: two coordinators race for one job on a
// directory store (see takeOver), with the tasks' states inline in the
// manifests and as objects of their own.
func TestCoordinatorTakeOverDir(t *testing.T) {
	for _, objects := range []bool{false, true} {
		t.Run(stateMode(objects), func(t *testing.T) {
			c := newTestCluster(t)
			store, err := snapshots.Open(t.Context(), c.store)
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			takeOver(c, store, objects)
		})
	}
}

// TestCoordinatorTakeOverMinIO: the same on a MinIO store (a real server;
// with CI=true a MinIO that cannot start fails the test).
func TestCoordinatorTakeOverMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	for _, objects := range []bool{false, true} {
		t.Run(stateMode(objects), func(t *testing.T) {
			bucket := "takeover-" + stateMode(objects)
			srv.MakeBucket(t, bucket)
			c := newTestCluster(t)
			c.store, c.env = srv.URL(bucket, "job"), srv.Env()
			takeOver(c, srv.Store(t, bucket, "job"), objects)
		})
	}
}

func stateMode(objects bool) string {
	if objects {
		return "objects"
	}
	return "inline"
}

// takeOver: coordinator A runs the job with 3 workers and has completed a
// checkpoint.
//
//   - A second coordinator of the job on the same store, without
//     -takeover, is refused: it exits 1 naming A (its pid and address, the
//     message of snapshots.LeaseHeldError), and says how to take over.
//   - A is SIGSTOPped (with checkpoints every 20 ms, one is usually in
//     flight: its workers' acknowledgements wait in A's socket buffers). B
//     starts with -takeover on another address, with 3 workers of its own,
//     restores and completes a checkpoint. Then A is resumed: it must fail
//     with ErrLeaseLost (exit 1, saying so), and its workers, which kept
//     their tasks across the pause (A's heartbeat timeout is a minute), are
//     told that the job ended.
//   - B runs the job to an exact end. Every checkpoint B reported complete
//     is in the store, complete, not void, and loads with its states
//     verified, with B's manifest (its epoch, not A's: nothing of A replaced
//     it) and the state layout asked for (inline, or objects). Every
//     checkpoint A reported complete is one that B saw when it took over
//     (at most the one it restored): A completed none after the takeover.
//     The store holds no damaged checkpoint; the only unusable ones are
//     A's late manifests that B's seal voids.
func takeOver(c *testCluster, store snapshots.Store, objects bool) {
	t := c.t
	var layout []string
	if objects {
		layout = []string{"-inline-limit", "0"}
	}
	// A renews its lease every 6 s (a tenth of its timeout): woken, it
	// usually meets the fence at a write of its checkpoints (the one in
	// flight, or the next), not at a renewal.
	r := startRunning(c, 3, append(layout, "-heartbeat-timeout", "1m", "-lease-timeout", "1m")...)

	refused := c.start("coordinator refused", append(append(c.coordinatorFlags("127.0.0.1:0", 3), c.jobFlags()...), layout...)...)
	// The message of the *snapshots.LeaseHeldError that Start's error wraps.
	c.expectRefused(refused, "another instance runs it", "is held by", fmt.Sprintf("pid %d", r.coord.pid()), "address "+r.addr, "-takeover")

	if err := r.coord.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	b, baddr := c.startCoordinator("coordinator B", "127.0.0.1:0", 3, append(layout, "-takeover", "-retain", "1000000")...)
	var bWorkers []*child
	for i := range 3 {
		w, _ := c.startWorker("B's worker "+strconv.Itoa(i+1), baddr, "-register-timeout", "2m")
		bWorkers = append(bWorkers, w)
	}
	_, running := c.awaitEvent(b, 0, "running", nil)
	restored := running.uint("checkpoint")
	if restored < r.checkpoint {
		t.Errorf("B restored checkpoint %d, older than checkpoint %d, which A had reported complete", restored, r.checkpoint)
	}
	c.awaitEvent(b, 0, "checkpoint-completed", nil)

	if err := r.coord.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := c.exit(r.coord); code != 1 {
		t.Errorf("A, resumed after the takeover, exited %d, want 1", code)
	}
	if out := r.coord.output(); !strings.Contains(out, snapshots.ErrLeaseLost.Error()) {
		t.Errorf("A, resumed after the takeover, does not report %q", snapshots.ErrLeaseLost)
	}
	for _, w := range r.workers {
		if code := c.exit(w); code != 0 {
			t.Errorf("%s, a worker of A, exited %d once A failed, want 0", w.name, code)
		}
	}

	c.release()
	c.expectExact(b, bWorkers...)

	for _, ev := range events(r.coord, 0) {
		if ev.kind == "checkpoint-completed" && ev.uint("checkpoint") > restored {
			t.Errorf("A reported checkpoint %d complete (epoch %s), which B did not see when it took over and restored checkpoint %d",
				ev.uint("checkpoint"), ev.get("epoch"), restored)
		}
	}
	checkStore(t, store, b, restored, objects)
	for _, ev := range events(r.coord, 0) {
		if ev.kind == "failed" {
			t.Logf("A, resumed, failed: %s", ev.get("err"))
		}
	}
}

// checkStore checks the checkpoints that coordinator b reported complete
// against the store (see takeOver).
func checkStore(t *testing.T, store snapshots.Store, b *child, restored uint64, objects bool) {
	t.Helper()
	ctx := context.Background()
	cps := snapshots.NewCheckpoints(store, jobName, nil)
	infos, err := cps.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[uint64]snapshots.Info{}
	for _, in := range infos {
		listed[in.ID] = in
		if in.Complete && in.Err != nil && !errors.Is(in.Err, snapshots.ErrVoid) {
			t.Errorf("checkpoint %d in the store: %v", in.ID, in.Err)
		}
	}
	n := 0
	for _, ev := range events(b, 0) {
		if ev.kind != "checkpoint-completed" {
			continue
		}
		n++
		id := ev.uint("checkpoint")
		if id <= restored {
			t.Errorf("B completed checkpoint %d, not above checkpoint %d, which it restored", id, restored)
		}
		in, ok := listed[id]
		switch {
		case !ok:
			t.Errorf("checkpoint %d, which B reported complete, is not in the store", id)
			continue
		case !in.Complete || in.Err != nil:
			t.Errorf("checkpoint %d, which B reported complete, is listed complete=%v err=%v", id, in.Complete, in.Err)
		}
		rp, err := cps.LoadCheckpoint(ctx, id)
		if err != nil {
			t.Errorf("checkpoint %d, which B reported complete: %v", id, err)
			continue
		}
		if got, want := rp.Manifest.GetEpoch(), ev.uint("epoch"); got != want {
			t.Errorf("checkpoint %d, which B completed in epoch %d, has the manifest of epoch %d", id, want, got)
		}
		for _, e := range rp.Manifest.GetTasks() {
			if inline := len(e.GetState().GetInline()) > 0; inline == objects {
				t.Errorf("checkpoint %d: task %s's state is inline=%v (key %q, %d bytes inline), want inline=%v",
					id, e.GetTaskId(), inline, e.GetState().GetKey(), len(e.GetState().GetInline()), !objects)
			}
		}
	}
	if n == 0 {
		t.Error("B reported no checkpoint complete")
	}
	t.Logf("B restored checkpoint %d and completed %d checkpoints; the store lists %d", restored, n, len(infos))
}
