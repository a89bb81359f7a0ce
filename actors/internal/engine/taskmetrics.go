package engine

import (
	"reflect"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// taskCounters are one task's counters. They live in the job's shared state
// (one per task of the plan, allocated once at Start), so that they outlive
// the task actors, which are made anew for every epoch. The task updates
// them once per batch, never per record; any goroutine reads them.
type taskCounters struct {
	in, out atomic.Uint64
	// queued is the number of batches waiting for credit on the task's
	// outputs now.
	queued atomic.Int64
	// blocked is the backpressure of the closed intervals, in nanoseconds;
	// blockedSince is when the open one began (monoNow), 0 when none is.
	blocked, blockedSince atomic.Int64
	// read is the highest backpressure reported, so that readers always
	// see it grow (see backpressure).
	read atomic.Int64
	// One cache line per task: tasks count from different goroutines.
	_ [16]byte
}

// newCounters returns the counters of n tasks.
func newCounters(n int) []taskCounters { return make([]taskCounters, n) }

// monoStart is the origin of monoNow.
var monoStart = time.Now()

// monoNow is a monotonic clock in nanoseconds, never 0.
func monoNow() int64 { return int64(time.Since(monoStart)) + 1 }

// startBlocked opens a backpressure interval at now (monoNow).
func (c *taskCounters) startBlocked(now int64) { c.blockedSince.Store(now) }

// endBlocked closes the backpressure interval opened at since. The open
// interval is withdrawn before it is counted: a reader in between sees a
// little less, never the interval twice (backpressure keeps what it read).
// A newer interval, opened by a later incarnation of the task, stays.
func (c *taskCounters) endBlocked(since int64) {
	c.blockedSince.CompareAndSwap(since, 0)
	c.blocked.Add(monoNow() - since)
}

// backpressure returns the backpressure so far, the open interval
// included. It never returns less than it returned before.
func (c *taskCounters) backpressure() time.Duration {
	v := c.blocked.Load()
	if since := c.blockedSince.Load(); since != 0 {
		v += max(0, monoNow()-since)
	}
	for {
		old := c.read.Load()
		if v <= old {
			return time.Duration(old)
		}
		if c.read.CompareAndSwap(old, v) {
			return time.Duration(v)
		}
	}
}

// batchLen is the number of records of batch, a []T (0 for anything else).
// It costs a few nanoseconds per batch and allocates nothing.
func batchLen(batch any) int {
	if v := reflect.ValueOf(batch); v.Kind() == reflect.Slice {
		return v.Len()
	}
	return 0
}

// TaskMetrics returns every task's counters (see TaskMetrics), in the
// plan's order. Reading them costs a few atomic loads per task; the tasks
// count per batch, not per record.
//
// In cluster mode the tasks run in the workers, which send their counters
// to the coordinator with every heartbeat answer, and a task's final ones
// when it finishes: the coordinator's figures are as of each worker's last
// report. A lost worker's last report keeps counting (the records it
// handled were handled), and its queued batches are dropped.
func (j *Job) TaskMetrics() []TaskMetrics {
	out := make([]TaskMetrics, 0, len(j.sh.plan.Tasks))
	ended := false
	select {
	case <-j.done: // nothing waits any more (a cluster's last reports may say otherwise)
		ended = true
	default:
	}
	for i, t := range j.sh.plan.Tasks {
		c := &j.sh.counters[i]
		m := TaskMetrics{Task: t.ID, Operator: t.Operator, Subtask: t.Subtask,
			RecordsIn: c.in.Load(), RecordsOut: c.out.Load(), QueuedBatches: int(max(0, c.queued.Load())),
			Backpressure: c.backpressure()}
		if ended {
			m.QueuedBatches = 0
		}
		out = append(out, m)
	}
	return out
}

// reportCounters returns the counters of the tasks that have counted
// anything, for the coordinator (cluster mode).
func reportCounters(cs []taskCounters) []*messages.TaskCounters {
	var out []*messages.TaskCounters
	for i := range cs {
		if r := cs[i].report(i); r.RecordsIn != 0 || r.RecordsOut != 0 || r.QueuedBatches != 0 || r.BackpressureNanos != 0 {
			out = append(out, r)
		}
	}
	return out
}

// report returns the counters of task idx, for the coordinator.
func (c *taskCounters) report(idx int) *messages.TaskCounters {
	return &messages.TaskCounters{Task: uint32(idx), RecordsIn: c.in.Load(), RecordsOut: c.out.Load(),
		QueuedBatches: max(0, c.queued.Load()), BackpressureNanos: int64(c.backpressure())}
}
