package engine

import (
	"fmt"

	"github.com/snapflow/snapflow/snapshots"
)

// refuseBelow refuses restore point rp of a job with the two-phase-commit
// sinks named in sinks when it is older than floor, the newest checkpoint
// the job restored or completed: that checkpoint's completion committed
// the sinks' output up to it, which a restore of an older point would
// commit again. floor's manifest is then gone from store (deleted, or void
// because a holder that took the job over never saw it). It returns an
// error wrapping snapshots.ErrFallbackRefused that names the checkpoint
// missing and the one recovery found, and nil otherwise, and always
// without such sinks (they commit nothing twice) or without a restore
// point (the caller refuses that itself).
func refuseBelow(rp *snapshots.Restorable, floor uint64, sinks []string, store string) error {
	if len(sinks) == 0 || rp == nil || floor == 0 {
		return nil
	}
	id := rp.Manifest.GetCheckpointId()
	if id >= floor {
		return nil
	}
	what := fmt.Sprintf("checkpoint %d", id)
	if sp := rp.Manifest.GetSavepoint(); sp != "" {
		what = fmt.Sprintf("savepoint %q (checkpoint %d)", sp, id)
	}
	return fmt.Errorf("%w: checkpoint %d, the newest this job restored or completed, is missing from the store %s (deleted, or void), and recovery found %s, older; the job's two-phase-commit sinks %q committed the output up to checkpoint %d, so restoring %s would commit records twice: put checkpoint %d back, or start the job from an older point on purpose (WithCheckpoint; what followed it is committed again), or discard its checkpoints (WithStartOver)",
		snapshots.ErrFallbackRefused, floor, store, what, sinks, floor, what, floor)
}
