package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// ErrAlreadyFinished is wrapped by the error of Start for a job whose newest
// checkpoint is its final one: it ran to the end, and resuming it would
// process nothing. Start it with WithStartOver to run it again.
var ErrAlreadyFinished = errors.New("actors: job already finished")

// resumed is where a job starts: its first epoch, the checkpoint it restores
// (nil: none) and how its tasks restore it, the highest checkpoint id in the
// store, and the job's origin (nil: it never started from a named point).
type resumed struct {
	cps    *snapshots.Checkpoints
	epoch  uint64
	point  *snapshots.Restorable
	assign *dataflow.Restore
	maxID  uint64
	origin *messages.Origin
	// retain says to apply retention once the job runs (see
	// jobActor.retainAtStart).
	retain bool
}

// resume checks the store, discards the job's checkpoints under
// WithStartOver, and picks and checks the checkpoint the job starts from:
// the point WithSavepoint or WithCheckpoint names, or else the newest
// checkpoint of the job's current history (see loadPoint).
func resume(ctx context.Context, cfg *config, plan *dataflow.Plan, declared map[string][]*messages.StateDescriptor, log *slog.Logger,
	cps *snapshots.Checkpoints, lease *messages.Lease) (*resumed, error) {
	job := plan.Job
	r := &resumed{cps: cps, epoch: lease.GetFirstEpoch()}
	r.cps.SetInlineLimit(cfg.inlineLimit(plan))
	if cfg.startOver {
		if err := discard(ctx, r.cps, log); err != nil {
			return nil, fmt.Errorf("actors: job %q: WithStartOver: discard the checkpoints in %s: %w", job, cfg.store, err)
		}
	}
	origin, err := seal(ctx, cfg, cps)
	if err != nil {
		return nil, fmt.Errorf("actors: job %q: %w", job, err)
	}
	if r.maxID, err = r.cps.MaxID(ctx); err != nil {
		return nil, fmt.Errorf("actors: job %q: list checkpoints: %w", job, err)
	}
	if cfg.from != nil {
		return resumeFrom(ctx, r, cfg, plan, declared, log, lease)
	}
	r.origin = origin
	if r.origin != nil { // ids of the current history start at FirstId
		r.maxID = max(r.maxID, r.origin.GetFirstId()-1)
	}
	// The heads of the newest checkpoint's states are read, and the tasks
	// (in one process) or the workers read the rest once (see loadPoint):
	// a damaged object shows there, and recovery falls back. A checkpoint
	// that Start would refuse is verified whole first: the refusal must not
	// come from damage that only its key groups show, where full
	// verification falls back to an older checkpoint or the origin.
	heads := true
	var rp *snapshots.Restorable
	var named bool
	for {
		rp, named, err = loadPoint(ctx, r.cps, r.origin, heads, plan, 0)
		switch {
		case errors.Is(err, snapshots.ErrFallbackRefused):
			return nil, fmt.Errorf("actors: job %q: %w", job, err)
		case errors.Is(err, snapshots.ErrNoUsableCheckpoint):
			return nil, fmt.Errorf("actors: job %q: the store %s holds complete checkpoints, but none can be restored; refusing to start the job over from the beginning (inspect them with `snapflow checkpoints verify`, or start with WithStartOver to discard them): %w",
				job, cfg.store, err)
		case err != nil:
			return nil, fmt.Errorf("actors: job %q: load the newest checkpoint: %w", job, err)
		case rp == nil:
			r.retain = true
			return r, nil
		}
		m := rp.Manifest
		if m.GetFinal() && !named {
			err = fmt.Errorf("%w: job %q: its newest checkpoint, %d in %s, is the final one, taken after every source ended; start it with WithStartOver to discard its checkpoints and run it again from the beginning",
				ErrAlreadyFinished, job, m.GetCheckpointId(), cfg.store)
		} else if r.assign, err = planRestore(cfg, plan, declared, rp, named, log); err != nil {
			err = fmt.Errorf("actors: job %q: %w", job, err)
		}
		if err == nil {
			break
		}
		if !heads {
			return nil, err
		}
		log.Info("the newest checkpoint cannot be resumed from; verifying it whole before refusing", "checkpoint", m.GetCheckpointId(), "err", err)
		heads = false
	}
	m := rp.Manifest
	warnUndescribed(rp, log)
	r.point = rp
	if err := r.runAfter(job, lease, m.GetEpoch()); err != nil {
		return nil, err
	}
	log.Info("resuming from checkpoint", "checkpoint", m.GetCheckpointId(), "savepoint", m.GetSavepoint(), "epoch", r.epoch)
	// The origin must stay until the job has a checkpoint of its own.
	r.retain = !named
	return r, nil
}

// seal completes the job's lease once the store is read (see
// snapshots.Checkpoints.SealLease), before the job changes anything: a
// checkpoint or origin that a superseded holder writes from now on is
// void. It returns the job's origin, as the seal records it. A job that
// starts over seals nothing as valid.
func seal(ctx context.Context, cfg *config, cps *snapshots.Checkpoints) (*messages.Origin, error) {
	var valid uint64
	var origin *messages.Origin
	if !cfg.startOver {
		var err error
		if valid, err = cps.LatestCompleteID(ctx); err != nil {
			return nil, fmt.Errorf("list checkpoints: %w", err)
		}
		if origin, err = cps.EffectiveOrigin(ctx); err != nil {
			return nil, fmt.Errorf("read where the job started from: %w", err)
		}
	}
	if err := cps.SealLease(ctx, valid, origin); err != nil {
		return nil, fmt.Errorf("seal the job's lease: %w", err)
	}
	return origin, nil
}

// runAfter sets the epoch the job runs first, after the restored epoch:
// the first of its lease, or one above the restored one when a job of an
// earlier version ran more epochs; it must be one of the lease's.
func (r *resumed) runAfter(job string, lease *messages.Lease, restored uint64) error {
	first, last := snapshots.HolderEpochs(lease)
	r.epoch = max(first, restored+1)
	if r.epoch > last {
		return fmt.Errorf("actors: job %q: the checkpoint it restores was taken in epoch %d, above the epochs of its lease (%d to %d); delete the lease's objects under %s once no instance of the job runs",
			job, restored, first, last, snapshots.LeasesPrefix(job))
	}
	return nil
}

// resumeFrom starts the job from the point WithSavepoint or WithCheckpoint
// names, and records it as the job's origin.
func resumeFrom(ctx context.Context, r *resumed, cfg *config, plan *dataflow.Plan, declared map[string][]*messages.StateDescriptor, log *slog.Logger, lease *messages.Lease) (*resumed, error) {
	job := plan.Job
	o := &messages.Origin{Savepoint: cfg.from.savepoint, CheckpointId: cfg.from.checkpoint}
	rp, err := loadOrigin(ctx, r.cps, o)
	switch {
	case errors.Is(err, snapshots.ErrNotFound) && cfg.from.isSavepoint:
		return nil, fmt.Errorf("actors: job %q: start from %s: the store %s holds no complete savepoint of that name (list them with `snapflow savepoints list`): %w",
			job, cfg.from, cfg.store, err)
	case err != nil:
		return nil, fmt.Errorf("actors: job %q: start from %s in %s: %w", job, cfg.from, cfg.store, err)
	}
	m := rp.Manifest
	if r.assign, err = planRestore(cfg, plan, declared, rp, true, log); err != nil {
		return nil, fmt.Errorf("actors: job %q: start from %s: %w", job, cfg.from, err)
	}
	warnUndescribed(rp, log)
	o.CheckpointId = m.GetCheckpointId()
	o.FirstId = max(r.maxID, m.GetCheckpointId()) + 1
	o.TimestampUnixNano = time.Now().UnixNano()
	if err := r.cps.PutOrigin(ctx, o); err != nil {
		return nil, fmt.Errorf("actors: job %q: record that it starts from %s: %w", job, cfg.from, err)
	}
	r.origin, r.maxID = o, o.FirstId-1
	r.point = rp
	if err := r.runAfter(job, lease, m.GetEpoch()); err != nil {
		return nil, err
	}
	log.Info("starting from "+cfg.from.String(), "checkpoint", m.GetCheckpointId(), "epoch", r.epoch, "first_checkpoint", o.FirstId)
	return r, nil
}

// loadPoint loads the checkpoint a job resumes from: the newest usable
// complete checkpoint of its current history (ids from origin's FirstId
// on), or, when it has none, the origin itself (named is then true). It
// returns nil when there is neither.
//
// With heads (a job in one process), it reads only the heads of the newest
// checkpoint's states, and the tasks stream their key groups from the store
// (see task.restore); a cluster's workers read their tasks' states whole.
//
// A job with two-phase-commit sinks never falls back past a complete
// checkpoint that proves damaged: its completion committed the sinks'
// output, which an older checkpoint would commit again. It fails with an
// error wrapping snapshots.ErrFallbackRefused that says what to do. Nor
// does it restore a point older than floor, the newest checkpoint it
// restored or completed (0 at Start): see refuseBelow.
func loadPoint(ctx context.Context, cps *snapshots.Checkpoints, origin *messages.Origin, heads bool, plan *dataflow.Plan, floor uint64) (rp *snapshots.Restorable, named bool, err error) {
	rp, named, err = loadNewest(ctx, cps, origin, heads, plan)
	if err == nil {
		err = refuseBelow(rp, floor, plan.TransactionalSinks(), cps.Store().String())
	}
	if err != nil {
		return nil, named, err
	}
	return rp, named, nil
}

// loadNewest is loadPoint without its floor.
func loadNewest(ctx context.Context, cps *snapshots.Checkpoints, origin *messages.Origin, heads bool, plan *dataflow.Plan) (rp *snapshots.Restorable, named bool, err error) {
	sinks := plan.TransactionalSinks()
	rp, err = cps.Load(ctx, snapshots.LoadOptions{First: origin.GetFirstId(), Heads: heads, NoFallback: len(sinks) > 0})
	if errors.Is(err, snapshots.ErrFallbackRefused) {
		return nil, false, fmt.Errorf("%w; the job's two-phase-commit sinks %q committed that checkpoint's output when it completed, so restoring an older one would commit records twice: restore the damaged object, or start the job from an older checkpoint on purpose (WithCheckpoint; what followed it is committed again), or discard its checkpoints (WithStartOver)",
			err, sinks)
	}
	if rp != nil || origin == nil || (err != nil && !errors.Is(err, snapshots.ErrNoUsableCheckpoint)) {
		return rp, false, err
	}
	// No checkpoint of the current history, or none usable: its origin
	// precedes them all.
	why := "has completed no checkpoint since"
	if err != nil {
		why = fmt.Sprintf("none of the checkpoints it completed since can be restored (%v)", err)
	}
	if rp, err = loadOrigin(ctx, cps, origin); err != nil {
		return nil, true, fmt.Errorf("the job resumes from its origin, %s (where it was started from, or stopped with a savepoint), as it %s: %w", originString(origin), why, err)
	}
	return rp, true, nil
}

// loadOrigin loads the savepoint or checkpoint o names; a missing or
// corrupt object is an error, never a fallback.
func loadOrigin(ctx context.Context, cps *snapshots.Checkpoints, o *messages.Origin) (*snapshots.Restorable, error) {
	if o.GetSavepoint() != "" {
		return cps.LoadSavepoint(ctx, o.GetSavepoint())
	}
	return cps.LoadCheckpoint(ctx, o.GetCheckpointId())
}

func originString(o *messages.Origin) string {
	if o.GetSavepoint() != "" {
		return fmt.Sprintf("savepoint %q", o.GetSavepoint())
	}
	return fmt.Sprintf("checkpoint %d", o.GetCheckpointId())
}

// planRestore refuses a checkpoint that cannot be restored exactly into
// plan, and otherwise says where each task's state comes from. A named
// point (a savepoint or checkpoint the job was started from) maps state by
// operator id and may be rescaled; the newest checkpoint needs the same
// topology unless WithAllowTopologyChange.
func planRestore(cfg *config, plan *dataflow.Plan, declared map[string][]*messages.StateDescriptor, rp *snapshots.Restorable, named bool, log *slog.Logger) (*dataflow.Restore, error) {
	m := rp.Manifest
	if fp := m.GetTopologyFingerprint(); fp != plan.Fingerprint && !cfg.allowNewTopology && !named {
		what := "" // empty for a checkpoint that predates the topology's description
		if d := dataflow.TopologyChange(m.GetTopology(), plan.Topology(), "the checkpoint", "this job"); d != "" {
			what = " (" + d + ")"
		}
		return nil, fmt.Errorf("%w: checkpoint %d was taken from a different topology%s (fingerprint %s, this job %s); start with WithAllowTopologyChange to restore it anyway, or use another job name or store",
			topology.ErrRestoreRefused, m.GetCheckpointId(), what, fp, plan.Fingerprint)
	}
	a, err := dataflow.PlanRestore(plan, declared, m, rp.States, dataflow.RestoreOptions{
		Rescale: named || cfg.allowNewTopology, AllowNonRestoredState: cfg.allowNonRestored,
	})
	if err != nil {
		return nil, err
	}
	if len(a.Dropped) > 0 {
		log.Warn("dropping the state of operators the job no longer has (WithAllowNonRestoredState)", "checkpoint", m.GetCheckpointId(), "operators", a.Dropped)
	}
	if len(a.DroppedInFlight) > 0 {
		log.Warn("dropping the records in flight to operators the job no longer has (WithAllowNonRestoredState)", "checkpoint", m.GetCheckpointId(), "in_flight", a.DroppedInFlight)
	}
	if len(a.DroppedWatermarks) > 0 {
		log.Warn("dropping the watermarks in flight on channels whose records were redistributed; the tasks resume from their stored watermarks", "checkpoint", m.GetCheckpointId(), "watermarks", a.DroppedWatermarks)
	}
	if len(a.Rescaled) > 0 {
		log.Info("redistributing state over new parallelisms", "checkpoint", m.GetCheckpointId(), "operators", a.Rescaled)
	}
	return a, nil
}

// discard deletes every checkpoint of the job (WithStartOver).
func discard(ctx context.Context, cps *snapshots.Checkpoints, log *slog.Logger) error {
	n, err := cps.DeleteAll(ctx)
	if n > 0 {
		log.Info("discarded the job's checkpoints (WithStartOver)", "checkpoints", n)
	}
	return err
}

// warnUndescribed warns about keyed state stored without descriptors (by a
// version that did not record them): its types cannot be checked.
func warnUndescribed(rp *snapshots.Restorable, log *slog.Logger) {
	seen := map[string]bool{}
	for _, st := range rp.States {
		if len(st.GetKeyGroups()) > 0 && len(st.GetStateDescriptors()) == 0 && !seen[st.GetOperator()] {
			seen[st.GetOperator()] = true
			log.Warn("the checkpoint holds keyed state without state descriptors (taken by an older snapflow): its types cannot be checked; keep its state declarations unchanged",
				"checkpoint", rp.Manifest.GetCheckpointId(), "operator", st.GetOperator())
		}
	}
}
