package engine

import (
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// TestLostWorkerCounts: a lost worker's counts stay counted, its queued
// batches go, and a late report of it (a heartbeat answer in flight, or a
// hung worker answering when it wakes) brings nothing back; a worker's
// counts, retired or live, only grow the job's sums.
func TestLostWorkerCounts(t *testing.T) {
	sh := &shared{plan: &dataflow.Plan{Tasks: make([]*dataflow.TaskPlan, 2)}, counters: newCounters(2)}
	c := &clusterCoord{j: &jobActor{sh: sh}, pids: map[string]*actor.PID{"w1": actor.NewPID("x", "y"), "w2": actor.NewPID("x", "z")},
		counts: map[string][]workerCounts{}, gone: map[string]bool{}}
	c.report("w1", []*messages.TaskCounters{{Task: 0, RecordsIn: 5, RecordsOut: 10, QueuedBatches: 3, BackpressureNanos: 7}})
	c.report("w2", []*messages.TaskCounters{{Task: 0, RecordsOut: 1}})
	if q, out := sh.counters[0].queued.Load(), sh.counters[0].out.Load(); q != 3 || out != 11 {
		t.Fatalf("before the loss: queued %d, out %d; want 3, 11", q, out)
	}
	c.retire("w1")
	c.report("w1", []*messages.TaskCounters{{Task: 0, RecordsIn: 6, RecordsOut: 12, QueuedBatches: 4}})
	c.report("w2", []*messages.TaskCounters{{Task: 0, RecordsOut: 2}})
	ctr := &sh.counters[0]
	if q, in, out, bp := ctr.queued.Load(), ctr.in.Load(), ctr.out.Load(), ctr.blocked.Load(); q != 0 || in != 5 || out != 12 || bp != 7 {
		t.Fatalf("after the loss and a late report: queued %d, in %d, out %d, backpressure %d; want 0, 5, 12, 7", q, in, out, bp)
	}
	if len(c.counts) != 1 {
		t.Fatalf("%d workers' reports kept, want only the live one's", len(c.counts))
	}
}
