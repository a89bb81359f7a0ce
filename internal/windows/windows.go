package windows

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// Window is the span [Start, End) of event or processing time.
type Window struct {
	Start, End int64
}

// MaxTimestamp is the last instant in the window: it can fire once the
// watermark reaches it.
func (w Window) MaxTimestamp() int64 { return w.End - 1 }

// Contains reports whether ts is in the window.
func (w Window) Contains(ts int64) bool { return ts >= w.Start && ts < w.End }

// Intersects reports whether the windows overlap or touch end to start;
// session windows that do are merged.
func (w Window) Intersects(o Window) bool { return w.Start <= o.End && o.Start <= w.End }

// Cover is the smallest window that holds both.
func (w Window) Cover(o Window) Window { return Window{min(w.Start, o.Start), max(w.End, o.End)} }

// String shows the window as "[start, end)".
func (w Window) String() string { return fmt.Sprintf("[%d, %d)", w.Start, w.End) }

// floorTo is the largest start ≤ ts of a window that starts at offset
// modulo size.
func floorTo(ts, offset, size int64) int64 {
	r := (ts - offset) % size
	if r < 0 {
		r += size
	}
	return ts - r
}

// Tumbling assigns each timestamp to one window of a fixed size. Windows
// start at Offset modulo Size.
type Tumbling struct {
	Size, Offset int64
}

// NewTumbling returns tumbling windows of size, or an error for a size
// that is not positive.
func NewTumbling(size, offset time.Duration) (Tumbling, error) {
	if size <= 0 {
		return Tumbling{}, fmt.Errorf("windows: a tumbling window's size %v is not positive", size)
	}
	return Tumbling{Size: int64(size), Offset: int64(offset) % int64(size)}, nil
}

// Assign returns the window of ts.
func (t Tumbling) Assign(ts int64) Window {
	s := floorTo(ts, t.Offset, t.Size)
	return Window{s, s + t.Size}
}

// Sliding assigns each timestamp to the Size/Slide windows of a fixed size
// that start every Slide and hold it. Its state is kept per pane (see
// Panes): a pane is a tumbling window of the slide, and a window is the
// panes it covers.
type Sliding struct {
	Size, Slide, Offset int64
}

// NewSliding returns sliding windows, or an error unless 0 < slide <= size
// and size is a multiple of slide (so that every window is whole panes).
func NewSliding(size, slide, offset time.Duration) (Sliding, error) {
	switch {
	case slide <= 0 || size <= 0:
		return Sliding{}, fmt.Errorf("windows: a sliding window's size %v and slide %v must be positive", size, slide)
	case slide > size:
		return Sliding{}, fmt.Errorf("windows: a sliding window's slide %v is longer than its size %v: records between windows would belong to none", slide, size)
	case size%slide != 0:
		return Sliding{}, fmt.Errorf("windows: a sliding window's size %v is not a multiple of its slide %v", size, slide)
	}
	return Sliding{Size: int64(size), Slide: int64(slide), Offset: int64(offset) % int64(slide)}, nil
}

// Assign appends to dst the windows that hold ts, latest first.
func (s Sliding) Assign(ts int64, dst []Window) []Window {
	for start := floorTo(ts, s.Offset, s.Slide); start > ts-s.Size; start -= s.Slide {
		dst = append(dst, Window{start, start + s.Size})
	}
	return dst
}

// Pane returns the pane of ts: the tumbling window of the slide that
// holds it. A record updates one pane, whatever the number of windows.
func (s Sliding) Pane(ts int64) Window {
	p := floorTo(ts, s.Offset, s.Slide)
	return Window{p, p + s.Slide}
}

// Panes appends to dst the panes that make up window w, earliest first.
func (s Sliding) Panes(w Window, dst []Window) []Window {
	for p := w.Start; p < w.End; p += s.Slide {
		dst = append(dst, Window{p, p + s.Slide})
	}
	return dst
}

// WindowEnding returns the window that ends at the end of pane p: the
// window to fire when the watermark passes p.
func (s Sliding) WindowEnding(p Window) Window { return Window{p.End - s.Size, p.End} }

// Sessions merges the session windows of one key: a record at ts opens the
// window [ts, ts+Gap), and windows that intersect merge into one. It is
// not safe for concurrent use.
type Sessions struct {
	Gap int64
	ws  []Window // disjoint, sorted by start
}

// NewSessions returns the sessions of one key with an inactivity gap, or an
// error for a gap that is not positive.
func NewSessions(gap time.Duration) (*Sessions, error) {
	if gap <= 0 {
		return nil, fmt.Errorf("windows: a session gap %v is not positive", gap)
	}
	return &Sessions{Gap: int64(gap)}, nil
}

// Add adds a record at ts. It returns the session that now holds it, and
// appends to merged the sessions it absorbed (whose state is to be merged
// into the returned one's; the returned window may equal one of them).
func (s *Sessions) Add(ts int64, merged []Window) (Window, []Window) {
	i, j, w := Overlapping(s.ws, func(w Window) Window { return w }, Window{ts, ts + s.Gap})
	merged = append(merged, s.ws[i:j]...)
	s.ws = slices.Replace(s.ws, i, j, w)
	return w, merged
}

// Overlapping finds, in es (disjoint windows sorted by start, window of
// each element given by win), the run es[i:j] that w intersects or
// touches, and returns it with the cover of w and that run: the session
// that replaces es[i:j] once w is added. With no such run, i == j is
// where w goes.
func Overlapping[E any](es []E, win func(E) Window, w Window) (i, j int, cover Window) {
	for i < len(es) && win(es[i]).End < w.Start {
		i++
	}
	j = i
	for j < len(es) && win(es[j]).Start <= w.End {
		w = w.Cover(win(es[j]))
		j++
	}
	return i, j, w
}

// Remove forgets a session (once it fired and its state was cleared).
func (s *Sessions) Remove(w Window) {
	if i, ok := slices.BinarySearchFunc(s.ws, w, func(a, b Window) int { return cmp.Compare(a.Start, b.Start) }); ok && s.ws[i] == w {
		s.ws = slices.Delete(s.ws, i, i+1)
	}
}

// Windows returns the open sessions, sorted by start.
func (s *Sessions) Windows() []Window { return slices.Clone(s.ws) }
