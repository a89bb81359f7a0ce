package actors

import "github.com/snapflow/snapflow/messages"

// workerCounts is what one worker last reported of one task.
type workerCounts struct {
	in, out uint64
	queued  int64
	blocked int64 // nanoseconds
}

// report takes the task counters that worker id reported (with a heartbeat
// answer or at the end of the job) and updates the job's: each task's
// figure is the sum over the workers that ran it. A worker's counters only
// grow while it keeps its id (it counts afresh under a new one), so the
// sums only grow.
func (c *clusterCoord) report(id string, tasks []*messages.TaskCounters) {
	if len(tasks) == 0 {
		return
	}
	if _, known := c.pids[id]; !known {
		return
	}
	n := len(c.j.sh.plan.Tasks)
	mine := c.counts[id]
	if mine == nil {
		mine = make([]workerCounts, n)
		c.counts[id] = mine
	}
	for _, t := range tasks {
		i := int(t.GetTask())
		if i >= n {
			continue
		}
		w := &mine[i]
		w.in, w.out = max(w.in, t.GetRecordsIn()), max(w.out, t.GetRecordsOut())
		w.blocked = max(w.blocked, t.GetBackpressureNanos())
		w.queued = max(0, t.GetQueuedBatches())
		c.sum(i)
	}
}

// sum sets task i's counters to the sum of the workers' reports.
func (c *clusterCoord) sum(i int) {
	var total workerCounts
	for _, counts := range c.counts {
		w := counts[i]
		total.in += w.in
		total.out += w.out
		total.queued += w.queued
		total.blocked += w.blocked
	}
	ctr := &c.j.sh.counters[i]
	ctr.in.Store(total.in)
	ctr.out.Store(total.out)
	ctr.queued.Store(total.queued)
	ctr.blocked.Store(total.blocked)
}

// forgetQueued drops the queued batches a lost worker reported: they are
// gone with it. What it counted stays counted.
func (c *clusterCoord) forgetQueued(id string) {
	for i := range c.counts[id] {
		if c.counts[id][i].queued != 0 {
			c.counts[id][i].queued = 0
			c.sum(i)
		}
	}
}
