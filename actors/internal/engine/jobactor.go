package engine

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

type phase uint8

const (
	phaseRestoring phase = iota + 1 // tasks are loading their state
	phaseRunning                    // records flow; checkpoints are taken
	phaseBackoff                    // a task failed; waiting to restore
	phaseDone                       // finished, stopped or failed
)

// jobActor supervises the task actors and hosts the checkpoint coordinator.
type jobActor struct {
	sh      *shared
	log     *slog.Logger
	stopped chan struct{}
	self    *actor.PID
	sup     actor.Supervisor

	phase      phase
	epoch      uint64
	restored   map[int]bool
	manifests  int                   // manifest writes in flight
	restartDue bool                  // the backoff is over; the restore waits for manifests
	restore    *snapshots.Restorable // checkpoint of the current epoch

	coord  *coordinator.Coordinator
	nextID uint64
	// retainPending says to apply retention once the job first runs, to
	// the checkpoints below firstID, the first id of this run.
	retainPending bool
	firstID       uint64
	taskIDs       []string
	sources       []int
	strategy      *restart.Strategy

	timer        *time.Timer
	timerAt      time.Time
	restartTimer *time.Timer
	timerGen     uint64

	exhausted     map[int]bool
	finished      map[int]bool
	finalComplete bool
	// final is the final checkpoint once complete, and committed the tasks
	// that handled its completion (their sinks committed): the job ends
	// only once every task has, so that in a cluster no sink stops before
	// its last commit.
	final     uint64
	committed map[uint32]bool

	// lastCompleted is the newest checkpoint known complete (restored or
	// completed): a recovery that finds no complete checkpoint after one
	// refuses to start the job over.
	lastCompleted uint64
	// recovering is the failure the job recovers from (nil: none yet),
	// which an error of the recovery names.
	recovering error
	// base is the checkpoint that the next trigger names as the base of
	// incremental snapshots (see messages.Barrier): the newest complete
	// checkpoint when that is not a savepoint, else 0.
	base uint64
	// inDoubt are checkpoints a failover abandoned while their manifest was
	// being written; they are settled by the write's outcome or the restore.
	inDoubt map[uint64]inDoubt
	// cleanBelow: aborted checkpoints below it are to be deleted; cleaned:
	// a pass up to it has run. cleaning is set while a pass runs.
	cleanBelow, cleaned uint64
	cleaning            bool

	requests    map[uint64]chan checkpointResult
	waitingReqs []uint64
	// savepoints are the savepoint requests not yet answered, by request
	// id; spNames their names; waitingSavepoints those made while the job
	// was not running.
	savepoints        map[uint64]*savepointReq
	spNames           map[string]bool
	waitingSavepoints []uint64
	// recoverable are the savepoints (by checkpoint id) also written as
	// checkpoints, which recovery restores (see recoveryPoint).
	recoverable map[uint64]bool
	// stopFailed are the stop-with-savepoints (by checkpoint id) whose
	// savepoint is complete but could not be recorded as the job's origin
	// (see stoppedAt): they end as plain savepoints, and the stop fails.
	stopFailed map[uint64]error
	// stopping is set once a stop-with-savepoint's savepoint completed,
	// until every task has handled its completion.
	stopping    *stopping
	nextRequest uint64
	triggeredAt map[uint64]time.Time
	// figures are the tasks' figures of the checkpoints whose manifest is
	// being written (or in doubt), for their EventCheckpointCompleted.
	figures map[uint64]checkpointFigures
	// declined is the decline being applied, so that the abort it causes
	// says so.
	declined *messages.DeclineCheckpoint

	result error

	// cl is the cluster side of a coordinator; nil in one process.
	cl *clusterCoord
}

func newJobActor(sh *shared, stopped chan struct{}, nextID uint64, rp *snapshots.Restorable) *jobActor {
	ja := &jobActor{
		sh: sh, log: sh.log, stopped: stopped, nextID: nextID, firstID: nextID, restore: rp,
		strategy: restart.New(sh.cfg.restart), requests: map[uint64]chan checkpointResult{},
		savepoints: map[uint64]*savepointReq{}, spNames: map[string]bool{}, recoverable: map[uint64]bool{}, stopFailed: map[uint64]error{},
		triggeredAt: map[uint64]time.Time{}, inDoubt: map[uint64]inDoubt{}, figures: map[uint64]checkpointFigures{},
	}
	if rp != nil {
		ja.lastCompleted = rp.Manifest.GetCheckpointId()
		ja.base = baseOf(rp)
	}
	for _, t := range sh.plan.Tasks {
		ja.taskIDs = append(ja.taskIDs, t.ID)
		if t.Kind == dataflow.KindSource {
			ja.sources = append(ja.sources, t.Index)
		}
	}
	return ja
}

// Receive dispatches the job actor's messages. A panic here is a bug in
// snapflow, not in user code: the job fails with it rather than restarting
// the job actor with lost bookkeeping.
func (j *jobActor) Receive(ctx actor.Context) {
	defer func() {
		if r := recover(); r != nil && j.phase != phaseDone {
			j.fail(fmt.Errorf("actors: internal error in the job actor: %v\n%s", r, debug.Stack()), "internal error")
		}
	}()
	switch m := ctx.Message().(type) {
	case *messages.TaskRestored:
		j.onRestored(m)
	case *messages.AckCheckpoint:
		if m.Epoch == j.epoch && j.phase == phaseRunning && j.fromDeployed("acknowledgement", m.TaskId, m.WorkerId) {
			j.apply(j.coord.Ack(time.Now(), m))
		}
	case *messages.DeclineCheckpoint:
		if m.Epoch == j.epoch && j.phase == phaseRunning && j.fromDeployed("decline", m.TaskId, m.WorkerId) {
			j.log.Warn("task declined the checkpoint", "checkpoint", m.CheckpointId, "task", m.TaskId, "reason", m.Reason)
			acts := j.coord.Decline(time.Now(), m)
			j.declined = m
			j.apply(acts)
			j.declined = nil
		}
	case *manifestWrittenMsg:
		j.onManifestWritten(m)
	case *cleanedMsg:
		j.onCleaned(m)
	case *tickMsg:
		if m.gen == j.timerGen && j.phase == phaseRunning {
			j.timer = nil
			j.apply(j.coord.Tick(time.Now()))
		}
	case *messages.TaskExhausted:
		j.onExhausted(m)
	case *messages.TaskFinished:
		if j.cl != nil && m.Counters != nil {
			j.cl.report(m.WorkerId, []*messages.TaskCounters{m.Counters})
		}
		if m.Epoch == j.epoch && j.phase == phaseRunning && j.finishedFrom(m) {
			j.finished[int(m.Task)] = true
			j.checkDone()
		}
	case *checkpointRequest:
		j.onRequest(m)
	case *savepointRequest:
		j.onSavepointRequest(m)
	case *messages.CheckpointCommitted:
		j.onCommitted(m)
	case *restartMsg:
		if m.epoch == j.epoch && j.phase == phaseBackoff {
			j.restartDue = true
			j.maybeLoadRestorePoint()
		}
	case *restorePointMsg:
		j.onRestorePoint(m)
	case *leaseLostMsg:
		if j.phase != phaseDone {
			j.fail(m.err, "another instance took the job over")
		}
	case *stopRequest:
		if j.phase != phaseDone {
			j.log.Info("stopping the job", "cause", m.cause)
			j.finish(m.cause)
		}
	case *actor.Started:
		j.onStarted(ctx)
	case *actor.Stopped:
		if j.phase != phaseDone {
			// Stopped by a message, not by finish: never a success.
			cause := fmt.Errorf("%w: the job actor of job %q was stopped (a Stop or PoisonPill message)", ErrActorStopped, j.sh.job)
			j.log.Error("the job actor was stopped before the job ended", "err", cause)
			j.phase, j.result = phaseDone, &JobError{Job: j.sh.job, Failures: j.strategy.Failures(time.Now()), Reason: "its job actor stopped", Cause: cause}
			j.sh.inc.Load().cancel()
		}
		close(j.stopped)
	case *actor.Stopping, *actor.Restarting:
	default:
		if j.cl != nil && j.cl.receive(ctx, m) {
			return
		}
		if _, ok := m.(*actor.Terminated); ok {
			return
		}
		j.log.Warn("job actor dropping a message of unknown type", "type", fmt.Sprintf("%T", m))
	}
}

func (j *jobActor) onStarted(ctx actor.Context) {
	j.self = ctx.Self()
	j.sh.jobPID = j.self // before any task is spawned: tasks read it
	j.sup, _ = ctx.(actor.Supervisor)
	j.epoch = j.sh.inc.Load().epoch
	j.beginRestore()
	if j.sh.cfg.cluster != nil { // the workers spawn the tasks
		j.cl = newClusterCoord(j, j.sh.coordinator)
		j.cl.start()
		return
	}
	pids := make([]*actor.PID, len(j.sh.plan.Tasks))
	for i, t := range j.sh.plan.Tasks {
		idx := i
		pid, err := ctx.SpawnNamed(taskProps(j.sh, idx), t.ID)
		if err != nil {
			j.fail(fmt.Errorf("actors: spawn task %s: %w", t.ID, err), "could not start")
			return
		}
		pids[i] = pid
	}
	j.sh.pids = pids
}

func (j *jobActor) beginRestore() {
	j.phase = phaseRestoring
	j.restored = map[int]bool{}
	j.exhausted = map[int]bool{}
	j.finished = map[int]bool{}
	j.finalComplete = false
	j.final, j.committed = 0, map[uint32]bool{}
}

func (j *jobActor) onRestored(m *messages.TaskRestored) {
	if m.Epoch != j.epoch || j.phase != phaseRestoring || !j.taskFrom("restore report", m.Task, m.WorkerId) {
		return
	}
	j.restored[int(m.Task)] = true
	if len(j.restored) < len(j.sh.plan.Tasks) || len(j.sh.pids) < len(j.sh.plan.Tasks) {
		return
	}
	j.phase = phaseRunning
	if rp := j.restore; rp != nil && rp.Heads && j.sh.inc.Load().assign == nil {
		// Every task streamed its key groups, each checked: the whole
		// checkpoint read back.
		j.sh.cps.MarkUsable(rp.Manifest.GetCheckpointId(), rp.Manifest)
	}
	run := &messages.RunTasks{Epoch: j.epoch}
	for _, pid := range j.sh.pids {
		j.send(pid, run)
	}
	j.coord = coordinator.New(j.sh.cfg.checkpoint, j.taskIDs, j.nextID)
	var from uint64
	var savepoint string
	if j.restore != nil {
		from, savepoint = j.restore.Manifest.GetCheckpointId(), j.restore.Manifest.GetSavepoint()
	}
	j.log.Info("job running", "epoch", j.epoch, "restored_checkpoint", from, "savepoint", savepoint, "tasks", len(j.sh.pids))
	j.retainAtStart()
	j.emit(Event{Kind: EventRunning, Epoch: j.epoch, Checkpoint: from, Savepoint: savepoint})
	now := time.Now()
	var acts []coordinator.Action
	for _, req := range j.waitingReqs {
		acts = append(acts, j.coord.RequestCheckpoint(now, req)...)
	}
	for _, req := range j.waitingSavepoints {
		acts = append(acts, j.coord.RequestSavepoint(now, req)...)
	}
	j.waitingReqs, j.waitingSavepoints = nil, nil
	j.apply(acts)
}

func (j *jobActor) onExhausted(m *messages.TaskExhausted) {
	if m.Epoch != j.epoch || j.phase != phaseRunning || !slices.Contains(j.sources, int(m.Task)) ||
		!j.taskFrom("end of its records", m.Task, m.WorkerId) {
		return // a source's end counted for a task that is none would end the job early
	}
	j.exhausted[int(m.Task)] = true
	if len(j.exhausted) == len(j.sources) {
		j.log.Info("every source has ended; taking the final checkpoint")
		j.apply(j.coord.Finish(time.Now()))
	}
}

func (j *jobActor) onRequest(m *checkpointRequest) {
	if j.phase == phaseDone {
		m.reply <- checkpointResult{err: ErrFinished}
		return
	}
	j.nextRequest++
	j.requests[j.nextRequest] = m.reply
	if j.phase != phaseRunning {
		j.waitingReqs = append(j.waitingReqs, j.nextRequest)
		return
	}
	j.apply(j.coord.RequestCheckpoint(time.Now(), j.nextRequest))
}

func (j *jobActor) checkDone() {
	if n := len(j.sh.plan.Tasks); j.finalComplete && len(j.finished) == n && len(j.committed) == n {
		j.log.Info("job finished", "epoch", j.epoch)
		j.emit(Event{Kind: EventFinished, Epoch: j.epoch})
		j.finish(nil)
	}
}

// finish ends the job with err (nil: success) and stops every actor.
func (j *jobActor) finish(err error) {
	if j.phase == phaseDone {
		return
	}
	j.phase = phaseDone
	j.result = err
	if err != nil { // abandon the uploads of the incarnation
		j.sh.inc.Load().cancel()
	}
	j.cleanAtEnd()
	j.stopTimer()
	if j.restartTimer != nil {
		j.restartTimer.Stop()
	}
	for id, reply := range j.requests {
		e := err
		if e == nil {
			e = ErrFinished
		}
		reply <- checkpointResult{err: e}
		delete(j.requests, id)
	}
	if j.cl != nil { // the job actor stops once the workers have let go
		j.cl.end(err)
		return
	}
	j.sh.system.Root.Stop(j.self)
}

// fail ends the job with a *JobError.
func (j *jobActor) fail(cause error, reason string) {
	err := &JobError{Job: j.sh.job, Failures: j.strategy.Failures(time.Now()), Reason: reason, Cause: cause}
	j.log.Error("job failed", "reason", reason, "err", cause)
	j.emit(Event{Kind: EventFailed, Epoch: j.epoch, Err: err})
	j.finish(err)
}

func (j *jobActor) send(pid *actor.PID, m any) { j.sh.system.Root.Send(pid, m) }

func (j *jobActor) emit(e Event) {
	if len(j.sh.cfg.listeners) > 0 {
		if e.Time.IsZero() {
			e.Time = time.Now()
		}
		for _, l := range j.sh.cfg.listeners {
			l(e)
		}
	}
}

func (j *jobActor) stopTimer() {
	if j.timer != nil {
		j.timer.Stop()
		j.timer = nil
	}
	j.timerGen++
}

// armTimer makes sure the coordinator is ticked when it next has work.
func (j *jobActor) armTimer() {
	if j.phase != phaseRunning {
		return
	}
	next, ok := j.coord.NextTrigger()
	if !ok || (j.timer != nil && j.timerAt.Equal(next)) {
		return
	}
	j.stopTimer()
	gen, root, self := j.timerGen, j.sh.system.Root, j.self
	j.timerAt = next
	j.timer = time.AfterFunc(max(0, time.Until(next)), func() { root.Send(self, &tickMsg{gen: gen}) })
}

// retainAtStart applies retention to the checkpoints the job found at
// Start, once, when it first runs: verifying the retained checkpoints
// reads their states, which must not delay the restore. Checkpoints of
// this run have ids of at least nextID, which it leaves alone. A failure
// is only logged.
func (j *jobActor) retainAtStart() {
	sh := j.sh
	if !j.retainPending || !sh.retaining.CompareAndSwap(false, true) {
		return
	}
	j.retainPending = false
	keep, below := sh.cfg.retained, j.firstID
	sh.goUploadCtx(sh.uploadCtx, func(ctx context.Context) {
		defer sh.retaining.Store(false)
		if err := sh.cps.Retain(ctx, keep, below); err != nil && ctx.Err() == nil {
			sh.log.Warn("cleaning up old checkpoints failed", "err", err)
		}
	})
}
