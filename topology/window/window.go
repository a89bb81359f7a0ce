package window

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/snapflow/snapflow/internal/windows"
	"github.com/snapflow/snapflow/topology"
)

// Window is the span [Start, End) of a window.
type Window struct {
	Start, End time.Time
}

// MaxTimestamp is the window's last instant: it fires when the watermark
// (or the clock) reaches it.
func (w Window) MaxTimestamp() time.Time { return w.End.Add(-1) }

// String shows the window as "[start, end)".
func (w Window) String() string {
	return fmt.Sprintf("[%s, %s)", w.Start.Format(time.RFC3339Nano), w.End.Format(time.RFC3339Nano))
}

func windowOf(w windows.Window) Window {
	return Window{Start: time.Unix(0, w.Start).UTC(), End: time.Unix(0, w.End).UTC()}
}

// ErrNoTimestamp is returned by an event-time window operator given a
// record without a timestamp: its source has no watermark strategy.
var ErrNoTimestamp = errors.New("window: an event-time window got a record without a timestamp; give its source topology.WithWatermarks, or use OnProcessingTime")

// stateName is the name of the operator's keyed state.
const stateName = "window"

// pane is a window's (tumbling, session) or a slice's (sliding)
// accumulator.
type pane[A any] struct {
	start, end int64
	acc        A
}

func (p pane[A]) window() windows.Window { return windows.Window{Start: p.start, End: p.end} }

// keyState is one key's open windows.
type keyState[A any] struct {
	panes []pane[A] // sorted by start, disjoint
	// firedThrough is, for sliding windows, the end of the last window
	// fired when the watermark (or clock) reached it: a window that ends
	// later has not fired yet.
	firedThrough int64
}

// agg is an aggregation as the operator uses it.
type agg[T, A any] struct {
	first func(T) A    // the accumulator of one record
	add   func(A, T) A // fold a record in
	merge func(A, A) A // fold the second into the first; may change the first only
	clone func(A) A    // an accumulator merge may change
	codec topology.Codec[A]
}

// emitFunc sends a fired window's result.
type emitFunc[K topology.Key, A, O any] func(key K, w windows.Window, acc A, out *topology.Collector[O]) error

// operator is the state and logic of one task of a window operator.
type operator[T any, K topology.Key, A, O any] struct {
	a        assigner
	lateness int64
	late     *topology.SideOutput[T]
	agg      agg[T, A]
	emit     emitFunc[K, A, O]
	state    *topology.ValueState[K, *keyState[A]]
}

// build adds the window operator: a keyed process function with one value
// state per key and timers at the windows' ends.
func build[T any, K topology.Key, A, O any](w Windowed[T, K], name string, ag agg[T, A], emit emitFunc[K, A, O], opts []topology.Option) topology.Stream[O] {
	a, err := w.check()
	w.in.Graph().Refuse(name, err)
	lateness := int64(w.lateness)
	return topology.Process(w.in, name, func(s *topology.KeyedSetup[K]) topology.ProcessFunc[K, T, O] {
		o := &operator[T, K, A, O]{a: a, lateness: lateness, late: w.late, agg: ag, emit: emit}
		o.state = topology.Value[*keyState[A]](s, stateName, stateCodec[A]{acc: ag.codec})
		topology.OnTimer(s, o.onTimer)
		return o.process
	}, opts...)
}

// cleanup is when a window whose last instant is maxTs can no longer fire:
// maxTs plus the allowed lateness, saturating.
func (o *operator[T, K, A, O]) cleanup(maxTs int64) int64 {
	if maxTs > math.MaxInt64-o.lateness {
		return math.MaxInt64
	}
	return maxTs + o.lateness
}

func (o *operator[T, K, A, O]) register(ctx *topology.Context[K], t int64) {
	if o.a.processing {
		ctx.RegisterProcessingTimer(time.Unix(0, t))
		return
	}
	ctx.RegisterEventTimer(time.Unix(0, t))
}

// registerWindow sets the timers of a window whose last instant is maxTs:
// its firing and, with allowed lateness, its cleanup.
func (o *operator[T, K, A, O]) registerWindow(ctx *topology.Context[K], maxTs int64) {
	o.register(ctx, maxTs)
	if o.lateness > 0 {
		o.register(ctx, o.cleanup(maxTs))
	}
}

// process assigns a record to its windows.
func (o *operator[T, K, A, O]) process(ctx *topology.Context[K], v T, out *topology.Collector[O]) error {
	var ts int64
	wm := int64(math.MinInt64)
	if o.a.processing {
		ts = time.Now().UnixNano()
	} else {
		t, ok := ctx.Timestamp()
		if !ok {
			return fmt.Errorf("operator of key %v: %w", ctx.Key(), ErrNoTimestamp)
		}
		ts = t.UnixNano()
		if w, ok := ctx.Watermark(); ok {
			wm = w.UnixNano()
		}
	}
	st, _ := o.state.Get()
	switch o.a.kind {
	case tumbling:
		w := o.a.tumbling.Assign(ts)
		if o.cleanup(w.MaxTimestamp()) <= wm {
			return o.lateRecord(ctx, v)
		}
		st = o.addTo(ctx, st, w, v, wm)
		if w.MaxTimestamp() <= wm { // late but allowed: fire again
			o.register(ctx, w.MaxTimestamp())
		}
	case sliding:
		p := o.a.sliding.Pane(ts)
		last := p.Start + o.a.sliding.Size // the end of the last window holding p
		if o.cleanup(last-1) <= wm {
			return o.lateRecord(ctx, v)
		}
		st = o.addTo(ctx, st, p, v, wm)
		for end := p.End; end <= last && end-1 <= wm; end += o.a.sliding.Slide {
			if o.cleanup(end-1) > wm { // a fired window still open: fire again
				o.register(ctx, end-1)
			}
		}
	case sessions:
		if st == nil {
			st = &keyState[A]{}
		}
		i, j, w := windows.Overlapping(st.panes, pane[A].window, windows.Window{Start: ts, End: ts + o.a.gap})
		if o.cleanup(w.MaxTimestamp()) <= wm {
			return o.lateRecord(ctx, v)
		}
		var acc A
		if i == j {
			acc = o.agg.first(v)
		} else {
			acc = st.panes[i].acc
			for _, p := range st.panes[i+1 : j] {
				acc = o.agg.merge(acc, p.acc)
			}
			acc = o.agg.add(acc, v)
			// The absorbed sessions' timers stay: another session may
			// share their times, and a timer that matches no window
			// fires nothing and drops only what is due.
		}
		st.panes = slices.Replace(st.panes, i, j, pane[A]{start: w.Start, end: w.End, acc: acc})
		o.registerWindow(ctx, w.MaxTimestamp()) // also fires again a late but allowed merge
		o.state.Set(st)
	}
	return nil
}

// addTo adds v to the pane w of st (nil: none yet), making the pane and its
// timers if it is new; it returns st.
func (o *operator[T, K, A, O]) addTo(ctx *topology.Context[K], st *keyState[A], w windows.Window, v T, wm int64) *keyState[A] {
	if st == nil {
		st = &keyState[A]{firedThrough: math.MinInt64}
		o.state.Set(st)
	}
	// Records come mostly in order: look from the newest pane back.
	i := len(st.panes) - 1
	for ; i >= 0 && st.panes[i].start > w.Start; i-- {
	}
	if i >= 0 && st.panes[i].start == w.Start {
		st.panes[i].acc = o.agg.add(st.panes[i].acc, v)
		return st
	}
	st.panes = slices.Insert(st.panes, i+1, pane[A]{start: w.Start, end: w.End, acc: o.agg.first(v)})
	if o.a.kind == sliding {
		// The first window holding the pane that has not fired on time;
		// the ones that did fire again through process.
		end := w.End
		if st.firedThrough >= end {
			end = st.firedThrough + o.a.sliding.Slide
		}
		if wm != math.MinInt64 && wm < math.MaxInt64 { // windows at or before the watermark fired (again, if still open, through process)
			end = max(end, o.a.sliding.Pane(wm+1).End)
		}
		if end <= w.Start+o.a.sliding.Size {
			o.register(ctx, end-1)
		}
		if o.lateness > 0 {
			o.register(ctx, o.cleanup(w.Start+o.a.sliding.Size-1))
		}
	} else {
		o.registerWindow(ctx, w.MaxTimestamp())
	}
	return st
}

func (o *operator[T, K, A, O]) lateRecord(ctx *topology.Context[K], v T) error {
	if o.late != nil {
		o.late.Emit(ctx, v)
	}
	return nil
}

// onTimer fires the windows that end at the timer, and drops the panes no
// window can use any more.
func (o *operator[T, K, A, O]) onTimer(ctx *topology.Context[K], timer topology.Timer, out *topology.Collector[O]) error {
	st, ok := o.state.Get()
	if !ok {
		return nil
	}
	t := timer.Time.UnixNano()
	key := ctx.Key()
	if o.a.kind == sliding {
		if err := o.fireSliding(ctx, st, t, key, out); err != nil {
			return err
		}
	} else {
		for _, p := range st.panes {
			if p.end-1 == t {
				acc := p.acc
				if o.cleanup(t) > t {
					// The window stays open for late records: what is
					// emitted must not share memory with what they change.
					acc = o.agg.clone(acc)
				}
				if err := o.emit(key, p.window(), acc, out); err != nil {
					return err
				}
			}
		}
	}
	// Drop the panes whose last window's cleanup has come.
	size := int64(0)
	if o.a.kind == sliding {
		size = o.a.sliding.Size - (o.a.sliding.Slide) // a pane's last window ends size-slide after it
	}
	st.panes = slices.DeleteFunc(st.panes, func(p pane[A]) bool { return o.cleanup(p.end+size-1) <= t })
	if len(st.panes) == 0 {
		o.state.Clear()
	}
	return nil
}

// fireSliding fires the sliding window that ends at t+1, if t is a
// window's end and the window holds records.
func (o *operator[T, K, A, O]) fireSliding(ctx *topology.Context[K], st *keyState[A], t int64, key K, out *topology.Collector[O]) error {
	s := o.a.sliding
	end := t + 1
	if s.Pane(t).End != end {
		return nil // a cleanup timer only
	}
	w := windows.Window{Start: end - s.Size, End: end}
	var acc A
	n := 0
	for _, p := range st.panes {
		if p.start >= w.Start && p.end <= w.End {
			if n == 0 {
				acc = o.agg.clone(p.acc)
			} else {
				acc = o.agg.merge(acc, p.acc)
			}
			n++
		}
	}
	if end > st.firedThrough && len(st.panes) > 0 { // on time: chain the next window
		st.firedThrough = end
		if p := st.panes[len(st.panes)-1]; p.start+s.Size > end {
			o.register(ctx, end+s.Slide-1)
		}
	}
	if n == 0 {
		return nil
	}
	return o.emit(key, w, acc, out)
}
