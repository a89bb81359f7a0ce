package align

import "fmt"

// Aligner aligns checkpoint barriers across the k inputs of one task. It is a
// pure state machine: the task feeds it every item its inputs deliver,
// through Step, and carries out the returned actions in order.
//
// An Aligner is not safe for concurrent use; it belongs to one task actor.
type Aligner[M any] struct {
	blocked []bool    // input delivered the barrier being aligned
	held    []bool    // input's buffer must not be drained yet (see onBarrier)
	endSeen []bool    // End was delivered through Step (maybe still buffered)
	ended   []bool    // End was dispatched: the input counts as aligned
	bufs    []fifo[M] // per-input alignment buffers

	open     int    // inputs not ended
	aligning uint64 // checkpoint being aligned, 0 if none
	arrived  int    // inputs blocked on aligning
	buffered int    // items in all buffers
	done     uint64 // highest checkpoint snapshotted or aborted
	lastSnap uint64 // highest checkpoint snapshotted
	release  bool   // inputs were unblocked: their buffers must be drained

	// track: at-least-once, barriers are counted, never aligned (but
	// those of Event.Aligned); pending are the checkpoints counted, by
	// ascending id.
	track   bool
	pending []tracked

	// Unaligned (see NewUnaligned): persisting is the checkpoint
	// snapshotted whose barrier has not yet arrived on every input; rec
	// marks the inputs whose data is recorded for it meanwhile.
	una        bool
	persisting uint64
	rec        []bool
}

// tracked is a checkpoint whose barriers an at-least-once Aligner counts.
type tracked struct {
	id   uint64
	seen []bool // by input
}

// New returns an Aligner for a task with the given number of inputs,
// numbered 0..inputs-1. It panics if inputs < 1.
func New[M any](inputs int) *Aligner[M] {
	if inputs < 1 {
		panic(fmt.Sprintf("align: New(%d): a task needs at least one input", inputs))
	}
	return &Aligner[M]{
		blocked: make([]bool, inputs),
		held:    make([]bool, inputs),
		endSeen: make([]bool, inputs),
		ended:   make([]bool, inputs),
		rec:     make([]bool, inputs),
		bufs:    make([]fifo[M], inputs),
		open:    inputs,
	}
}

// NewAtLeastOnce returns an Aligner for at-least-once checkpoints: it never
// blocks an input. It counts each checkpoint's barriers, and once one has
// arrived on every open input it returns Snapshot, after Abort for the
// older checkpoints still counted; data that follows a barrier on one
// input is processed before the others' arrive, so the snapshot may
// reflect it, and a restore replays it again. Several checkpoints may be
// counted at once. A barrier with Event.Aligned (a savepoint's) is aligned
// as by New.
func NewAtLeastOnce[M any](inputs int) *Aligner[M] {
	a := New[M](inputs)
	a.track = true
	return a
}

// Step feeds the Aligner the next item delivered on ev.Input and appends the
// resulting actions to out, in the order the task must carry them out.
//
// Step panics if the input is out of range, if an item follows the End of
// its input, if a barrier has checkpoint id 0, or if the kind is unknown:
// these are protocol violations by the caller.
func (a *Aligner[M]) Step(ev Event[M], out []Action[M]) []Action[M] {
	i := ev.Input
	if uint(i) >= uint(len(a.blocked)) {
		panic(fmt.Sprintf("align: %s on input %d, want 0..%d", ev.Kind, i, len(a.blocked)-1))
	}
	if a.endSeen[i] {
		panic(fmt.Sprintf("align: %s on input %d after its end", ev.Kind, i))
	}
	switch ev.Kind {
	case Data:
		if !a.blocked[i] && !a.rec[i] { // the hot path
			return append(out, Action[M]{Kind: Process, Input: i, Data: ev.Data})
		}
	case Barrier:
		if ev.Checkpoint == 0 {
			panic(fmt.Sprintf("align: barrier with checkpoint id 0 on input %d", i))
		}
	case End:
		a.endSeen[i] = true
	default:
		panic(fmt.Sprintf("align: unknown %s on input %d", ev.Kind, i))
	}
	out = a.dispatch(ev, out)
	return a.drain(out)
}

// AbortCheckpoint tells the Aligner that checkpoint id was aborted
// (coordinator timeout or a decline elsewhere). If a checkpoint <= id is
// being aligned, it stops: Abort is appended and the alignment buffers are
// released as after a Snapshot. Barriers <= id that arrive later are stale
// and ignored. An id at or below the last snapshot or abort is a no-op.
func (a *Aligner[M]) AbortCheckpoint(id uint64, out []Action[M]) []Action[M] {
	if a.aligning != 0 && a.aligning <= id {
		out = a.finish(Abort, out)
	}
	if a.persisting != 0 && a.persisting <= id {
		out = a.endPersisting(Abort, out)
	}
	out = a.dropTracked(id, out)
	a.done = max(a.done, id)
	return a.drain(out)
}

// dispatch handles one item of an input, either delivered or released from
// its buffer.
func (a *Aligner[M]) dispatch(ev Event[M], out []Action[M]) []Action[M] {
	if a.blocked[ev.Input] {
		a.bufs[ev.Input].push(ev)
		a.buffered++
		return out
	}
	switch ev.Kind {
	case Data:
		if a.rec[ev.Input] {
			return append(out, Action[M]{Kind: Process, Input: ev.Input, Data: ev.Data, Checkpoint: a.persisting, InFlight: true})
		}
		return append(out, Action[M]{Kind: Process, Input: ev.Input, Data: ev.Data})
	case Barrier:
		switch {
		case a.track && !ev.Aligned:
			return a.onTracked(ev, out)
		case (a.una || a.persisting != 0) && !ev.Aligned:
			return a.onUnaligned(ev, out)
		case a.persisting != 0:
			// An aligned barrier (a savepoint's) while an unaligned
			// checkpoint is persisted: the older of the two is given up.
			if ev.Checkpoint < a.persisting {
				return out // stale
			}
			out = a.endPersisting(Abort, out)
		}
		return a.onBarrier(ev, out)
	default:
		return a.onEnd(ev.Input, out)
	}
}

// onTracked counts a barrier of an at-least-once checkpoint.
func (a *Aligner[M]) onTracked(ev Event[M], out []Action[M]) []Action[M] {
	id, i := ev.Checkpoint, ev.Input
	if id <= a.done {
		return out // stale
	}
	if a.aligning != 0 && id > a.aligning {
		// An aligned checkpoint overtaken on an input it has not
		// reached: it was aborted upstream (see onBarrier).
		out = a.finish(Abort, out)
		a.held[i] = true
		out = a.drain(out)
		a.held[i] = false
	}
	k := 0
	for k < len(a.pending) && a.pending[k].id < id {
		k++
	}
	if k == len(a.pending) || a.pending[k].id != id {
		a.pending = append(a.pending, tracked{})
		copy(a.pending[k+1:], a.pending[k:])
		a.pending[k] = tracked{id: id, seen: make([]bool, len(a.blocked))}
	}
	a.pending[k].seen[i] = true
	return a.completeTracked(out)
}

// completeTracked snapshots the newest counted checkpoint whose barrier
// has arrived on every open input, aborting the older ones.
func (a *Aligner[M]) completeTracked(out []Action[M]) []Action[M] {
	for k := len(a.pending) - 1; k >= 0; k-- {
		p := a.pending[k]
		complete := true
		for i, seen := range p.seen {
			complete = complete && (seen || a.ended[i])
		}
		if !complete {
			continue
		}
		out = a.dropTracked(p.id-1, out)
		a.pending = a.pending[1:] // p is now the oldest
		a.done, a.lastSnap = p.id, p.id
		return append(out, Action[M]{Kind: Snapshot, Input: -1, Checkpoint: p.id})
	}
	return out
}

// dropTracked aborts the counted checkpoints up to id.
func (a *Aligner[M]) dropTracked(id uint64, out []Action[M]) []Action[M] {
	n := 0
	for n < len(a.pending) && a.pending[n].id <= id {
		out = append(out, Action[M]{Kind: Abort, Input: -1, Checkpoint: a.pending[n].id})
		n++
	}
	a.pending = a.pending[n:]
	return out
}

func (a *Aligner[M]) onBarrier(ev Event[M], out []Action[M]) []Action[M] {
	id, i := ev.Checkpoint, ev.Input
	switch {
	case id <= a.done || id < a.aligning:
		return out // stale
	case a.aligning == 0:
		a.aligning = id
	case id > a.aligning:
		// A newer barrier overtook the alignment. Give it up, let the
		// inputs blocked on it catch up (their buffered items precede
		// their own next barrier), then treat this barrier normally. Input
		// i's buffer is held back meanwhile: its items follow ev.
		out = a.finish(Abort, out)
		a.held[i] = true
		out = a.drain(out)
		a.held[i] = false
		return a.dispatch(ev, out)
	}
	a.blocked[i] = true
	a.arrived++
	return a.maybeSnapshot(out)
}

func (a *Aligner[M]) onEnd(i int, out []Action[M]) []Action[M] {
	a.ended[i] = true
	a.open--
	out = append(out, Action[M]{Kind: EndOfInput, Input: i})
	if a.rec[i] {
		a.rec[i] = false
		out = a.maybePersisted(out)
	}
	out = a.maybeSnapshot(out)
	out = a.completeTracked(out)
	if a.open == 0 {
		// Every End has been dispatched, so every buffer is empty and
		// nothing can follow.
		out = append(out, Action[M]{Kind: AllEnded, Input: -1})
	}
	return out
}

// maybeSnapshot snapshots the checkpoint being aligned once every open input
// has delivered its barrier.
func (a *Aligner[M]) maybeSnapshot(out []Action[M]) []Action[M] {
	if a.aligning != 0 && a.arrived == a.open {
		out = a.finish(Snapshot, out)
	}
	return out
}

// finish ends the alignment with a Snapshot or an Abort and unblocks every
// input. The caller drains the buffers.
func (a *Aligner[M]) finish(kind ActionKind, out []Action[M]) []Action[M] {
	id := a.aligning
	out = append(out, Action[M]{Kind: kind, Input: -1, Checkpoint: id})
	a.done = id
	if kind == Snapshot {
		a.lastSnap = id
	}
	out = a.dropTracked(id, out)
	a.aligning, a.arrived = 0, 0
	clear(a.blocked)
	a.release = true
	return out
}

// drain re-steps buffered items, input 0's buffer first, until every input
// that is neither blocked nor held has an empty buffer. A released barrier
// may block its input again, leaving the rest of its buffer in place; one
// that completes an alignment restarts the release from input 0.
func (a *Aligner[M]) drain(out []Action[M]) []Action[M] {
	for a.release {
		a.release = false
		for i := 0; i < len(a.bufs) && !a.release; i++ {
			for !a.release && !a.blocked[i] && !a.held[i] && a.bufs[i].len() > 0 {
				a.buffered--
				out = a.dispatch(a.bufs[i].pop(), out)
			}
		}
	}
	return out
}

// Aligning returns the checkpoint being aligned, if any; at least once,
// the oldest being counted when none is aligned; unaligned, the one being
// persisted.
func (a *Aligner[M]) Aligning() (id uint64, ok bool) {
	if a.aligning == 0 && len(a.pending) > 0 {
		return a.pending[0].id, true
	}
	if a.aligning == 0 && a.persisting != 0 {
		return a.persisting, true
	}
	return a.aligning, a.aligning != 0
}

// Blocked reports whether input has delivered the barrier being aligned, so
// that its items are buffered.
func (a *Aligner[M]) Blocked(input int) bool { return a.blocked[input] }

// Buffered returns the number of items held in all alignment buffers.
func (a *Aligner[M]) Buffered() int { return a.buffered }

// BufferedOn returns the number of items held in input's alignment buffer.
func (a *Aligner[M]) BufferedOn(input int) int { return a.bufs[input].len() }

// Ended reports whether input's End has been dispatched (an End delivered
// while the input is blocked stays buffered until released).
func (a *Aligner[M]) Ended(input int) bool { return a.ended[input] }

// Inputs returns the number of inputs.
func (a *Aligner[M]) Inputs() int { return len(a.blocked) }

// LastSnapshot returns the highest checkpoint id snapshotted, 0 if none.
func (a *Aligner[M]) LastSnapshot() uint64 { return a.lastSnap }
