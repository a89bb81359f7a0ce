package window

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/internal/windows"
	"github.com/snapflow/snapflow/topology"
)

type kind uint8

const (
	tumbling kind = iota + 1
	sliding
	sessions
)

// Spec is a window assigner: which windows a record belongs to. Make one
// with Tumbling, Sliding or Sessions; the zero Spec is refused.
type Spec struct {
	kind       kind
	size       time.Duration // tumbling, sliding
	slide      time.Duration // sliding
	gap        time.Duration // sessions
	offset     time.Duration
	processing bool
}

// Tumbling is windows of a fixed size that do not overlap: each record
// belongs to one.
func Tumbling(size time.Duration) Spec { return Spec{kind: tumbling, size: size} }

// Sliding is windows of a fixed size that start every slide: each record
// belongs to size/slide of them. size must be a multiple of slide.
func Sliding(size, slide time.Duration) Spec { return Spec{kind: sliding, size: size, slide: slide} }

// Sessions is a window per burst of activity of a key: a record opens
// [t, t+gap), and windows that overlap or touch merge, out of order too.
func Sessions(gap time.Duration) Spec { return Spec{kind: sessions, gap: gap} }

// WithOffset shifts tumbling and sliding windows' starts by d (windows
// start at offset modulo their size, or slide): Tumbling(24*time.Hour)
// with an offset of -8h gives days in UTC+8.
func (s Spec) WithOffset(d time.Duration) Spec { s.offset = d; return s }

// OnProcessingTime assigns records by the time the operator sees them,
// and fires windows by the clock, instead of by event time.
func (s Spec) OnProcessingTime() Spec { s.processing = true; return s }

// String describes the spec, e.g. "sliding 10s every 2s (event time)".
func (s Spec) String() string {
	var w string
	switch s.kind {
	case tumbling:
		w = fmt.Sprintf("tumbling %v", s.size)
	case sliding:
		w = fmt.Sprintf("sliding %v every %v", s.size, s.slide)
	case sessions:
		w = fmt.Sprintf("sessions with gap %v", s.gap)
	default:
		return "no window"
	}
	if s.offset != 0 {
		w += fmt.Sprintf(" offset %v", s.offset)
	}
	if s.processing {
		return w + " (processing time)"
	}
	return w + " (event time)"
}

// assigner is the spec resolved into the pure assigners of
// internal/windows.
type assigner struct {
	kind       kind
	tumbling   windows.Tumbling
	sliding    windows.Sliding
	gap        int64
	processing bool
}

func (s Spec) resolve() (a assigner, err error) {
	a.kind, a.processing = s.kind, s.processing
	switch s.kind {
	case tumbling:
		a.tumbling, err = windows.NewTumbling(s.size, s.offset)
	case sliding:
		a.sliding, err = windows.NewSliding(s.size, s.slide, s.offset)
	case sessions:
		if s.gap <= 0 {
			err = fmt.Errorf("a session gap %v is not positive", s.gap)
		}
		if s.offset != 0 {
			err = fmt.Errorf("session windows have no offset (%v given)", s.offset)
		}
		a.gap = int64(s.gap)
	default:
		err = fmt.Errorf("the window spec is empty: make it with window.Tumbling, Sliding or Sessions")
	}
	return a, err
}

// Windowed is a keyed stream with its windows: the input of Aggregate,
// Reduce, Count and Process.
type Windowed[T any, K topology.Key] struct {
	in       topology.KeyedStream[T, K]
	spec     Spec
	lateness time.Duration
	late     *topology.SideOutput[T]
}

// Of windows a keyed stream by spec.
func Of[T any, K topology.Key](s topology.KeyedStream[T, K], spec Spec) Windowed[T, K] {
	return Windowed[T, K]{in: s, spec: spec}
}

// AllowedLateness keeps an event-time window's state for d after its end:
// a record that arrives after the window fired but within d updates it,
// and the window fires again with the record. Default 0.
func (w Windowed[T, K]) AllowedLateness(d time.Duration) Windowed[T, K] { w.lateness = d; return w }

// LateTo sends records that arrive after all their windows' end plus the
// allowed lateness to side output o, read with topology.SideOutputOf on
// the operator's output stream. Without it they are dropped.
func (w Windowed[T, K]) LateTo(o topology.SideOutput[T]) Windowed[T, K] { w.late = &o; return w }

func (w Windowed[T, K]) check() (assigner, error) {
	a, err := w.spec.resolve()
	switch {
	case err != nil:
	case w.lateness < 0:
		err = fmt.Errorf("the allowed lateness %v is negative", w.lateness)
	case w.spec.processing && w.lateness != 0:
		err = fmt.Errorf("allowed lateness (%v) applies to event-time windows, and these are on processing time", w.lateness)
	case w.spec.processing && w.late != nil:
		err = fmt.Errorf("a late side output applies to event-time windows, and these are on processing time: no record is late")
	}
	if err != nil {
		return a, fmt.Errorf("window %v: %w", w.spec, err)
	}
	return a, nil
}
