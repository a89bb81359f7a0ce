package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// errCheckpointsGone: the job's complete checkpoints vanished from the store.
var errCheckpointsGone = errors.New("actors: the job's checkpoints are gone")

// errEpochsExhausted: the job would run past the last epoch of its lease.
var errEpochsExhausted = errors.New("actors: the epochs of the job's lease are used up")

// permanent reports whether cause is a failure that no restart can cure,
// with the reason the job fails.
func permanent(cause error) (string, bool) {
	switch {
	case errors.Is(cause, topology.ErrIncompatibleState), errors.Is(cause, topology.ErrRestoreRefused):
		return "the checkpoint cannot be restored into this job", true
	case errors.Is(cause, snapshots.ErrNoUsableCheckpoint):
		return "no checkpoint can be restored", true
	case errors.Is(cause, errCheckpointsGone):
		return "its checkpoints are gone", true
	case errors.Is(cause, snapshots.ErrLeaseLost):
		return "another instance took the job over", true
	case errors.Is(cause, snapshots.ErrFallbackRefused):
		return "a checkpoint its two-phase-commit sinks committed at is damaged or gone", true
	case errors.Is(cause, errEpochsExhausted):
		return "it used every epoch of its lease", true
	case errors.Is(cause, errOriginInDoubt):
		return "whether its stop-with-savepoint was recorded is unknown", true
	}
	return "", false
}

// HandleFailure is called by protoactor-go, in the job actor, when a task
// actor fails. Restarting only the failed task would lose or double-count the
// records it processed since its snapshot, so the whole job rolls back.
func (j *jobActor) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	defer func() {
		if r := recover(); r != nil && j.phase != phaseDone {
			j.fail(fmt.Errorf("actors: internal error handling a failure: %v\n%s", r, debug.Stack()), "internal error")
		}
	}()
	j.sup = sup
	te, ok := reason.(*TaskError)
	if !ok {
		te = &TaskError{Task: child.GetId(), Value: reason, cause: CausePanic}
	}
	if te.Epoch != 0 && te.Epoch < j.epoch {
		return // a failure of an incarnation already being replaced
	}
	if j.phase == phaseDone || j.phase == phaseBackoff {
		return
	}
	j.onFailure(te)
}

// onFailure rolls the job back: it aborts the checkpoint in flight, asks
// the restart strategy for a delay, and restores after it.
func (j *jobActor) onFailure(cause error) { j.onFailureOf(cause, failureCause(cause)) }

// onFailureOf is onFailure with the failure's cause, for EventTaskFailed.
func (j *jobActor) onFailureOf(cause error, fc FailureCause) {
	if s := j.stopping; s != nil { // the savepoint is complete: stop there all the same
		j.stopping = nil
		j.log.Warn("a task failed while the tasks handled the completion of the stop-with-savepoint; the job stops with the savepoint, whose uncommitted transactions the next start from it commits",
			"savepoint", s.name, "err", cause)
		j.stopAtSavepoint(s.name, s.id, s.req)
		return
	}
	now := time.Now()
	attrs := []any{"epoch", j.epoch, "err", cause}
	if te, ok := cause.(*TaskError); ok {
		attrs = append(attrs, "task", te.Task, "operator", te.Operator)
		if len(te.Stack) > 0 { // a panic's
			attrs = append(attrs, "stack", string(te.Stack))
		}
		j.emit(Event{Kind: EventTaskFailed, Epoch: j.epoch, Task: te.Task, Err: te, Cause: fc})
	} else if nl, ok := cause.(*NodeLostError); ok {
		attrs = append(attrs, "worker", nl.Worker, "address", nl.Address, "tasks", nl.Tasks)
		j.emit(Event{Kind: EventTaskFailed, Epoch: j.epoch, Task: strings.Join(nl.Tasks, ","), Node: nl.Worker + "@" + nl.Address, Err: cause, Cause: fc})
	} else {
		j.emit(Event{Kind: EventTaskFailed, Epoch: j.epoch, Err: cause, Cause: fc})
	}
	attrs = append(attrs, "cause", fc)
	j.log.Error("task failed", attrs...)
	fellBack := j.markUnusable(cause, fc)
	if reason, ok := permanent(cause); ok {
		j.fail(cause, reason)
		return
	}
	wasRunning := j.phase == phaseRunning
	j.recovering = cause
	j.phase = phaseBackoff // the tasks are not told about aborts: they are about to restart
	j.restartDue = false
	j.sh.inc.Load().cancel() // the incarnation's uploads are of no use now
	if j.coord != nil && wasRunning {
		j.apply(j.coord.Reset(now))
	}
	j.stopTimer()
	// A restore that found its checkpoint damaged is not the job's failure:
	// it falls back to an older checkpoint at once, as a load that found
	// the damage would have, without counting against the restart strategy.
	// Each checkpoint is marked once, so this ends.
	var delay time.Duration
	ok := true
	if !fellBack {
		delay, ok = j.strategy.OnFailure(now, rand.Float64())
	}
	if !ok {
		p := j.strategy.Policy()
		reason := fmt.Sprintf("restart strategy exhausted (more than %d failures within %v)", p.MaxFailures, p.Window)
		if p.MaxFailures < 0 {
			reason = "restarts are disabled (restart.NoRestarts)"
		}
		j.fail(cause, reason)
		return
	}
	if j.epoch >= j.sh.lastEpoch { // never past the lease's epochs, which a later holder's follow
		j.fail(fmt.Errorf("%w: epoch %d is its last; start the job again, which claims a new lease: %w", errEpochsExhausted, j.epoch, cause), "it used every epoch of its lease")
		return
	}
	j.epoch++
	epoch, root, self := j.epoch, j.sh.system.Root, j.self
	j.log.Info("restarting the job after a backoff", "epoch", epoch, "backoff", delay)
	j.restartTimer = time.AfterFunc(delay, func() { root.Send(self, &restartMsg{epoch: epoch}) })
}

// onManifestWritten completes a checkpoint, or lets a failover that waited
// for the manifest go on.
func (j *jobActor) onManifestWritten(m *manifestWrittenMsg) {
	j.manifests--
	if errors.Is(m.stopErr, errOriginInDoubt) {
		j.fail(m.stopErr, "whether its stop-with-savepoint was recorded is unknown")
		return
	}
	if m.stopErr != nil {
		j.stopFailed[m.id] = m.stopErr
	}
	if m.recovery {
		j.recoverable[m.id] = true
	}
	switch {
	case errors.Is(m.err, snapshots.ErrLeaseLost):
		j.fail(fmt.Errorf("checkpoint %d: %w", m.id, m.err), "another instance took the job over")
	case m.epoch == j.epoch && j.phase == phaseRunning && errors.Is(m.err, snapshots.ErrManifestInDoubt):
		// Whether the checkpoint completed is unknown: roll back, and let
		// the checkpoint that recovery finds in the store decide.
		j.onFailure(fmt.Errorf("checkpoint %d: %w", m.id, m.err))
	case m.epoch == j.epoch && j.phase == phaseRunning:
		j.apply(j.coord.ManifestWritten(time.Now(), m.id, m.err))
	case m.err == nil:
		j.settle(m.id, true, "the manifest write succeeded")
	case !errors.Is(m.err, snapshots.ErrManifestInDoubt):
		j.settle(m.id, false, "the manifest write failed: "+m.err.Error())
	}
	j.maybeClean()
	j.maybeLoadRestorePoint()
}

// maybeLoadRestorePoint starts the restore once the backoff is over and no
// manifest is being written: a manifest that lands later would make a
// checkpoint complete behind the restore's back.
func (j *jobActor) maybeLoadRestorePoint() {
	if j.phase != phaseBackoff || !j.restartDue || j.manifests > 0 {
		return
	}
	j.restartDue = false
	j.loadRestorePoint()
}

// loadRestorePoint reads the newest complete checkpoint whose objects verify.
// The savepoints in doubt are read back first: they are settled before
// the restore.
func (j *jobActor) loadRestorePoint() {
	sh, root, self, epoch, floor := j.sh, j.sh.system.Root, j.self, j.epoch, j.lastCompleted
	doubt, stops := j.inDoubtSavepoints()
	sh.goUploadCtx(sh.uploadCtx, func(ctx context.Context) {
		// A superseded holder restores nothing: its tasks would clean up
		// what the new holder's wrote.
		if err := sh.cps.CheckLease(ctx); err != nil {
			root.Send(self, &restorePointMsg{epoch: epoch, err: err})
			return
		}
		landed := savepointsLanded(ctx, sh.cps, doubt)
		stopErrs := map[uint64]error{}
		for id := range stops {
			if landed[id] {
				if err := stoppedAt(ctx, sh, doubt[id], id); err != nil {
					stopErrs[id] = err
				}
			}
		}
		read := sh.cps.BytesRead()
		rp, named, err := loadPoint(ctx, sh.cps, sh.origin, true, sh.plan, floor)
		if rp != nil {
			sh.log.Info("read the checkpoint's manifest and the heads of its states", "checkpoint", rp.Manifest.GetCheckpointId(),
				"read_bytes", sh.cps.BytesRead()-read)
		}
		root.Send(self, &restorePointMsg{epoch: epoch, restore: rp, named: named, err: err, savepoints: landed, stopErrs: stopErrs})
	})
}

func (j *jobActor) onRestorePoint(m *restorePointMsg) {
	if m.epoch != j.epoch || j.phase != phaseBackoff {
		return
	}
	for id, err := range m.stopErrs {
		if errors.Is(err, errOriginInDoubt) {
			j.fail(err, "whether its stop-with-savepoint was recorded is unknown")
			return
		}
		j.stopFailed[id] = err
	}
	if j.settleSavepoints(m.savepoints) {
		return // a stop-with-savepoint landed: the job stopped there
	}
	if m.err != nil {
		j.onFailureOf(fmt.Errorf("restore: load the newest checkpoint: %w", m.err), CauseRestore)
		return
	}
	var id uint64
	var savepoint string
	var assign *dataflow.Restore
	if rp := m.restore; rp != nil {
		id, savepoint = rp.Manifest.GetCheckpointId(), rp.Manifest.GetSavepoint()
		var err error
		if assign, err = planRestore(j.sh.cfg, j.sh.plan, j.sh.declared, rp, m.named, j.log); err != nil {
			j.fail(fmt.Errorf("restore: %w", err), "the checkpoint cannot be restored into this job")
			return
		}
	} else if j.lastCompleted > 0 {
		err := fmt.Errorf("restore: %w: checkpoint %d completed, but the store %s now holds no complete checkpoint of the job; refusing to start it over from the beginning",
			errCheckpointsGone, j.lastCompleted, j.sh.cfg.store)
		if j.recovering != nil {
			err = fmt.Errorf("%w (recovering from: %w)", err, j.recovering)
		}
		j.fail(err, "its checkpoints are gone")
		return
	}
	for d := range j.inDoubt { // checkpoints: the savepoints are settled
		j.settle(d, d == id, "recovery found the newest usable checkpoint in the store")
	}
	j.restore, j.base = m.restore, baseOf(m.restore)
	j.log.Info("restoring the job", "epoch", j.epoch, "checkpoint", id)
	j.emit(Event{Kind: EventRestoring, Epoch: j.epoch, Checkpoint: id, Savepoint: savepoint})
	j.sh.inc.Store(j.sh.newIncarnation(j.epoch, m.restore, assign))
	j.beginRestore()
	if j.cl != nil {
		j.cl.deployOrWait(j.epoch, m.restore, assign)
		return
	}
	j.sup.RestartChildren(j.sh.pids...)
}

// markUnusable makes recovery pass over the checkpoint being restored when
// a task's restore found one of its objects missing or corrupt: the tasks
// stream their key groups from the store, so that is where a damaged
// checkpoint shows (see loadPoint).
// It reports whether it marked one.
func (j *jobActor) markUnusable(cause error, fc FailureCause) bool {
	rp := j.restore
	if fc != CauseRestore || rp == nil || !rp.Heads || j.phase != phaseRestoring ||
		!(errors.Is(cause, snapshots.ErrCorrupt) || errors.Is(cause, snapshots.ErrNotFound)) {
		return false
	}
	id := rp.Manifest.GetCheckpointId()
	j.log.Error("the checkpoint being restored is unusable: recovery falls back to an older one", "checkpoint", id, "err", cause)
	j.sh.cps.MarkUnusable(id, cause)
	return true
}
