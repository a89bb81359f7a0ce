package watermark

import (
	"fmt"
	"math"
)

const (
	// Min is the watermark before any: every record is on time.
	Min int64 = math.MinInt64
	// Max is the end of event time: the watermark of an ended input.
	Max int64 = math.MaxInt64
)

// Status is the event-time state of an input or of a task: its watermark,
// and whether it is idle (nothing to send for now, so that it holds no
// other input back).
type Status struct {
	Watermark int64
	Idle      bool
}

// String shows the watermark ("min", "max" or nanoseconds) and "(idle)".
func (s Status) String() string {
	w := fmt.Sprint(s.Watermark)
	switch s.Watermark {
	case Min:
		w = "min"
	case Max:
		w = "max"
	}
	if s.Idle {
		return w + " (idle)"
	}
	return w
}

type input struct {
	wm    int64
	idle  bool
	ended bool
}

// Combiner combines the watermarks of a fixed number of inputs into one,
// by the rules of the package doc. A new Combiner's inputs are active and
// at Min. It is not safe for concurrent use.
type Combiner struct {
	ins []input
	out Status
}

// NewCombiner returns a Combiner of n inputs (n >= 1).
func NewCombiner(n int) *Combiner {
	if n < 1 {
		panic(fmt.Sprintf("watermark: a combiner of %d inputs", n))
	}
	c := &Combiner{ins: make([]input, n), out: Status{Watermark: Min}}
	for i := range c.ins {
		c.ins[i].wm = Min
	}
	return c
}

// Len is the number of inputs.
func (c *Combiner) Len() int { return len(c.ins) }

// Grow adds inputs until there are n, active and at Min: each holds the
// combined watermark where it is (it never goes back) until it advances,
// becomes idle or ends. A source that finds a new split grows its
// combiner of splits.
func (c *Combiner) Grow(n int) {
	for len(c.ins) < n {
		c.ins = append(c.ins, input{wm: Min})
	}
}

// Status is the combined status, as last returned.
func (c *Combiner) Status() Status { return c.out }

// Input is input i's status.
func (c *Combiner) Input(i int) Status {
	in := c.ins[i]
	return Status{Watermark: in.wm, Idle: in.idle && !in.ended}
}

// Advance records input i's watermark wm, which also makes the input
// active: something was sent on it. It returns the combined status and
// whether it changed.
func (c *Combiner) Advance(i int, wm int64) (Status, bool) {
	in := &c.ins[i]
	if in.ended {
		return c.out, false
	}
	if wm > in.wm {
		in.wm = wm
	}
	in.idle = false
	return c.update()
}

// SetIdle marks input i idle, or active again. An ended input stays
// ended. It returns the combined status and whether it changed.
func (c *Combiner) SetIdle(i int, idle bool) (Status, bool) {
	in := &c.ins[i]
	if in.ended {
		return c.out, false
	}
	in.idle = idle
	return c.update()
}

// IdleAt records input i's watermark wm and marks it idle, in one step:
// an idle status carries the watermark of the input as it went idle,
// which counts (as the highest of the idle inputs') even when it was never
// sent alone. It returns the combined status and whether it changed.
func (c *Combiner) IdleAt(i int, wm int64) (Status, bool) {
	in := &c.ins[i]
	if in.ended {
		return c.out, false
	}
	in.wm = max(in.wm, wm)
	in.idle = true
	return c.update()
}

// End marks input i ended: its watermark is Max from now on. It returns
// the combined status and whether it changed.
func (c *Combiner) End(i int) (Status, bool) {
	in := &c.ins[i]
	in.ended, in.idle, in.wm = true, false, Max
	return c.update()
}

// update recomputes the combined status.
func (c *Combiner) update() (Status, bool) {
	// lowest: over the active inputs; highest: over the idle ones.
	lowest, highest, active, idle := Max, Min, false, false
	for i := range c.ins {
		in := &c.ins[i]
		switch {
		case in.ended:
		case in.idle:
			idle = true
			highest = max(highest, in.wm)
		default:
			active = true
			lowest = min(lowest, in.wm)
		}
	}
	next := Status{Watermark: c.out.Watermark}
	switch {
	case active:
		next.Watermark = max(next.Watermark, lowest)
	case idle: // the inputs left are all idle
		next.Watermark = max(next.Watermark, highest)
		next.Idle = true
	default: // every input ended
		next.Watermark = Max
	}
	if next == c.out {
		return c.out, false
	}
	c.out = next
	return next, true
}
