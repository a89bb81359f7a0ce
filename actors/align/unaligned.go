package align

// NewUnaligned returns an Aligner for unaligned checkpoints (Flink's
// FLIP-76): it never blocks an input for a checkpoint. The first barrier
// of checkpoint n, on any input, gives a Snapshot with Unaligned at once:
// the task snapshots its state as it is, ahead of the items it has been
// given as Process actions but not yet carried out, which it records as
// n's channel state, and sends barrier n downstream ahead of its queued
// output. Until barrier n has arrived on an input, the data of that input
// comes as Process actions with InFlight (processed, and recorded for n);
// once it has arrived on every open input, Persisted(n) says the channel
// state is complete. A newer barrier gives the checkpoint being persisted
// up (Abort) first, as does AbortCheckpoint. A barrier with Event.Aligned
// (a savepoint's) is aligned as by New.
func NewUnaligned[M any](inputs int) *Aligner[M] {
	a := New[M](inputs)
	a.una = true
	return a
}

// Timeout switches checkpoint id, being aligned, to unaligned (the
// alignment timeout of an aligned Aligner): a Snapshot with Unaligned is
// appended at once; the inputs not yet at barrier id are recorded from
// now on (InFlight) until it arrives there, and every input is unblocked,
// its buffered items (which follow its barrier) released as Process
// actions. Persisted (or Abort) ends the checkpoint as for NewUnaligned.
// Any other id, or an Aligner not aligning id, is a no-op.
func (a *Aligner[M]) Timeout(id uint64, out []Action[M]) []Action[M] {
	if a.aligning != id || id == 0 {
		return out
	}
	a.aligning, a.arrived = 0, 0
	a.persisting, a.lastSnap = id, id
	for j := range a.rec {
		a.rec[j] = !a.blocked[j] && !a.ended[j]
	}
	out = append(out, Action[M]{Kind: Snapshot, Input: -1, Checkpoint: id, Unaligned: true})
	out = a.dropTracked(id, out)
	clear(a.blocked)
	a.release = true
	out = a.drain(out)
	return a.maybePersisted(out)
}

// onUnaligned handles a barrier of an unaligned checkpoint, or of one
// switched to unaligned by Timeout.
func (a *Aligner[M]) onUnaligned(ev Event[M], out []Action[M]) []Action[M] {
	id, i := ev.Checkpoint, ev.Input
	if id <= a.done || id < a.persisting || (a.aligning != 0 && id < a.aligning) {
		return out // stale
	}
	if !a.una && id > a.persisting { // a newer checkpoint, after a timeout: it starts aligned
		out = a.endPersisting(Abort, out)
		return a.onBarrier(ev, out)
	}
	if a.aligning != 0 { // a savepoint aligned, overtaken: given up upstream
		out = a.finish(Abort, out)
		a.held[i] = true
		out = a.drain(out)
		a.held[i] = false
	}
	if a.persisting != 0 && id > a.persisting {
		out = a.endPersisting(Abort, out)
	}
	if a.persisting == 0 {
		a.persisting, a.lastSnap = id, id
		for j := range a.rec {
			a.rec[j] = !a.ended[j]
		}
		out = append(out, Action[M]{Kind: Snapshot, Input: -1, Checkpoint: id, Unaligned: true})
	}
	a.rec[i] = false
	return a.maybePersisted(out)
}

// maybePersisted ends the checkpoint being persisted once its barrier has
// arrived on every open input.
func (a *Aligner[M]) maybePersisted(out []Action[M]) []Action[M] {
	if a.persisting == 0 {
		return out
	}
	for _, r := range a.rec {
		if r {
			return out
		}
	}
	return a.endPersisting(Persisted, out)
}

// endPersisting ends the checkpoint being persisted with Persisted or
// Abort.
func (a *Aligner[M]) endPersisting(kind ActionKind, out []Action[M]) []Action[M] {
	id := a.persisting
	a.persisting = 0
	clear(a.rec)
	a.done = max(a.done, id)
	return append(out, Action[M]{Kind: kind, Input: -1, Checkpoint: id, Unaligned: true})
}
