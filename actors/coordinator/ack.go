package coordinator

import (
	"time"

	"github.com/snapflow/snapflow/messages"
)

// Ack records a task's ack of the pending checkpoint. Acks from unknown
// tasks, for another checkpoint, or repeated, are ignored. The last missing
// ack returns WriteManifest.
func (c *Coordinator) Ack(now time.Time, a *messages.AckCheckpoint) []Action {
	c.observe(now)
	p := c.pending
	if a == nil || p == nil || p.writing || a.GetCheckpointId() != p.id {
		return nil
	}
	i, ok := c.index[a.GetTaskId()]
	if !ok || p.acks[i] != nil {
		return nil
	}
	p.acks[i] = a
	p.acked++
	if p.acked < len(c.tasks) {
		return nil
	}
	return []Action{c.writeManifest()}
}

// Decline aborts the pending checkpoint because a task could not snapshot;
// it counts as a failure. Declines from unknown tasks, for another
// checkpoint, or after every task acked, are ignored.
func (c *Coordinator) Decline(now time.Time, d *messages.DeclineCheckpoint) []Action {
	c.observe(now)
	p := c.pending
	if d == nil || p == nil || p.writing || d.GetCheckpointId() != p.id {
		return nil
	}
	if _, ok := c.index[d.GetTaskId()]; !ok {
		return nil
	}
	return c.fail(now, "declined by task "+d.GetTaskId()+": "+d.GetReason())
}

// ManifestWritten reports the outcome of WriteManifest for checkpoint id:
// Completed when err is nil, otherwise Aborted, counted as a failure.
// Reports for anything but the manifest being written are ignored.
func (c *Coordinator) ManifestWritten(now time.Time, id uint64, err error) []Action {
	c.observe(now)
	p := c.pending
	if p == nil || !p.writing || id != p.id {
		return nil
	}
	if err != nil {
		return c.fail(now, "write manifest: "+err.Error())
	}
	return c.complete(now)
}

// writeManifest hands the pending checkpoint's acks to the shell.
func (c *Coordinator) writeManifest() Action {
	p := c.pending
	p.writing = true
	acks := p.acks
	p.acks = nil
	return Action{Kind: WriteManifest, Checkpoint: p.id, Final: p.final, Acks: acks, Savepoint: p.savepoint}
}
