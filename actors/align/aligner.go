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
		bufs:    make([]fifo[M], inputs),
		open:    inputs,
	}
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
		if !a.blocked[i] { // the hot path
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
		return append(out, Action[M]{Kind: Process, Input: ev.Input, Data: ev.Data})
	case Barrier:
		return a.onBarrier(ev, out)
	default:
		return a.onEnd(ev.Input, out)
	}
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
	out = a.maybeSnapshot(out)
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

// Aligning returns the checkpoint being aligned, if any.
func (a *Aligner[M]) Aligning() (id uint64, ok bool) { return a.aligning, a.aligning != 0 }

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
