package engine

import (
	"github.com/snapflow/snapflow/internal/watermark"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// In-process messages. Data-path messages carry the epoch of their sender's
// incarnation; a task drops any whose epoch is not its own.

// batchMsg is a batch of records ([]T of the channel's element type).
type batchMsg struct {
	epoch uint64
	input int32  // the receiver's input channel index
	seq   uint64 // 1, 2, ... per channel and epoch
	data  any
	ts    []int64 // the records' timestamps on a timed channel
	// mark, when not markNone, makes the message a watermark (wm) or the
	// marker of an input's end that a timed task queues behind the
	// input's last batch: no records, no seq.
	mark mark
	wm   watermark.Status
	// replayed: channel state of an unaligned checkpoint, processed
	// again after a restore (it returns no credit).
	replayed bool
}

type mark uint8

const (
	markNone mark = iota
	markWatermark
	markEnd
)

// pollMsg asks a source task to produce.
type pollMsg struct{}

// wakeMsg tells an idle source task that records may be available.
type wakeMsg struct{ epoch uint64 }

// diskFailedMsg tells a task that its database on disk failed (see
// diskstate.DB.OnFailure): it fails at once, whatever it is doing.
type diskFailedMsg struct {
	epoch uint64
	err   error
}

// uploadedMsg tells a task where its snapshot of checkpoint id is stored,
// before its ack leaves: a later checkpoint may build on it (see
// snapshots/incremental). It reaches the task before the barrier of any
// checkpoint triggered after id completed.
type uploadedMsg struct {
	epoch, id uint64
	handle    *messages.StateHandle
	db        uint64 // the database whose files handle.Disk lists
}

// lingerMsg asks a task to flush its partly filled batches.
type lingerMsg struct{ epoch uint64 }

// alignTimeoutMsg says that the alignment of checkpoint id has waited the
// alignment timeout.
type alignTimeoutMsg struct{ epoch, id uint64 }

// tickMsg wakes the job actor's coordinator.
type tickMsg struct{ gen uint64 }

// restartMsg starts the restore of epoch after the restart backoff.
type restartMsg struct{ epoch uint64 }

// restorePointMsg carries the checkpoint chosen for a restore.
type restorePointMsg struct {
	epoch   uint64
	restore *snapshots.Restorable
	// named: restore is the job's origin (a savepoint or checkpoint it was
	// started from), which has completed no checkpoint since.
	named bool
	err   error
	// savepoints says, for each savepoint in doubt, whether its manifest
	// is in the store (see savepointsLanded).
	savepoints map[uint64]bool
	// stopErrs: the stop-with-savepoints among them that landed, but could
	// not be recorded as the job's origin (see stoppedAt).
	stopErrs map[uint64]error
	attempts int
}

// manifestWrittenMsg reports the end of a manifest upload.
type manifestWrittenMsg struct {
	epoch uint64
	id    uint64
	err   error
	// recovery: the savepoint id is also a checkpoint recovery can restore
	// (see recoveryPoint).
	recovery bool
	// stopErr: the stop-with-savepoint's savepoint is complete, but it
	// could not be recorded as the job's origin (see stoppedAt).
	stopErr error
}

// cleanedMsg reports the end of a pass deleting aborted checkpoints below.
type cleanedMsg struct{ below uint64 }

// checkpointRequest is a manual checkpoint request.
type checkpointRequest struct {
	reply chan checkpointResult
}

type checkpointResult struct {
	id  uint64
	err error
}

// stopRequest stops the job.
type stopRequest struct{ cause error }

var (
	thePoll = &pollMsg{}
)
