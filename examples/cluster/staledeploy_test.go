//go:build unix

package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// runningTasks matches a worker's log line of the tasks it starts, with
// their epoch.
var runningTasks = regexp.MustCompile(`msg="running tasks" .*\bepoch=(\d+)\b`)

// TestWorkerStoppedAtDeploy: the job writes its output with the file sink
// (-sink-dir, topology/filesink through topology.TwoPhaseCommitSink). A
// worker F is SIGSTOPped, and another worker K with tasks is SIGKILLed at
// once: the coordinator rolls back and places epoch E, with the sink among
// F's tasks, whose Deploy waits, unread, in F's socket. F, silent, is
// declared lost; epoch E+1 runs without it and completes a checkpoint.
// Only then is F resumed, with a Deploy of a replaced epoch to read. It
// must start none of E's tasks (its log has no "running tasks" for epoch
// E: it confirms a deployment with the coordinator before it spawns a
// task) and must drop them (its log says so). It registers again under a
// new id, and the job ends exact: the final checkpoint matches the closed
// form, and the committed part files hold every record's line once
// (checked by the coordinator, and here again).
func TestWorkerStoppedAtDeploy(t *testing.T) {
	c := newTestCluster(t)
	sinkDir := filepath.Join(c.dir, "out")
	c.job = []string{"-sink-dir", sinkDir}
	// F must still count as live when the coordinator places epoch E, a
	// restore after K's connection broke: a heartbeat timeout of 10 s
	// bounds that even on a busy machine under the race detector, where
	// 2 s did not always.
	r := startRunning(c, 4, "-heartbeat-timeout", "10s")
	// Placement is deterministic, by the order in which the workers joined:
	// with the first of them gone, the last one gets the sink. So K is the
	// first to join that runs tasks, and F the last to join.
	var joined []int // indexes into r.addrs, in the order of joining
	for _, ev := range events(r.coord, 0) {
		if i := slices.Index(r.addrs, nodeAddr(ev.get("node"))); ev.kind == "node-joined" && i >= 0 {
			joined = append(joined, i)
		}
	}
	if len(joined) != 4 {
		t.Fatalf("the coordinator reported %d of the 4 workers joining", len(joined))
	}
	f, k := joined[3], -1
	for _, i := range joined[:3] {
		if len(r.placed.tasksOn(r.addrs[i])) > 0 {
			k = i
			break
		}
	}
	if k < 0 {
		t.Fatalf("none of the first three workers to join runs a task in epoch 1: %v", r.placed)
	}
	stale, fAddr := r.workers[f], r.addrs[f]
	from := len(r.coord.linesFrom(0))
	if err := stale.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := r.workers[k].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	c.awaitEvent(r.coord, from, "node-lost", func(e eventLine) bool { return nodeAddr(e.get("node")) == r.addrs[k] })
	at, placed := c.awaitEvent(r.coord, from, "placed", func(e eventLine) bool { return e.uint("epoch") > 1 })
	epoch := placed.uint("epoch")
	p, err := parsePlacement(placed.get("placement"))
	if err != nil {
		t.Fatal(err)
	}
	staleTasks := p.tasksOn(fAddr)
	if !slices.Contains(staleTasks, "sink#0") {
		t.Fatalf("epoch %d does not place the sink on the stopped worker %s (was it declared lost first? has placement changed?): %s",
			epoch, fAddr, placed.get("placement"))
	}
	at, lost := c.awaitEvent(r.coord, at, "node-lost", func(e eventLine) bool { return nodeAddr(e.get("node")) == fAddr })
	if !strings.Contains(lost.get("err"), "no heartbeat") {
		t.Errorf("node-lost of the stopped worker says %q, want no heartbeat", lost.get("err"))
	}
	_, done := c.awaitEvent(r.coord, at, "checkpoint-completed", func(e eventLine) bool { return e.uint("epoch") > epoch })
	t.Logf("epoch %d placed %v on the stopped worker; it was declared lost in epoch %s; checkpoint %s completed in epoch %s",
		epoch, staleTasks, lost.get("epoch"), done.get("checkpoint"), done.get("epoch"))

	if err := stale.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	di, drop := c.await(stale, 0, "its log saying it drops the deployment of epoch "+strconv.FormatUint(epoch, 10), func(l string) bool {
		return strings.Contains(l, "the coordinator has replaced this deployment; dropping its tasks") ||
			strings.Contains(l, "lost the coordinator; dropping the tasks")
	})
	t.Logf("the resumed worker: %s", drop)
	// Declared lost, it registers again under a new id once it has heard
	// nothing for a heartbeat timeout; the job ends only after that, so
	// that the coordinator ends it on this worker too (it exits 0).
	c.await(stale, di, "its log saying it registered again", func(l string) bool { return strings.Contains(l, "registered with the coordinator") })
	c.release()
	c.expectExact(r.coord, append(append([]*child(nil), r.workers[:k]...), r.workers[k+1:]...)...)

	started := 0
	for _, l := range stale.linesFrom(0) {
		m := runningTasks.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		started++
		if m[1] == strconv.FormatUint(epoch, 10) {
			t.Errorf("the stopped worker started tasks of epoch %d, which the coordinator had replaced: %s", epoch, l)
		}
	}
	if started == 0 { // it ran epoch 1's: the pattern must find them
		t.Errorf("no line of the stopped worker matches %v, not even for epoch 1", runningTasks)
	}
	c.await(r.coord, 0, "the sink's line", func(l string) bool { return strings.HasPrefix(l, sinkPrefix) })
	res, err := checkSink(sinkDir, jobParams{records: 6000, keys: 200})
	if err != nil {
		t.Error(err)
	}
	var left []string
	entries, err := os.ReadDir(sinkDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			left = append(left, e.Name())
		}
	}
	t.Logf("the sink committed %d records in %d part files; in-progress files left: %v", res.records, res.parts, left)
}
