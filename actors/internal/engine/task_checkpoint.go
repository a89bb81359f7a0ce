package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/snapflow/snapflow/internal/dataflow"

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
	refs, finish, files, err := t.takeSnapshot(id, st, savepoint != "")
	var reuse reusePlan
	if files != nil && t.incr != nil {
		reuse = t.disk.plan(files.DB, id, t.barrierBase)
	}
	t.flush()
	barrier := &messages.Barrier{Epoch: t.epoch, CheckpointId: id, TimestampUnixNano: t.barrierTS, Savepoint: savepoint, BaseCheckpointId: t.barrierBase,
		Aligned: t.barrierAligned, Stop: savepoint != "" && t.stopAt == id}
	var outWait *outSwitch                             // aligned with a timeout: the channel state of the outputs, once known
	var persist *inFlight                              // unaligned: the channel state of the inputs, once complete
	switched := t.persist != nil && t.persist.id == id // unaligned, or an alignment timed out
	if savepoint == "" && !t.barrierAligned && (t.sh.cfg.unaligned || switched) {
		st.InFlight = t.overtake(barrier)
		if p := t.persist; p != nil && p.id == id {
			persist = p
		}
	} else {
		t.sendControl(outItem{barrier: barrier})
		if savepoint == "" && !t.barrierAligned {
			outWait = t.watchOutBarrier(id)
		}
	}
	if err != nil {
		if files != nil {
			files.Release()
		}
		t.log.Error("snapshot failed; declining the checkpoint", "checkpoint", id, "err", err)
		t.decline(id, "snapshot: "+err.Error())
		return
	}
	syncTime := time.Since(start)
	sh, epoch, taskID, root, self, tracked := t.sh, t.epoch, t.plan.ID, t.root, t.self, t.incr != nil
	upload := func(ctx context.Context) { // retries of the store end with the checkpoint
		t0 := time.Now()
		var disk *messages.DiskCheckpoint
		kept := false     // the files moved to the local copies
		if files != nil { // the database's checkpoint: store the files the base does not hold
			defer files.Release()
			if err := files.Take(); err != nil {
				root.Send(sh.jobPID, &messages.DeclineCheckpoint{Epoch: epoch, CheckpointId: id, TaskId: taskID, Reason: "snapshot: " + err.Error(), WorkerId: sh.worker})
				return
			}
			defer func() {
				if !kept {
					_ = files.Remove()
				}
			}()
			var err error
			if disk, err = uploadDisk(ctx, sh.cps, id, epoch, taskID, files, reuse.reuse(files.Files, nil)); err != nil {
				root.Send(sh.jobPID, &messages.DeclineCheckpoint{Epoch: epoch, CheckpointId: id, TaskId: taskID, Reason: "upload: " + err.Error(), WorkerId: sh.worker})
				return
			}
		}
		if finish != nil { // the encoding of a state captured in the synchronous phase
			if err := finish(); err != nil {
				root.Send(sh.jobPID, &messages.DeclineCheckpoint{Epoch: epoch, CheckpointId: id, TaskId: taskID, Reason: "snapshot: " + err.Error(), WorkerId: sh.worker})
				return
			}
		}
		if outWait != nil { // the barrier has yet to leave every output
			select {
			case items := <-outWait.out:
				st.InFlight = append(st.InFlight, items...)
			case <-outWait.gone:
				return // given up: aborted, or the incarnation ended
			case <-ctx.Done():
				return
			}
		}
		if persist != nil { // the barrier has yet to arrive on every input
			select {
			case items := <-persist.out:
				st.InFlight = append(st.InFlight, items...)
			case <-persist.gone:
				return // given up: declined by the task
			case <-ctx.Done():
				return
			}
		}
		var h *messages.StateHandle
		var err error
		switch {
		case savepoint != "":
			h, err = sh.cps.PutSavepointState(ctx, savepoint, st)
		case disk != nil:
			h, err = sh.cps.PutTaskStateDisk(ctx, id, st, refs, disk)
			// Once stored, the files stay on this machine for a restore
			// here, before the ack: a checkpoint complete has its copies.
			if dcfg := sh.cfg.diskState; err == nil && dcfg != nil && !dcfg.NoLocalRecovery {
				kerr := dcfg.KeepLocal(sh.job, taskID, id, files.Checkpoint)
				if kept = kerr == nil; !kept {
					sh.log.Warn("could not keep a local copy of the checkpoint's database files", "task", taskID, "checkpoint", id, "err", kerr)
				}
			}
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
			msg := &uploadedMsg{epoch: epoch, id: id, handle: h}
			if files != nil {
				msg.db = files.DB
			}
			root.Send(self, msg)
		}
		root.Send(sh.jobPID, &messages.AckCheckpoint{
			Epoch: epoch, CheckpointId: id, TaskId: taskID, State: h, StateBytes: snapshots.StateSize(h), UploadedBytes: snapshots.UploadedSize(h),
			AlignmentNanos: aligned.Nanoseconds(), SyncNanos: syncTime.Nanoseconds(), AsyncNanos: time.Since(t0).Nanoseconds(),
			WorkerId: sh.worker, InFlightBytes: inFlightBytes(st.InFlight),
		})
	}
	// The task's context, not sh.inc's: a task of an incarnation being
	// replaced may still snapshot, and its upload ends with it.
	if sh.cfg.syncSnapshots { // stop the world: nothing else until the state is stored
		ctx, cancel := context.WithTimeout(t.ctx, sh.timeout())
		defer cancel()
		upload(ctx)
		return
	}
	sh.goUploadCtx(t.ctx, upload)
}

func (t *task) decline(id uint64, reason string) {
	t.root.Send(t.sh.jobPID, &messages.DeclineCheckpoint{Epoch: t.epoch, CheckpointId: id, TaskId: t.plan.ID, Reason: reason, WorkerId: t.sh.worker})
}

// takeSnapshot writes the task's state for checkpoint id into st: in full,
// or, when checkpoints are incremental and the task has a base, only the
// key groups to upload, with refs (non-nil) the sections of the others.
// An instance that captures its state now and encodes it later
// (dataflow.AsyncSnapshotter) returns finish, which completes st off the
// task's goroutine; nil means st is complete. An instance that keeps state
// on disk returns, but for a savepoint, files: a checkpoint of its
// database, whose files the upload stores, and st without those states.
func (t *task) takeSnapshot(id uint64, st *messages.TaskState, savepoint bool) (refs []*messages.KeyGroupSection, finish func() error, files *dataflow.DiskFiles, err error) {
	as, _ := t.inst.(dataflow.AsyncSnapshotter)
	dc, _ := t.inst.(dataflow.DiskCheckpointer)
	onDisk := dc != nil && !savepoint && dc.OnDisk()
	name := strconv.FormatUint(id, 10)
	full := func() (func() error, *dataflow.DiskFiles, error) {
		switch {
		case onDisk:
			files, err := dc.SnapshotFiles(st, nil, true, name)
			return nil, files, err
		case as != nil:
			finish, err := as.SnapshotAsync(st, nil, true)
			return finish, nil, err
		}
		return nil, nil, t.inst.Snapshot(st)
	}
	if t.incr == nil {
		finish, files, err = full()
		return nil, finish, files, err
	}
	clear(t.dirtyBuf)
	t.keyed.TakeDirtyKeyGroups(t.dirtyBuf)
	p := t.incr.Snapshot(id, t.barrierBase, t.dirtyBuf, savepoint)
	if p.Full {
		finish, files, err = full()
		return nil, finish, files, err
	}
	if p.Refs == nil {
		p.Refs = []*messages.KeyGroupSection{}
	}
	switch {
	case onDisk:
		files, err = dc.SnapshotFiles(st, p.Upload, false, name)
		return p.Refs, nil, files, err
	case as != nil:
		finish, err = as.SnapshotAsync(st, p.Upload, false)
		return p.Refs, finish, nil, err
	}
	return p.Refs, nil, nil, t.keyed.SnapshotKeyGroups(st, p.Upload)
}
