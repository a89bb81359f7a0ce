package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

// savepointReq is a savepoint the job actor was asked for.
type savepointReq struct {
	name string
	stop bool // stop the job once it is complete
}

// savepointRequest asks the job actor for a savepoint.
type savepointRequest struct {
	name  string
	stop  bool
	reply chan checkpointResult
}

// savepointName returns the name of the savepoint of request req, or "".
func (j *jobActor) savepointName(req uint64) string {
	if sp := j.savepoints[req]; sp != nil {
		return sp.name
	}
	return ""
}

func (j *jobActor) onSavepointRequest(m *savepointRequest) {
	switch {
	case j.phase == phaseDone:
		m.reply <- checkpointResult{err: ErrFinished}
		return
	case j.spNames[m.name]:
		m.reply <- checkpointResult{err: fmt.Errorf("actors: savepoint %q: %w: a savepoint of that name is being taken", m.name, snapshots.ErrSavepointExists)}
		return
	}
	j.nextRequest++
	req := j.nextRequest
	j.requests[req] = m.reply
	j.savepoints[req] = &savepointReq{name: m.name, stop: m.stop}
	j.spNames[m.name] = true
	if j.phase != phaseRunning {
		j.waitingSavepoints = append(j.waitingSavepoints, req)
		return
	}
	j.apply(j.coord.RequestSavepoint(time.Now(), req))
}

// savepointCompleted handles the completion of a savepoint: its manifest is
// written. A stop-with-savepoint stops the job there.
func (j *jobActor) savepointCompleted(a coordinator.Action) {
	sp := j.savepoints[a.Savepoint]
	if sp.stop && j.stopFailedAt(a.Checkpoint, a.Savepoint) {
		sp.stop = false // the sources go on, and the sinks do not commit
	}
	took := time.Since(j.triggeredAt[a.Checkpoint])
	delete(j.triggeredAt, a.Checkpoint)
	ev := j.takeFigures(a.Checkpoint).event(Event{Kind: EventCheckpointCompleted, Epoch: j.epoch, Checkpoint: a.Checkpoint, Savepoint: sp.name, Duration: took})
	j.log.Info("savepoint complete", "savepoint", sp.name, "checkpoint", a.Checkpoint, "bytes", ev.Bytes, "took", took, "stop", sp.stop)
	j.emit(ev)
	// The tasks hear of it as of a checkpoint: a source paused by the
	// savepoint produces again, and two-phase-commit sinks commit, unless
	// recovery could restore a checkpoint older than the savepoint (it was
	// not written as a checkpoint too) and replay what the commit made
	// visible.
	recovery := j.recoverable[a.Checkpoint]
	delete(j.recoverable, a.Checkpoint)
	if recovery {
		j.lastCompleted = max(j.lastCompleted, a.Checkpoint)
	}
	// The newest complete checkpoint is now the savepoint's copy, or the
	// checkpoint before it may be retained no longer: the next snapshots
	// build on nothing.
	j.base = 0
	// A stop-with-savepoint stops once every task has handled the
	// completion (its sinks committed), so that no transaction is left
	// open behind the stopped job.
	m := &messages.CompleteCheckpoint{Epoch: j.epoch, CheckpointId: a.Checkpoint, Commit: sp.stop || recovery, Ack: sp.stop}
	for _, pid := range j.sh.pids {
		j.send(pid, m)
	}
	delete(j.savepoints, a.Savepoint)
	j.savepointEnded(sp.name)
	if sp.stop {
		j.stopping = &stopping{name: sp.name, id: a.Checkpoint, req: a.Savepoint, acked: map[uint32]bool{}}
	}
}

// stopping is a stop-with-savepoint whose savepoint completed, waiting for
// the tasks to handle its completion.
type stopping struct {
	name    string
	id, req uint64
	acked   map[uint32]bool
}

// onCommitted counts a task's answer to a stop-with-savepoint's
// completion, and stops the job once every task has answered.
func (j *jobActor) onCommitted(m *messages.CheckpointCommitted) {
	if int(m.Task) >= len(j.sh.plan.Tasks) {
		return // no task of the job: counted, it would stand for a real one
	}
	if m.Epoch == j.epoch && !j.taskFrom("commit", m.Task, m.WorkerId) {
		return
	}
	if j.final != 0 && m.Epoch == j.epoch && m.CheckpointId == j.final && j.phase == phaseRunning {
		j.committed[m.Task] = true
		j.checkDone()
		return
	}
	s := j.stopping
	if s == nil || m.Epoch != j.epoch || m.CheckpointId != s.id || j.phase == phaseDone {
		return
	}
	s.acked[m.Task] = true
	if len(s.acked) == len(j.sh.plan.Tasks) {
		j.stopping = nil
		j.stopAtSavepoint(s.name, s.id, s.req)
	}
}

// stopAtSavepoint answers the stop-with-savepoint request req, whose
// savepoint name completed as checkpoint id, and stops the job: its
// sources produced nothing after the savepoint's barrier.
func (j *jobActor) stopAtSavepoint(name string, id, req uint64) {
	if reply := j.requests[req]; reply != nil {
		reply <- checkpointResult{id: id}
		delete(j.requests, req)
	}
	j.log.Info("job stopped with a savepoint", "savepoint", name, "checkpoint", id)
	j.finish(fmt.Errorf("%w with savepoint %q (checkpoint %d)", ErrStopped, name, id))
}

// settleSavepoints resolves the savepoints left in doubt by a failover
// (their manifest write's outcome unknown) by reading each one's manifest
// back, before the restore: landed when it is there with the savepoint's
// checkpoint id. It reports whether one of them was a stop-with-savepoint
// that landed, which stopped the job.
func (j *jobActor) settleSavepoints(found map[uint64]bool) bool {
	for id, d := range j.inDoubt {
		if d.savepoint == "" {
			continue
		}
		stop := d.stop
		j.settle(id, found[id], "the savepoint's manifest was read back")
		if stop && found[id] {
			return true
		}
	}
	return false
}

// inDoubtSavepoints returns the savepoints in doubt, by checkpoint id, and
// which of them are stop-with-savepoints.
func (j *jobActor) inDoubtSavepoints() (names map[uint64]string, stops map[uint64]bool) {
	names, stops = map[uint64]string{}, map[uint64]bool{}
	for id, d := range j.inDoubt {
		if d.savepoint != "" {
			names[id] = d.savepoint
			if d.stop {
				stops[id] = true
			}
		}
	}
	return names, stops
}

// savepointsLanded reads back the manifests of the savepoints in doubt and
// returns which of them are complete with their checkpoint id. A manifest
// that cannot be read counts as not landed.
func savepointsLanded(ctx context.Context, cps *snapshots.Checkpoints, doubt map[uint64]string) map[uint64]bool {
	found := map[uint64]bool{}
	for id, name := range doubt {
		m, err := cps.ReadSavepointManifest(ctx, name)
		found[id] = err == nil && m.GetCheckpointId() == id
	}
	return found
}

// savepointEnded forgets that savepoint name is being taken.
func (j *jobActor) savepointEnded(name string) { delete(j.spNames, name) }

// cleanSavepoint deletes what the aborted attempt at savepoint name, taken
// as checkpoint id, stored: only that attempt's objects (see
// snapshots.SavepointStateKey), never another attempt's or a complete
// savepoint. Uploads still in flight may land afterwards: they belong to no
// manifest, are never restored, and `snapflow savepoints delete` removes
// them.
func (j *jobActor) cleanSavepoint(name string, id uint64) {
	sh := j.sh
	sh.goUploadCtx(sh.uploadCtx, func(ctx context.Context) {
		if _, err := sh.cps.DeleteSavepointAttempt(ctx, name, id); err != nil && ctx.Err() == nil {
			sh.log.Warn("deleting the objects of an aborted savepoint failed", "savepoint", name, "checkpoint", id, "err", err)
		}
	})
}

// recoveryPoint writes savepoint m's manifest as a checkpoint's too
// (pointing at the savepoint's objects), so that recovery restores the
// savepoint rather than an older checkpoint: then two-phase-commit sinks
// may commit at the savepoint, and the transactions it pre-committed are
// never aborted by a recovery behind it, which keeps it restorable. It
// reports whether that manifest is in place; a failure is logged, and the
// savepoint is complete all the same.
func recoveryPoint(ctx context.Context, sh *shared, m *messages.Manifest) bool {
	cm := proto.CloneOf(m)
	cm.Savepoint = ""
	if err := sh.cps.PutManifest(ctx, cm); err != nil {
		sh.log.Warn("the savepoint is complete, but writing it as a checkpoint failed: recovery may restore an older checkpoint, so transactional sinks commit at the next one",
			"savepoint", m.GetSavepoint(), "checkpoint", m.GetCheckpointId(), "err", err)
		return false
	}
	return true
}

// stoppedAt records a stop-with-savepoint's savepoint name, taken as
// checkpoint id, as the job's origin, so that starting the job again, even
// without WithSavepoint, resumes from it rather than from an older
// checkpoint whose replay would repeat what the savepoint's commit made
// visible. Until it is recorded, the job must not stop there: its sinks
// commit only once it is, and a failure fails the stop (see
// savepointCompleted), and the job goes on.
//
// A write that fails may have landed all the same (its answer was lost):
// the origin is read back. Found, the stop goes on; found absent, the stop
// fails; when that cannot be told, it returns an error wrapping
// errOriginInDoubt, which fails the job at once: a failover would restore
// a checkpoint older than a savepoint that may be the job's origin, and
// abort the transactions that the next start from the savepoint commits.
func stoppedAt(ctx context.Context, sh *shared, name string, id uint64) error {
	o := &messages.Origin{Savepoint: name, CheckpointId: id, FirstId: id + 1, TimestampUnixNano: time.Now().UnixNano()}
	err := sh.cps.PutOrigin(ctx, o)
	if err == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshots.ManifestCheckTimeout)
	defer cancel()
	got, rerr := sh.cps.ReadOrigin(rctx)
	switch {
	case rerr == nil && got.GetSavepoint() == name && got.GetCheckpointId() == id && got.GetFirstId() == id+1:
		sh.log.Warn("recording the stop-with-savepoint's savepoint as where the job resumes reported an error, but it is in place (a write whose answer was lost); the job stops there",
			"savepoint", name, "checkpoint", id, "err", err)
		return nil
	case rerr != nil:
		return fmt.Errorf("actors: savepoint %q is complete, but recording it as where the job resumes failed (%w), and reading that back failed too (%v): %w",
			name, err, rerr, errOriginInDoubt)
	}
	sh.log.Warn("the stop-with-savepoint's savepoint is complete, but recording it as where the job resumes failed: the job does not stop, and its sinks do not commit at it",
		"savepoint", name, "checkpoint", id, "err", err)
	return fmt.Errorf("actors: savepoint %q is complete, but recording it as where the job resumes failed, so the job goes on (its sinks did not commit at it; stop it again, under another name): %w: %w",
		name, ErrNotStopped, err)
}

// errOriginInDoubt: whether a stop-with-savepoint's savepoint was recorded
// as the job's origin is unknown (see stoppedAt).
var errOriginInDoubt = errors.New("actors: whether the savepoint is where the job resumes is unknown; the job fails rather than restore an older checkpoint: start it again (with WithSavepoint to resume from the savepoint)")

// stopFailedAt turns the stop-with-savepoint of checkpoint id into a plain
// savepoint when it could not be recorded as the job's origin, and answers
// its request req with why. It reports whether it did.
func (j *jobActor) stopFailedAt(id, req uint64) bool {
	err := j.stopFailed[id]
	if err == nil {
		return false
	}
	delete(j.stopFailed, id)
	if reply := j.requests[req]; reply != nil {
		reply <- checkpointResult{id: id, err: err}
		delete(j.requests, req)
	}
	return true
}
