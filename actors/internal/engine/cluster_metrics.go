package engine

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
	if _, known := c.pids[id]; !known || c.gone[id] {
		return // unknown, or lost: a late report must not bring back its queued batches
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

// sum sets task i's counters to the sum of the workers' reports and of
// what lost workers had counted.
func (c *clusterCoord) sum(i int) {
	var total workerCounts
	if c.retired != nil {
		total = c.retired[i]
	}
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

// retire folds what lost worker id counted into the retired counts and
// forgets it: its queued batches are gone with it, and its late reports
// are ignored.
func (c *clusterCoord) retire(id string) {
	c.gone[id] = true
	mine, ok := c.counts[id]
	if !ok {
		return
	}
	delete(c.counts, id)
	if c.retired == nil {
		c.retired = make([]workerCounts, len(c.j.sh.plan.Tasks))
	}
	for i, w := range mine {
		r := &c.retired[i]
		r.in, r.out, r.blocked = r.in+w.in, r.out+w.out, r.blocked+w.blocked
		c.sum(i)
	}
}
