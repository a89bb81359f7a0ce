package align

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// item is a data value in the invariant tests: the seq-th data item of its
// input.
type item struct{ in, seq int }

// checker drives an Aligner with a per-input FIFO event sequence and checks
// the invariants of DESIGN.md on every action:
//
//	(a) every data item is processed exactly once, in per-input FIFO order;
//	(b) the snapshot boundary: before Snapshot(n), exactly the items that
//	    precede barrier n on each input that delivered it were processed,
//	    and every other input has ended;
//	(c) Snapshot and Abort ids strictly increase (so each id gets at most
//	    one of them);
//	(d) AllEnded comes exactly once, last, when every input has ended;
//	(e) buffers are empty at the end.
type checker struct {
	a   *Aligner[item]
	out []Action[item]

	sent        []int            // data items delivered, per input
	processed   []int            // data items processed, per input
	preBarrier  []map[uint64]int // barrier id -> data items before it, per input
	maxBarrier  []uint64         // highest barrier delivered, per input
	endSent     []bool           // End delivered
	endDone     []bool           // EndOfInput seen
	finished    map[uint64]ActionKind
	last        uint64 // highest Snapshot or Abort id
	maxExtAbort uint64 // highest id passed to AbortCheckpoint
	allEnded    bool
	lastSnap    uint64
	trace       []traceLine // for failure messages
}

func newChecker(k int) *checker {
	c := &checker{
		a:          New[item](k),
		sent:       make([]int, k),
		processed:  make([]int, k),
		preBarrier: make([]map[uint64]int, k),
		maxBarrier: make([]uint64, k),
		endSent:    make([]bool, k),
		endDone:    make([]bool, k),
		finished:   map[uint64]ActionKind{},
	}
	for i := range c.preBarrier {
		c.preBarrier[i] = map[uint64]int{}
	}
	return c
}

// open reports whether input i may still deliver items.
func (c *checker) open(i int) bool { return !c.endSent[i] }

func (c *checker) data(i int) error {
	ev := Event[item]{Kind: Data, Input: i, Data: item{i, c.sent[i]}}
	c.sent[i]++
	return c.step(ev)
}

// barrier delivers barrier id on input i; id must exceed the input's last.
func (c *checker) barrier(i int, id uint64) error {
	c.preBarrier[i][id] = c.sent[i]
	c.maxBarrier[i] = id
	return c.step(Event[item]{Kind: Barrier, Input: i, Checkpoint: id})
}

func (c *checker) end(i int) error {
	c.endSent[i] = true
	return c.step(Event[item]{Kind: End, Input: i})
}

func (c *checker) step(ev Event[item]) error {
	c.trace = append(c.trace, traceLine{ev: ev})
	c.out = c.a.Step(ev, c.out[:0])
	return c.check()
}

func (c *checker) abort(id uint64) error {
	c.trace = append(c.trace, traceLine{abortID: id})
	c.maxExtAbort = max(c.maxExtAbort, id)
	aligning, ok := c.a.Aligning()
	c.out = c.a.AbortCheckpoint(id, c.out[:0])
	// Only the first action answers the call; later aborts come from
	// released barriers.
	switch {
	case ok && aligning <= id && (len(c.out) == 0 || c.out[0].Kind != Abort || c.out[0].Checkpoint != aligning):
		return fmt.Errorf("AbortCheckpoint(%d) while aligning %d: first action not abort id=%d", id, aligning, aligning)
	case (!ok || aligning > id) && len(c.out) > 0:
		return fmt.Errorf("AbortCheckpoint(%d) while aligning %d (%v): want no actions, got %v", id, aligning, ok, c.out)
	}
	return c.check()
}

// check checks the actions of the last call.
func (c *checker) check() error {
	for _, act := range c.out {
		c.trace = append(c.trace, traceLine{act: act})
		if err := c.checkAction(act); err != nil {
			return fmt.Errorf("%s: %w", act, err)
		}
	}
	if err := checkInvariants(c.a); err != nil {
		return err
	}
	if s := c.a.LastSnapshot(); s != c.lastSnap {
		return fmt.Errorf("LastSnapshot() = %d, want %d", s, c.lastSnap)
	}
	return nil
}

func (c *checker) checkAction(act Action[item]) error {
	if c.allEnded {
		return fmt.Errorf("action after all-ended")
	}
	switch act.Kind {
	case Process:
		i := act.Input
		if want := (item{i, c.processed[i]}); act.Data != want {
			return fmt.Errorf("(a) processed %+v, want %+v", act.Data, want)
		}
		if c.processed[i] >= c.sent[i] {
			return fmt.Errorf("(a) processed more than sent on input %d", i)
		}
		c.processed[i]++
	case Snapshot, Abort:
		id := act.Checkpoint
		if id <= c.last {
			return fmt.Errorf("(c) id %d after %s of %d", id, c.finished[c.last], c.last)
		}
		if !c.delivered(id) {
			return fmt.Errorf("checkpoint %d finished but never delivered", id)
		}
		c.last = id
		c.finished[id] = act.Kind
		if act.Kind == Snapshot {
			c.lastSnap = id
			return c.checkBoundary(id)
		}
	case EndOfInput:
		i := act.Input
		switch {
		case !c.endSent[i] || c.endDone[i]:
			return fmt.Errorf("(d) unexpected end of input %d", i)
		case c.processed[i] != c.sent[i]:
			return fmt.Errorf("(a) input %d ended with %d of %d items processed", i, c.processed[i], c.sent[i])
		}
		c.endDone[i] = true
	case AllEnded:
		if slices.Contains(c.endDone, false) {
			return fmt.Errorf("(d) all-ended with inputs open: %v", c.endDone)
		}
		c.allEnded = true
	default:
		return fmt.Errorf("unknown action")
	}
	return nil
}

// checkBoundary is invariant (b) for Snapshot(id).
func (c *checker) checkBoundary(id uint64) error {
	for i := range c.sent {
		pre, ok := c.preBarrier[i][id]
		switch {
		case ok && c.processed[i] != pre:
			return fmt.Errorf("(b) input %d: %d items processed, %d precede barrier %d", i, c.processed[i], pre, id)
		case !ok && !c.endDone[i]:
			return fmt.Errorf("(b) input %d neither delivered barrier %d nor ended", i, id)
		}
	}
	return nil
}

func (c *checker) delivered(id uint64) bool {
	for i := range c.preBarrier {
		if _, ok := c.preBarrier[i][id]; ok {
			return true
		}
	}
	return false
}

// finish checks the end state once every item has been delivered. If some
// input has not ended, it aborts the alignments in progress first.
func (c *checker) finish() error {
	if err := c.checkLiveness(); err != nil {
		return err
	}
	if !slices.Contains(c.endSent, false) {
		if !c.allEnded {
			return fmt.Errorf("(d) every input ended but no all-ended")
		}
	} else {
		// A release may start the next alignment: abort until none is left.
		for id, ok := c.a.Aligning(); ok; id, ok = c.a.Aligning() {
			if err := c.abort(id); err != nil {
				return err
			}
		}
	}
	if n := c.a.Buffered(); n != 0 {
		return fmt.Errorf("(e) %d items still buffered", n)
	}
	if _, ok := c.a.Aligning(); ok && c.allEnded {
		return fmt.Errorf("(e) aligning after all-ended")
	}
	if !slices.Equal(c.processed, c.sent) {
		return fmt.Errorf("(a) processed %v, sent %v", c.processed, c.sent)
	}
	return nil
}

// checkLiveness: a checkpoint that every input delivered, or ended without
// skipping it, and that was not aborted externally, must be snapshotted.
func (c *checker) checkLiveness() error {
	ids := map[uint64]bool{}
	for i := range c.preBarrier {
		for id := range c.preBarrier[i] {
			ids[id] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ids)) {
		if id <= c.maxExtAbort || c.finished[id] == Snapshot {
			continue
		}
		live := true
		for i := range c.preBarrier {
			if _, ok := c.preBarrier[i][id]; !ok && (!c.endDone[i] || c.maxBarrier[i] > id) {
				live = false
			}
		}
		if live {
			return fmt.Errorf("checkpoint %d delivered on every open input but never snapshotted", id)
		}
	}
	return nil
}

// traceLine is one call (a Step or an AbortCheckpoint) or one action.
type traceLine struct {
	ev      Event[item]
	abortID uint64
	act     Action[item]
}

func (l traceLine) String() string {
	switch {
	case l.act.Kind != 0:
		return "  " + l.act.String()
	case l.abortID != 0:
		return fmt.Sprintf("abort id=%d", l.abortID)
	case l.ev.Kind == Barrier:
		return fmt.Sprintf("barrier in=%d id=%d", l.ev.Input, l.ev.Checkpoint)
	default:
		return fmt.Sprintf("%s in=%d", l.ev.Kind, l.ev.Input)
	}
}

func (c *checker) String() string {
	const tail = 80
	t := c.trace
	if len(t) > tail {
		t = t[len(t)-tail:]
	}
	var b strings.Builder
	fmt.Fprintf(&b, "last %d of %d trace lines:\n", len(t), len(c.trace))
	for _, l := range t {
		b.WriteString(l.String() + "\n")
	}
	return b.String()
}
