package engine

import (
	"context"
	"github.com/snapflow/snapflow/internal/dataflow"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// snapshot takes the task's part of checkpoint id: a synchronous copy of the
// state, the barrier on every output, then an asynchronous upload that ends
// in an ack (or a decline) to the job actor.
func (t *task) snapshot(id uint64, aligned time.Duration) {
	if f := t.sh.cfg.faults; f != nil && f.Snapshot != nil {
		f.Snapshot(t.plan.ID, id)
	}
	start := time.Now()
	st := &messages.TaskState{
		Job: t.sh.job, TaskId: t.plan.ID, Operator: t.plan.Operator, OperatorId: t.plan.OperatorID,
		Subtask: uint32(t.plan.Subtask), CheckpointId: id, Ended: t.exhausted,
		// The epoch names the state's object: a superseded holder's upload
		// never lands on a key another holder's manifest references.
		Epoch: t.epoch,
	}
	var savepoint string
	if t.savepointID == id {
		savepoint = t.savepointName
	}
	refs, finish, err := t.takeSnapshot(id, st, savepoint != "")
	t.flush()
	t.sendControl(outItem{barrier: &messages.Barrier{Epoch: t.epoch, CheckpointId: id, TimestampUnixNano: t.barrierTS, Savepoint: savepoint,
		BaseCheckpointId: t.barrierBase}})
	if err != nil {
		t.log.Error("snapshot failed; declining the checkpoint", "checkpoint", id, "err", err)
		t.decline(id, "snapshot: "+err.Error())
		return
	}
	syncTime := time.Since(start)
	sh, epoch, taskID, root, self, tracked := t.sh, t.epoch, t.plan.ID, t.root, t.self, t.incr != nil
	upload := func(ctx context.Context) { // retries of the store end with the checkpoint
		t0 := time.Now()
		if finish != nil { // the encoding of a state captured in the synchronous phase
			if err := finish(); err != nil {
				root.Send(sh.jobPID, &messages.DeclineCheckpoint{Epoch: epoch, CheckpointId: id, TaskId: taskID, Reason: "snapshot: " + err.Error(), WorkerId: sh.worker})
				return
			}
		}
		var h *messages.StateHandle
		var err error
		switch {
		case savepoint != "":
			h, err = sh.cps.PutSavepointState(ctx, savepoint, st)
		case refs != nil:
			h, err = sh.cps.PutTaskStateRefs(ctx, id, st, refs)
		default:
			h, err = sh.cps.PutTaskState(ctx, id, st)
		}
		if err != nil {
			root.Send(sh.jobPID, &messages.DeclineCheckpoint{Epoch: epoch, CheckpointId: id, TaskId: taskID, Reason: "upload: " + err.Error(), WorkerId: sh.worker})
			return
		}
		if tracked && savepoint == "" {
			root.Send(self, &uploadedMsg{epoch: epoch, id: id, handle: h})
		}
		root.Send(sh.jobPID, &messages.AckCheckpoint{
			Epoch: epoch, CheckpointId: id, TaskId: taskID, State: h, StateBytes: snapshots.StateSize(h), UploadedBytes: snapshots.UploadedSize(h),
			AlignmentNanos: aligned.Nanoseconds(), SyncNanos: syncTime.Nanoseconds(), AsyncNanos: time.Since(t0).Nanoseconds(),
			WorkerId: sh.worker,
		})
	}
	inc := sh.inc.Load()
	if sh.cfg.syncSnapshots { // stop the world: nothing else until the state is stored
		ctx, cancel := context.WithTimeout(inc.ctx, sh.timeout())
		defer cancel()
		upload(ctx)
		return
	}
	sh.goUploadCtx(inc.ctx, upload)
}

func (t *task) decline(id uint64, reason string) {
	t.root.Send(t.sh.jobPID, &messages.DeclineCheckpoint{Epoch: t.epoch, CheckpointId: id, TaskId: t.plan.ID, Reason: reason, WorkerId: t.sh.worker})
}

// takeSnapshot writes the task's state for checkpoint id into st: in full,
// or, when checkpoints are incremental and the task has a base, only the
// key groups to upload, with refs (non-nil) the sections of the others.
// An instance that captures its state now and encodes it later
// (dataflow.AsyncSnapshotter) returns finish, which completes st off the
// task's goroutine; nil means st is complete.
func (t *task) takeSnapshot(id uint64, st *messages.TaskState, savepoint bool) (refs []*messages.KeyGroupSection, finish func() error, err error) {
	as, _ := t.inst.(dataflow.AsyncSnapshotter)
	full := func() (func() error, error) {
		if as != nil {
			return as.SnapshotAsync(st, nil, true)
		}
		return nil, t.inst.Snapshot(st)
	}
	if t.incr == nil {
		finish, err = full()
		return nil, finish, err
	}
	clear(t.dirtyBuf)
	t.keyed.TakeDirtyKeyGroups(t.dirtyBuf)
	p := t.incr.Snapshot(id, t.barrierBase, t.dirtyBuf, savepoint)
	if p.Full {
		finish, err = full()
		return nil, finish, err
	}
	if p.Refs == nil {
		p.Refs = []*messages.KeyGroupSection{}
	}
	if as != nil {
		finish, err = as.SnapshotAsync(st, p.Upload, false)
		return p.Refs, finish, err
	}
	return p.Refs, nil, t.keyed.SnapshotKeyGroups(st, p.Upload)
}
