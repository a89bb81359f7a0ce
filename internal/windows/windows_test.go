package windows

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTumbling(t *testing.T) {
	tw, err := NewTumbling(10, 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		ts   int64
		want Window
	}{{0, Window{-7, 3}}, {3, Window{3, 13}}, {12, Window{3, 13}}, {13, Window{13, 23}}, {-8, Window{-17, -7}}} {
		if got := tw.Assign(c.ts); got != c.want {
			t.Errorf("Assign(%d) = %v, want %v", c.ts, got, c.want)
		}
	}
	if _, err := NewTumbling(0, 0); err == nil || !strings.Contains(err.Error(), "not positive") {
		t.Errorf("size 0: %v", err)
	}
}

// Sliding windows: the windows assigned are exactly those of the
// definition that hold the timestamp, size/slide of them; the pane of a
// timestamp is in each, and each is made of its panes.
func TestSlidingAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		slide := 1 + rng.Int64N(20)
		size := slide * (1 + rng.Int64N(6))
		offset := rng.Int64N(3 * slide)
		sw, err := NewSliding(time.Duration(size), time.Duration(slide), time.Duration(offset))
		if err != nil {
			t.Fatal(err)
		}
		ts := rng.Int64N(1000) - 500
		var want []Window
		for k := (ts-size)/slide - 2; k <= ts/slide+2; k++ {
			w := Window{k*slide + offset%slide, k*slide + offset%slide + size}
			if w.Contains(ts) {
				want = append(want, w)
			}
		}
		slices.Reverse(want) // latest first
		got := sw.Assign(ts, nil)
		if !slices.Equal(got, want) || int64(len(got)) != size/slide {
			t.Fatalf("size %d slide %d offset %d: Assign(%d) = %v, want %v", size, slide, offset, ts, got, want)
		}
		pane := sw.Pane(ts)
		for _, w := range got {
			panes := sw.Panes(w, nil)
			if int64(len(panes)) != size/slide || panes[0].Start != w.Start || panes[len(panes)-1].End != w.End {
				t.Fatalf("panes of %v: %v", w, panes)
			}
			if !slices.Contains(panes, pane) {
				t.Fatalf("pane %v of %d is not among the panes of %v", pane, ts, w)
			}
		}
		if w := sw.WindowEnding(pane); w.End != pane.End || w.End-w.Start != size {
			t.Fatalf("WindowEnding(%v) = %v", pane, w)
		}
	}
	for _, c := range [][2]time.Duration{{10, 0}, {10, 20}, {10, 3}, {0, 1}} {
		if _, err := NewSliding(c[0], c[1], 0); err == nil {
			t.Errorf("size %v slide %v accepted", c[0], c[1])
		}
	}
}

// Sessions merge whatever the order of the records: the sessions after
// adding timestamps in a random order are those of the sorted timestamps,
// and each Add reports as merged exactly the sessions that disappeared.
func TestSessionsMergeOutOfOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for range 500 {
		gap := 1 + rng.Int64N(10)
		ts := make([]int64, 1+rng.IntN(40))
		for i := range ts {
			ts[i] = rng.Int64N(300)
		}
		s, err := NewSessions(time.Duration(gap))
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ts {
			before := s.Windows()
			w, merged := s.Add(x, nil)
			after := s.Windows()
			if !w.Contains(x) || !slices.Contains(after, w) {
				t.Fatalf("Add(%d) = %v, not open or not holding it: %v", x, w, after)
			}
			for _, m := range merged {
				if !slices.Contains(before, m) || (m != w && slices.Contains(after, m)) || w.Cover(m) != w {
					t.Fatalf("Add(%d) merged %v: before %v, after %v", x, m, before, after)
				}
			}
			if len(after) != len(before)+1-len(merged) {
				t.Fatalf("Add(%d): %d sessions, then %d, merging %d", x, len(before), len(after), len(merged))
			}
		}
		sorted := slices.Sorted(slices.Values(ts))
		var want []Window
		for _, x := range sorted {
			if n := len(want); n > 0 && x <= want[n-1].End {
				want[n-1].End = max(want[n-1].End, x+gap)
				continue
			}
			want = append(want, Window{x, x + gap})
		}
		if got := s.Windows(); !slices.Equal(got, want) {
			t.Fatalf("gap %d, timestamps %v: sessions %v, want %v", gap, ts, got, want)
		}
		s.Remove(want[0])
		if got := s.Windows(); len(got) != len(want)-1 || slices.Contains(got, want[0]) {
			t.Fatalf("after Remove(%v): %v", want[0], got)
		}
	}
	if _, err := NewSessions(0); err == nil {
		t.Error("gap 0 accepted")
	}
}
