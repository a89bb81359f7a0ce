package coordinator

import (
	"fmt"
	"strings"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// Tick advances time: it aborts the pending checkpoint once it is older than
// Config.Timeout, and triggers the next checkpoint when it is due.
func (c *Coordinator) Tick(now time.Time) []Action {
	c.observe(now)
	if p := c.pending; p != nil {
		if p.writing || now.Before(p.triggered.Add(c.cfg.Timeout)) {
			return nil
		}
		return c.fail(now, "timed out after "+c.cfg.Timeout.String()+", waiting for "+c.missing(p))
	}
	return c.maybeTrigger(now)
}

// missingShown bounds the tasks a timed-out checkpoint's reason names.
const missingShown = 8

// missing names the tasks that have not acknowledged p, the first
// missingShown of them.
func (c *Coordinator) missing(p *pending) string {
	var names []string
	n := 0
	for i, a := range p.acks {
		if a != nil {
			continue
		}
		if n++; n <= missingShown {
			names = append(names, c.tasks[i])
		}
	}
	s := strings.Join(names, ", ")
	if n > missingShown {
		s += fmt.Sprintf(" and %d more", n-missingShown)
	}
	if n == 1 {
		return "task " + s
	}
	return fmt.Sprintf("%d tasks: %s", n, s)
}

// RequestCheckpoint asks for a checkpoint now, ignoring Interval and
// MinPause. With none pending it is triggered at once; otherwise the request
// is queued and triggered as soon as the pending checkpoint ends. Request req
// is answered by RequestDone when its checkpoint completes or aborts. After
// Finish, requests are answered by the final checkpoint.
func (c *Coordinator) RequestCheckpoint(now time.Time, req uint64) []Action {
	c.observe(now)
	switch p := c.pending; {
	case c.finalDone:
		return []Action{{Kind: RequestDone, Request: req, Checkpoint: c.finalID}}
	case p != nil && p.final:
		p.requests = append(p.requests, req)
		return nil
	case p != nil || c.failed:
		c.queued = append(c.queued, req)
		return nil
	}
	return c.trigger(now, []uint64{req})
}

// RequestSavepoint asks for a savepoint: a checkpoint of its own, which
// answers request req alone and is marked Savepoint in its actions. It is
// triggered at once when no checkpoint is pending, otherwise as soon as the
// pending one ends, before any queued checkpoint request. Its failure is
// not counted against Config.TolerableFailures (a failed savepoint leaves
// the job running), nor does its completion reset the count of failed
// checkpoints. Once the sources have ended (Finish) it is answered at
// once with an error wrapping ErrFinishing.
func (c *Coordinator) RequestSavepoint(now time.Time, req uint64) []Action {
	c.observe(now)
	if c.finishing || c.finalDone {
		return []Action{{Kind: RequestDone, Request: req, Err: fmt.Errorf("%w: its sources have ended, and the final checkpoint is its last", ErrFinishing)}}
	}
	if c.pending != nil || c.failed {
		c.savepoints = append(c.savepoints, req)
		return nil
	}
	return c.triggerSavepoint(now, req)
}

// Finish says that every source is exhausted: the final checkpoint is taken
// as soon as none is pending, ignoring Interval and MinPause, and retried
// with a new id at once if it aborts. Periodic checkpoints stop.
func (c *Coordinator) Finish(now time.Time) []Action {
	c.observe(now)
	if c.finishing {
		return nil
	}
	c.finishing = true
	var acts []Action
	for _, r := range c.savepoints {
		acts = append(acts, Action{Kind: RequestDone, Request: r,
			Err: fmt.Errorf("%w: its sources ended before the savepoint was triggered", ErrFinishing)})
	}
	c.savepoints = nil
	return append(acts, c.maybeTrigger(now)...)
}

// maybeTrigger triggers the next checkpoint if one is due at now.
func (c *Coordinator) maybeTrigger(now time.Time) []Action {
	if c.pending != nil || c.failed {
		return nil
	}
	if len(c.savepoints) > 0 {
		req := c.savepoints[0]
		c.savepoints = c.savepoints[1:]
		return c.triggerSavepoint(now, req)
	}
	if len(c.queued) > 0 {
		reqs := c.queued
		c.queued = nil
		return c.trigger(now, reqs)
	}
	if due, ok := c.due(); !ok || now.Before(due) {
		return nil
	}
	return c.trigger(now, nil)
}

// triggerSavepoint starts the next checkpoint as the savepoint of req.
func (c *Coordinator) triggerSavepoint(now time.Time, req uint64) []Action {
	acts := c.trigger(now, []uint64{req})
	c.pending.savepoint = req
	for i := range acts {
		acts[i].Savepoint = req
	}
	return acts
}

// trigger starts the next checkpoint, answering reqs.
func (c *Coordinator) trigger(now time.Time, reqs []uint64) []Action {
	p := &pending{
		id:        c.nextID,
		final:     c.finishing,
		triggered: now,
		acks:      make([]*messages.AckCheckpoint, len(c.tasks)),
		requests:  reqs,
	}
	c.nextID++
	c.pending = p
	c.lastTrigger = now
	c.stats.Triggered++
	acts := []Action{{Kind: Trigger, Checkpoint: p.id, Final: p.final, Timestamp: now}}
	if len(c.tasks) == 0 {
		acts = append(acts, c.writeManifest())
	}
	return acts
}
