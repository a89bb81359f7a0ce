package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// apply carries out the coordinator's actions. Once the job is not running
// (a failover), only the answers and notices are carried out.
func (j *jobActor) apply(acts []coordinator.Action) {
	for _, a := range acts {
		if j.phase != phaseRunning && (a.Kind == coordinator.Trigger || a.Kind == coordinator.WriteManifest || a.Kind == coordinator.FailJob) {
			continue
		}
		switch a.Kind {
		case coordinator.Trigger:
			j.trigger(a)
		case coordinator.WriteManifest:
			j.writeManifest(a)
		case coordinator.Completed:
			j.completed(a)
		case coordinator.Aborted:
			j.aborted(a)
		case coordinator.RequestDone:
			if reply := j.requests[a.Request]; reply != nil {
				reply <- checkpointResult{id: a.Checkpoint, err: a.Err}
				delete(j.requests, a.Request)
			}
			if sp := j.savepoints[a.Request]; sp != nil && a.Err != nil {
				delete(j.savepoints, a.Request)
				j.savepointEnded(sp.name)
			}
		case coordinator.FailJob:
			j.onFailure(fmt.Errorf("checkpoints keep failing: %w", a.Err))
		case coordinator.InDoubt:
			j.log.Warn("the failover came while the manifest of a checkpoint was being written: it counts as complete only if the manifest landed",
				"checkpoint", a.Checkpoint)
			d := inDoubt{final: a.Final, requests: a.Requests}
			if sp := j.savepoints[a.Savepoint]; sp != nil {
				d.savepoint, d.stop = sp.name, sp.stop
			}
			j.inDoubt[a.Checkpoint] = d
		}
	}
	j.armTimer()
}

func (j *jobActor) trigger(a coordinator.Action) {
	j.nextID = max(j.nextID, a.Checkpoint+1)
	j.triggeredAt[a.Checkpoint] = a.Timestamp
	j.log.Debug("triggering checkpoint", "checkpoint", a.Checkpoint, "final", a.Final)
	m := &messages.TriggerCheckpoint{Epoch: j.epoch, CheckpointId: a.Checkpoint, TimestampUnixNano: a.Timestamp.UnixNano(), Aligned: a.Final}
	if j.sh.cfg.incremental {
		m.BaseCheckpointId = j.base
	}
	if sp := j.savepoints[a.Savepoint]; sp != nil {
		m.Savepoint, m.Stop = sp.name, sp.stop
		j.log.Info("triggering a savepoint", "savepoint", sp.name, "checkpoint", a.Checkpoint, "stop", sp.stop)
	}
	j.emit(Event{Kind: EventCheckpointTriggered, Time: a.Timestamp, Epoch: j.epoch, Checkpoint: a.Checkpoint, Final: a.Final, Savepoint: m.Savepoint})
	for _, s := range j.sources {
		j.send(j.sh.pids[s], m)
	}
}

func (j *jobActor) writeManifest(a coordinator.Action) {
	m := &messages.Manifest{
		Job: j.sh.job, CheckpointId: a.Checkpoint, Epoch: j.epoch, TimestampUnixNano: time.Now().UnixNano(),
		TopologyFingerprint: j.sh.plan.Fingerprint, Final: a.Final, MaxParallelism: uint32(j.sh.plan.MaxParallelism),
		Savepoint: j.savepointName(a.Savepoint), Operators: j.sh.operators, Topology: j.sh.plan.Topology(),
	}
	// A savepoint's and the final checkpoint's barriers align whatever the
	// mode (see TriggerCheckpoint.aligned).
	m.AtLeastOnce = j.sh.cfg.atLeastOnce && m.Savepoint == "" && !a.Final
	j.figures[a.Checkpoint] = figuresOf(j.sh.plan, a.Acks)
	for _, ack := range a.Acks {
		t := j.sh.plan.Task(ack.TaskId)
		e := &messages.TaskStateEntry{TaskId: ack.TaskId, Operator: t.Operator, Subtask: uint32(t.Subtask), State: ack.State,
			OperatorId: t.OperatorID, Parallelism: uint32(t.Parallelism), InFlightBytes: ack.GetInFlightBytes()}
		if t.Keyed { // the key groups whose state the task stored
			e.KeyGroupStart, e.KeyGroupEnd = uint32(t.KeyGroupStart), uint32(t.KeyGroupEnd)
		}
		m.Tasks = append(m.Tasks, e)
	}
	sh, root, self, epoch := j.sh, j.sh.system.Root, j.self, j.epoch
	stop := j.savepoints[a.Savepoint] != nil && j.savepoints[a.Savepoint].stop
	j.manifests++ // a failover waits for it: the manifest may still land
	// Not cancelled when the job stops: a manifest write is either done or
	// not started, never abandoned half-way (Stop waits for it).
	sh.goUploadCtx(context.WithoutCancel(sh.uploadCtx), func(ctx context.Context) {
		var err, stopErr error
		recovery := false
		switch {
		case m.Savepoint != "":
			if err = sh.cps.PutSavepointManifest(ctx, m); err == nil {
				if stop {
					stopErr = stoppedAt(ctx, sh, m.GetSavepoint(), m.GetCheckpointId())
				} else {
					recovery = recoveryPoint(ctx, sh, m)
				}
			}
		default:
			err = sh.cps.PutManifest(ctx, m)
		}
		root.Send(self, &manifestWrittenMsg{epoch: epoch, id: m.CheckpointId, err: err, recovery: recovery, stopErr: stopErr})
	})
}

func (j *jobActor) completed(a coordinator.Action) {
	if a.Savepoint != 0 {
		j.savepointCompleted(a)
		return
	}
	took := time.Since(j.triggeredAt[a.Checkpoint])
	delete(j.triggeredAt, a.Checkpoint)
	j.lastCompleted = max(j.lastCompleted, a.Checkpoint)
	j.base = a.Checkpoint
	ev := j.takeFigures(a.Checkpoint).event(Event{Kind: EventCheckpointCompleted, Epoch: j.epoch, Checkpoint: a.Checkpoint, Final: a.Final, Duration: took})
	j.log.Debug("checkpoint complete", "checkpoint", a.Checkpoint, "final", a.Final, "bytes", ev.Bytes, "took", took)
	j.emit(ev)
	// Every task acknowledges the final checkpoint's completion once it has
	// handled it (see checkDone).
	m := &messages.CompleteCheckpoint{Epoch: j.epoch, CheckpointId: a.Checkpoint, Commit: true, Ack: a.Final}
	if a.Final {
		j.final = a.Checkpoint
	}
	for _, pid := range j.sh.pids {
		j.send(pid, m)
	}
	// One retention at a time: when checkpoints complete faster than old
	// ones are deleted, the next completion catches up. The final checkpoint
	// always gets its pass, which the job waits for before it ends.
	if sh := j.sh; sh.retaining.CompareAndSwap(false, true) || a.Final {
		keep, id, root, self := sh.cfg.retained, a.Checkpoint, sh.system.Root, j.self
		sh.goUploadCtx(sh.uploadCtx, func(ctx context.Context) {
			var err error
			if f := sh.cfg.faults; f != nil && f.Retained != nil {
				defer func() { f.Retained(id, err) }() // once the next pass may start
			}
			defer sh.retaining.Store(false)
			err = sh.cps.Retain(ctx, keep, id+1)
			switch {
			case errors.Is(err, snapshots.ErrLeaseLost):
				root.Send(self, &leaseLostMsg{err: err})
			case err != nil && ctx.Err() == nil:
				sh.log.Warn("retention failed", "checkpoint", id, "err", err)
			}
		})
	}
	if a.Final {
		j.finalComplete = true
		end := &messages.EndSource{Epoch: j.epoch}
		for _, s := range j.sources {
			j.send(j.sh.pids[s], end)
		}
		j.checkDone()
	}
}

func (j *jobActor) aborted(a coordinator.Action) {
	delete(j.triggeredAt, a.Checkpoint)
	delete(j.figures, a.Checkpoint)
	name := j.savepointName(a.Savepoint)
	j.log.Warn("checkpoint aborted", "checkpoint", a.Checkpoint, "savepoint", name, "reason", a.Reason)
	ev := Event{Kind: EventCheckpointAborted, Epoch: j.epoch, Checkpoint: a.Checkpoint, Final: a.Final, Savepoint: name,
		Err: fmt.Errorf("checkpoint %d aborted: %s", a.Checkpoint, a.Reason)}
	if d := j.declined; d != nil && d.CheckpointId == a.Checkpoint {
		ev.Declined, ev.Task = true, d.TaskId
	}
	j.emit(ev)
	if name != "" {
		j.cleanSavepoint(name, a.Checkpoint)
	} else {
		j.cleanAborted(a.Checkpoint)
	}
	if j.phase != phaseRunning {
		return
	}
	m := &messages.AbortCheckpoint{Epoch: j.epoch, CheckpointId: a.Checkpoint, Reason: a.Reason}
	for _, pid := range j.sh.pids {
		j.send(pid, m)
	}
}

// baseOf returns the base that incremental snapshots may build on after
// restoring rp: its id, unless it is a savepoint (whose objects must never
// be referenced by checkpoints) or nothing.
func baseOf(rp *snapshots.Restorable) uint64 {
	if rp == nil || rp.Manifest.GetSavepoint() != "" {
		return 0
	}
	return rp.Manifest.GetCheckpointId()
}
