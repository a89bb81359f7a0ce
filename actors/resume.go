package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// ErrAlreadyFinished is wrapped by the error of Start for a job whose newest
// checkpoint is its final one: it ran to the end, and resuming it would
// process nothing. Start it with WithStartOver to run it again.
var ErrAlreadyFinished = errors.New("actors: job already finished")

// resumed is where a job starts: its first epoch, the checkpoint it restores
// (nil: none) and the highest checkpoint id in the store.
type resumed struct {
	cps   *snapshots.Checkpoints
	epoch uint64
	point *snapshots.Restorable
	maxID uint64
}

// resume checks the store, discards the job's checkpoints under
// WithStartOver, and picks and checks the checkpoint the job starts from.
func resume(ctx context.Context, cfg *config, plan *topology.Plan, declared map[string][]*messages.StateDescriptor, log *slog.Logger) (*resumed, error) {
	job := plan.Job
	r := &resumed{cps: snapshots.NewCheckpoints(cfg.store, job, log), epoch: 1}
	if err := r.cps.Check(ctx); err != nil { // a panic in the store is an error too
		return nil, fmt.Errorf("actors: job %q: store %s is not usable: %w", job, cfg.store, err)
	}
	if cfg.startOver {
		if err := discard(ctx, r.cps, log); err != nil {
			return nil, fmt.Errorf("actors: job %q: WithStartOver: discard the checkpoints in %s: %w", job, cfg.store, err)
		}
	}
	var err error
	if r.maxID, err = r.cps.MaxID(ctx); err != nil {
		return nil, fmt.Errorf("actors: job %q: list checkpoints: %w", job, err)
	}
	rp, err := r.cps.LoadLatest(ctx)
	switch {
	case errors.Is(err, snapshots.ErrNoUsableCheckpoint):
		return nil, fmt.Errorf("actors: job %q: the store %s holds complete checkpoints, but none can be restored; refusing to start the job over from the beginning (inspect them with `snapflow checkpoints verify`, or start with WithStartOver to discard them): %w",
			job, cfg.store, err)
	case err != nil:
		return nil, fmt.Errorf("actors: job %q: load the newest checkpoint: %w", job, err)
	case rp == nil:
		retainAtStart(ctx, r, cfg, log)
		return r, nil
	}
	m := rp.Manifest
	if m.GetFinal() {
		return nil, fmt.Errorf("%w: job %q: its newest checkpoint, %d in %s, is the final one, taken after every source ended; start it with WithStartOver to discard its checkpoints and run it again from the beginning",
			ErrAlreadyFinished, job, m.GetCheckpointId(), cfg.store)
	}
	if err := checkPoint(cfg, plan, declared, rp); err != nil {
		return nil, fmt.Errorf("actors: job %q: %w", job, err)
	}
	warnUndescribed(rp, log)
	r.point, r.epoch = rp, m.GetEpoch()+1
	log.Info("resuming from checkpoint", "checkpoint", m.GetCheckpointId(), "epoch", r.epoch)
	retainAtStart(ctx, r, cfg, log)
	return r, nil
}

// checkPoint refuses a checkpoint that cannot be restored exactly into plan.
func checkPoint(cfg *config, plan *topology.Plan, declared map[string][]*messages.StateDescriptor, rp *snapshots.Restorable) error {
	m := rp.Manifest
	if fp := m.GetTopologyFingerprint(); fp != plan.Fingerprint && !cfg.allowNewTopology {
		return fmt.Errorf("%w: checkpoint %d was taken from a different topology (fingerprint %s, this job %s); start with WithAllowTopologyChange to restore it anyway, or use another job name or store",
			topology.ErrRestoreRefused, m.GetCheckpointId(), fp, plan.Fingerprint)
	}
	return topology.CheckRestore(plan, declared, m, rp.States)
}

// retainAtStart applies retention; a failure is only logged.
func retainAtStart(ctx context.Context, r *resumed, cfg *config, log *slog.Logger) {
	if err := r.cps.Retain(ctx, cfg.retained, r.maxID+1); err != nil {
		log.Warn("cleaning up old checkpoints failed", "err", err)
	}
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
