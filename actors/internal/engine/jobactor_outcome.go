package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
)

// inDoubt is a checkpoint abandoned by a failover while its manifest was
// being written, with the manual requests waiting for its outcome.
type inDoubt struct {
	final     bool
	requests  []uint64
	savepoint string // the savepoint's name, "" for a checkpoint
	stop      bool   // a stop-with-savepoint
}

// settle reports the outcome of in-doubt checkpoint id, once known: complete
// when its manifest landed, aborted otherwise. What the job reports matches
// what recovery uses, because recovery reads the same store.
func (j *jobActor) settle(id uint64, landed bool, why string) {
	d, ok := j.inDoubt[id]
	if !ok {
		return
	}
	delete(j.inDoubt, id)
	var err error
	if landed {
		if d.savepoint == "" { // recovery restores checkpoints, never savepoints
			j.lastCompleted = max(j.lastCompleted, id)
		}
		j.base = 0 // the tasks may not hold that snapshot's handle
		j.log.Info("a checkpoint abandoned by the failover is complete: its manifest landed", "checkpoint", id, "savepoint", d.savepoint, "how", why)
		ev := j.takeFigures(id).event(Event{Kind: EventCheckpointCompleted, Epoch: j.epoch, Checkpoint: id, Final: d.final, Savepoint: d.savepoint, Settled: true})
		if at, ok := j.triggeredAt[id]; ok {
			ev.Duration = time.Since(at)
		}
		j.emit(ev)
	} else {
		err = fmt.Errorf("%w: checkpoint %d aborted: %s", coordinator.ErrFailover, id, why)
		j.log.Warn("a checkpoint abandoned by the failover is aborted: its manifest did not land", "checkpoint", id, "savepoint", d.savepoint, "how", why)
		j.emit(Event{Kind: EventCheckpointAborted, Epoch: j.epoch, Checkpoint: id, Final: d.final, Savepoint: d.savepoint, Err: err})
		if d.savepoint != "" {
			j.cleanSavepoint(d.savepoint, id)
		} else {
			j.cleanAborted(id)
		}
	}
	delete(j.triggeredAt, id)
	delete(j.figures, id)
	j.savepointEnded(d.savepoint)
	if landed && d.stop && len(d.requests) == 1 && !j.stopFailedAt(id, d.requests[0]) { // the sources stopped at its barrier: so does the job
		j.stopAtSavepoint(d.savepoint, id, d.requests[0])
		return
	}
	for _, r := range d.requests {
		delete(j.savepoints, r)
		if reply := j.requests[r]; reply != nil {
			reply <- checkpointResult{id: id, err: err}
			delete(j.requests, r)
		}
	}
	j.maybeClean()
}

// cleanAborted asks for the objects of aborted checkpoint id, and of any
// older checkpoint without a manifest, to be deleted, so that aborts do not
// make the store grow. Uploads that land after the pass are caught by the
// next one, or by retention after the next completed checkpoint.
func (j *jobActor) cleanAborted(id uint64) {
	j.cleanBelow = max(j.cleanBelow, id+1)
	j.maybeClean()
}

// maybeClean starts a pass when one is wanted and none runs, and no manifest
// is being written or in doubt: their checkpoints have no manifest yet, but
// may be about to complete.
func (j *jobActor) maybeClean() {
	if j.cleaning || j.cleanBelow <= j.cleaned || j.manifests > 0 || len(j.inDoubt) > 0 {
		return
	}
	j.cleaning = true
	sh, root, self, below := j.sh, j.sh.system.Root, j.self, j.cleanBelow
	sh.goUploadCtx(sh.uploadCtx, func(ctx context.Context) {
		defer root.Send(self, &cleanedMsg{below: below})
		sh.deleteAborted(ctx, below)
	})
}

// cleanAtEnd runs a last pass when the job ends with aborted checkpoints
// left to delete, so that a stopped or failed job leaves none behind that
// had landed by then. It is bounded by endCleanTimeout, not by the job's
// contexts, which are cancelled at the end.
func (j *jobActor) cleanAtEnd() {
	// Even after a pass up to cleanBelow, uploads may have landed since.
	if j.cleanBelow == 0 || j.manifests > 0 || len(j.inDoubt) > 0 {
		return
	}
	sh, below := j.sh, j.cleanBelow
	sh.goWithin(context.WithoutCancel(sh.uploadCtx), endCleanTimeout, func(ctx context.Context) { sh.deleteAborted(ctx, below) })
}

// deleteAborted deletes the checkpoints without a manifest below below.
func (sh *shared) deleteAborted(ctx context.Context, below uint64) {
	n, err := sh.cps.DeleteIncomplete(ctx, below)
	switch {
	case err != nil && ctx.Err() == nil:
		sh.log.Warn("deleting aborted checkpoints failed", "below", below, "err", err)
	case n > 0:
		sh.log.Debug("deleted aborted checkpoints", "below", below, "checkpoints", n)
	}
}

// endCleanTimeout bounds the last pass of cleanAtEnd, which Stop waits for.
const endCleanTimeout = 5 * time.Second

func (j *jobActor) onCleaned(m *cleanedMsg) {
	j.cleaning = false
	j.cleaned = max(j.cleaned, m.below)
	if j.phase != phaseDone {
		j.maybeClean()
	}
}
