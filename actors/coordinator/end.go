package coordinator

import (
	"fmt"
	"time"
)

// complete ends the pending checkpoint successfully.
func (c *Coordinator) complete(now time.Time) []Action {
	p := c.end(now)
	c.stats.Completed++
	if p.savepoint == 0 { // a savepoint neither is recovery's nor proves checkpoints work
		c.stats.LastCompleted = p.id
		c.stats.ConsecutiveFailures = 0
	}
	if p.final {
		c.finalDone, c.finalID = true, p.id
	}
	acts := []Action{{Kind: Completed, Checkpoint: p.id, Final: p.final, Savepoint: p.savepoint}}
	for _, r := range p.requests {
		acts = append(acts, Action{Kind: RequestDone, Request: r, Checkpoint: p.id})
	}
	return append(acts, c.maybeTrigger(now)...)
}

// fail aborts the pending checkpoint as a failure.
func (c *Coordinator) fail(now time.Time, reason string) []Action {
	p := c.end(now)
	c.stats.Aborted++
	acts := []Action{{Kind: Aborted, Checkpoint: p.id, Final: p.final, Reason: reason, Savepoint: p.savepoint}}
	for _, r := range p.requests {
		err := fmt.Errorf("%w: checkpoint %d: %s", ErrAborted, p.id, reason)
		acts = append(acts, Action{Kind: RequestDone, Request: r, Checkpoint: p.id, Err: err})
	}
	if p.savepoint == 0 { // a failed savepoint leaves the job running
		acts = append(acts, c.countFailure(reason)...)
	}
	return append(acts, c.maybeTrigger(now)...)
}

// countFailure counts a failed checkpoint and fails the job, once, when more
// failed in a row than tolerated.
func (c *Coordinator) countFailure(reason string) []Action {
	c.stats.ConsecutiveFailures++
	tol := c.cfg.TolerableFailures
	if tol < 0 || c.failed || c.stats.ConsecutiveFailures <= uint64(tol) {
		return nil
	}
	c.failed = true
	err := fmt.Errorf("%w: %d in a row, %d tolerated; last: %s",
		ErrTooManyFailures, c.stats.ConsecutiveFailures, tol, reason)
	return []Action{{Kind: FailJob, Reason: reason, Err: err}}
}

// end clears the pending checkpoint and returns it.
func (c *Coordinator) end(now time.Time) *pending {
	p := c.pending
	c.pending = nil
	c.lastEnd = now
	return p
}

// Reset handles a job failover. The pending checkpoint is aborted (not
// counted as a failure), unless its manifest is being written: then it is
// InDoubt, and its manual requests go with it to the shell. Other manual
// requests, pending or queued, fail with an
// error wrapping ErrFailover; Finish is forgotten, since the sources replay
// from a checkpoint; and the clock restarts at now. Ids keep increasing. If
// FailJob was emitted, triggering resumes and the failure count restarts.
func (c *Coordinator) Reset(now time.Time) []Action {
	c.observe(now)
	var acts []Action
	switch p := c.pending; {
	case p != nil && p.writing:
		// The manifest may land: the shell settles the outcome.
		c.pending = nil
		acts = append(acts, Action{Kind: InDoubt, Checkpoint: p.id, Final: p.final, Requests: p.requests, Savepoint: p.savepoint})
	case p != nil:
		c.pending = nil
		c.stats.Aborted++
		acts = append(acts, Action{Kind: Aborted, Checkpoint: p.id, Final: p.final, Reason: "job failover", Savepoint: p.savepoint})
		for _, r := range p.requests {
			err := fmt.Errorf("%w: checkpoint %d aborted", ErrFailover, p.id)
			acts = append(acts, Action{Kind: RequestDone, Request: r, Checkpoint: p.id, Err: err})
		}
	}
	for _, r := range append(c.savepoints, c.queued...) {
		err := fmt.Errorf("%w: request %d not triggered", ErrFailover, r)
		acts = append(acts, Action{Kind: RequestDone, Request: r, Err: err})
	}
	c.queued, c.savepoints = nil, nil
	c.finishing, c.finalDone = false, false
	if c.failed {
		c.failed = false
		c.stats.ConsecutiveFailures = 0
	}
	c.lastTrigger, c.lastEnd = now, now
	return acts
}
