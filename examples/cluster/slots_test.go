//go:build unix

package main

import (
	"strings"
	"testing"
)

// TestKilledWorkerReplaced is the three-shell run of docs/cluster.md with
// workers of 4 slots, too few for the job's 6 tasks once one is killed:
// the coordinator must wait for a replacement without spending its restart
// policy (at most 2 failures here; before, every placement attempt was a
// failure and the job failed with "not enough slots" in seconds), and the
// job must end exactly once on the survivor and the replacement.
func TestKilledWorkerReplaced(t *testing.T) {
	c := newTestCluster(t)
	c.workerFlags = []string{"-slots", "4"}
	r := startRunning(c, 2, "-max-failures", "2", "-failure-window", "1h")
	v := r.victim(t)
	from := len(r.coord.linesFrom(0))
	if err := r.workers[v].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.await(r.coord, from, "the wait for a worker", func(l string) bool { return strings.Contains(l, "waiting for a worker to join") })
	repl, _ := c.startWorker("replacement", r.addr)
	c.release()
	c.expectExact(r.coord, r.workers[1-v], repl)
}

// TestTooFewSlotsFailsEveryNode kills a worker of two when the other
// cannot run the job alone, and starts no replacement: once the slot
// timeout is up, the job fails, and the coordinator and the surviving
// worker both exit non-zero (before, the worker exited 0).
func TestTooFewSlotsFailsEveryNode(t *testing.T) {
	c := newTestCluster(t)
	c.workerFlags = []string{"-slots", "4"}
	r := startRunning(c, 2, "-slot-timeout", "1s")
	v := r.victim(t)
	if err := r.workers[v].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	c.await(r.coord, 0, "the job's failure", func(l string) bool { return strings.Contains(l, "too few slots") })
	if code := c.exit(r.coord); code != 1 {
		t.Errorf("the coordinator exited %d after the job failed, want 1", code)
	}
	survivor := r.workers[1-v]
	if code := c.exit(survivor); code != 1 {
		t.Errorf("the surviving worker exited %d after the job failed, want 1", code)
	}
	c.await(survivor, 0, "the worker's reason", func(l string) bool { return strings.Contains(l, "the job failed") })
}
