package watermark

import (
	"math/rand/v2"
	"testing"
	"time"
)

func want(t *testing.T, step string, got Status, changed bool, wm int64, idle, wantChanged bool) {
	t.Helper()
	if got != (Status{wm, idle}) || changed != wantChanged {
		t.Fatalf("%s: got %v changed=%v, want %v changed=%v", step, got, changed, Status{wm, idle}, wantChanged)
	}
}

func TestCombinerMinimumOfActiveInputs(t *testing.T) {
	c := NewCombiner(3)
	if c.Status() != (Status{Min, false}) {
		t.Fatalf("a new combiner is %v", c.Status())
	}
	s, ch := c.Advance(0, 10)
	want(t, "input 0 at 10", s, ch, Min, false, false)
	c.Advance(1, 20)
	s, ch = c.Advance(2, 5)
	want(t, "inputs at 10, 20, 5", s, ch, 5, false, true)
	s, ch = c.Advance(2, 30)
	want(t, "input 2 to 30", s, ch, 10, false, true)
	s, ch = c.Advance(0, 7) // an input never goes back
	want(t, "input 0 back to 7", s, ch, 10, false, false)
	if c.Input(0).Watermark != 10 {
		t.Fatalf("input 0 went back to %v", c.Input(0))
	}
	s, ch = c.Advance(0, 25)
	want(t, "input 0 to 25", s, ch, 20, false, true)
}

// A grown combiner's new inputs hold the combined watermark where it is
// until they advance; it never goes back.
func TestCombinerGrow(t *testing.T) {
	c := NewCombiner(1)
	c.Advance(0, 50)
	c.Grow(3)
	if c.Len() != 3 {
		t.Fatalf("Len = %d, want 3", c.Len())
	}
	s, ch := c.Advance(1, 40)
	want(t, "new inputs behind", s, ch, 50, false, false)
	c.Advance(2, 60)
	c.Advance(0, 70)
	s, ch = c.Advance(1, 65)
	want(t, "every input ahead", s, ch, 60, false, true)
	c.Grow(2) // never shrinks
	if c.Len() != 3 {
		t.Fatalf("Len after Grow(2) = %d", c.Len())
	}
}

func TestCombinerIdleInputsHoldNothingBack(t *testing.T) {
	c := NewCombiner(2)
	c.Advance(0, 100)
	c.Advance(1, 40)
	s, ch := c.SetIdle(1, true)
	want(t, "slow input idle", s, ch, 100, false, true)
	// Back with a watermark behind the output: the output does not regress.
	s, ch = c.Advance(1, 60)
	want(t, "idle input back at 60", s, ch, 100, false, false)
	s, ch = c.Advance(0, 200)
	want(t, "input 0 to 200", s, ch, 100, false, false)
	s, ch = c.Advance(1, 150)
	want(t, "input 1 to 150", s, ch, 150, false, true)
}

func TestCombinerAllIdleIsIdleAtTheHighest(t *testing.T) {
	c := NewCombiner(3)
	c.Advance(0, 10)
	c.Advance(1, 30)
	c.Advance(2, 20)
	c.SetIdle(0, true)
	s, ch := c.SetIdle(2, true)
	want(t, "two of three idle", s, ch, 30, false, true)
	s, ch = c.SetIdle(1, true)
	want(t, "all idle", s, ch, 30, true, true)
	s, ch = c.SetIdle(1, true)
	want(t, "idle again", s, ch, 30, true, false)
	s, ch = c.Advance(0, 12) // active again, behind: idle ends, no regression
	want(t, "input 0 active at 12", s, ch, 30, false, true)
	c2 := NewCombiner(2)
	c2.Advance(0, 50)
	c2.Advance(1, 5)
	c2.SetIdle(0, true)
	s, ch = c2.SetIdle(1, true)
	want(t, "all idle moves up to the highest idle input", s, ch, 50, true, true)
}

func TestCombinerEndedInputs(t *testing.T) {
	c := NewCombiner(3)
	c.Advance(0, 10)
	c.Advance(1, 20)
	c.Advance(2, 30)
	s, ch := c.End(0)
	want(t, "input 0 ended", s, ch, 20, false, true)
	s, ch = c.Advance(0, 5) // nothing comes after an end
	want(t, "advance of an ended input", s, ch, 20, false, false)
	if c.Input(0) != (Status{Max, false}) {
		t.Fatalf("ended input is %v", c.Input(0))
	}
	s, ch = c.SetIdle(1, true)
	want(t, "input 1 idle", s, ch, 30, false, true)
	// An ended input is not active: with the others idle the task is idle,
	// and the end is not the highest watermark it moves up to.
	s, ch = c.SetIdle(2, true)
	want(t, "the rest idle", s, ch, 30, true, true)
	s, ch = c.End(1)
	want(t, "input 1 ended", s, ch, 30, true, false)
	s, ch = c.End(2)
	want(t, "all ended", s, ch, Max, false, true)
	s, ch = c.SetIdle(2, false)
	want(t, "an ended input made active", s, ch, Max, false, false)
}

// Over random steps: the output never goes back; with every input ended it
// is Max; while some input is active it is not idle and at least the
// minimum over the active inputs (more when an earlier output was higher);
// with none active it is idle.
func TestCombinerNeverRegresses(t *testing.T) {
	for seed := range uint64(50) {
		rng := rand.New(rand.NewPCG(seed, 1))
		n := 1 + rng.IntN(4)
		c := NewCombiner(n)
		wms := make([]int64, n)
		for i := range wms {
			wms[i] = Min
		}
		idle := make([]bool, n)
		ended := make([]bool, n)
		prev := c.Status().Watermark
		for step := range 300 {
			i := rng.IntN(n)
			switch r := rng.IntN(20); {
			case r < 14:
				wm := int64(rng.IntN(1000))
				c.Advance(i, wm)
				if !ended[i] {
					wms[i], idle[i] = max(wms[i], wm), false
				}
			case r < 19:
				b := rng.IntN(2) == 0
				c.SetIdle(i, b)
				if !ended[i] {
					idle[i] = b
				}
			default:
				c.End(i)
				ended[i], wms[i], idle[i] = true, Max, false
			}
			got := c.Status()
			if got.Watermark < prev {
				t.Fatalf("seed %d step %d: watermark went back from %d to %d", seed, step, prev, got.Watermark)
			}
			prev = got.Watermark
			lowest, active, allEnded := Max, false, true
			for j := range n {
				if !ended[j] {
					allEnded = false
				}
				if !idle[j] {
					lowest = min(lowest, wms[j])
					if !ended[j] {
						active = true
					}
				}
			}
			switch {
			case allEnded:
				if got != (Status{Max, false}) {
					t.Fatalf("seed %d step %d: all ended, got %v", seed, step, got)
				}
			case active:
				if got.Idle || got.Watermark < lowest {
					t.Fatalf("seed %d step %d: active inputs at minimum %d, got %v", seed, step, lowest, got)
				}
			default:
				if !got.Idle {
					t.Fatalf("seed %d step %d: no input active, got %v", seed, step, got)
				}
			}
		}
	}
}

func TestGeneratorBoundedOutOfOrder(t *testing.T) {
	g, err := NewGenerator(5*time.Nanosecond, 0)
	if err != nil {
		t.Fatal(err)
	}
	if g.Watermark() != Min {
		t.Fatalf("watermark before any record: %d", g.Watermark())
	}
	for _, ts := range []int64{100, 103, 98, 101} {
		g.Observe(ts)
	}
	if g.Watermark() != 97 { // 103 - 5 - 1: a record at 98 is on time
		t.Fatalf("watermark %d after a highest timestamp of 103 and a bound of 5, want 97", g.Watermark())
	}
	g.Observe(Min + 2)
	g2, _ := NewGenerator(10*time.Nanosecond, 0)
	g2.Observe(Min + 3)
	if g2.Watermark() != Min {
		t.Fatalf("watermark underflowed: %d", g2.Watermark())
	}
	g3, _ := NewGenerator(0, 0)
	g3.Restore(g.MaxTimestamp())
	if g3.Watermark() != 102 {
		t.Fatalf("restored generator's watermark %d, want 102", g3.Watermark())
	}
	if _, err := NewGenerator(-1, 0); err == nil {
		t.Fatal("a negative bound was accepted")
	}
	if _, err := NewGenerator(0, -1); err == nil {
		t.Fatal("a negative idleness timeout was accepted")
	}
}

func TestGeneratorIdleness(t *testing.T) {
	g, _ := NewGenerator(0, 8)
	for now := int64(1000); now <= 1008; now += 2 {
		if g.Idle() {
			t.Fatalf("idle at %d, before 8 ns of read attempts", now)
		}
		g.Read(0, now)
	}
	if !g.Idle() {
		t.Fatal("not idle after 8 ns of empty read attempts")
	}
	g.Read(3, 1010)
	if g.Idle() {
		t.Fatal("idle after a read with records")
	}
	never, _ := NewGenerator(0, 0)
	never.Read(0, 1)
	never.Read(0, 1<<60)
	if never.Idle() {
		t.Fatal("a generator without an idleness timeout became idle")
	}
	if _, ok := never.Idleness().Period(); ok {
		t.Fatal("a period for a generator that is never idle")
	}
}

// An idle status carries the input's watermark: it counts as the input's
// even when no watermark came before it, and never takes the input back.
func TestCombinerIdleAt(t *testing.T) {
	c := NewCombiner(2)
	c.Advance(0, 10)
	c.Advance(1, 40)
	s, ch := c.IdleAt(0, 30)
	want(t, "input 0 idle at 30", s, ch, 40, false, true)
	s, ch = c.IdleAt(1, 90)
	want(t, "all idle, the highest at 90", s, ch, 90, true, true)
	s, ch = c.IdleAt(1, 50)
	want(t, "idle again, behind", s, ch, 90, true, false)
	if c.Input(1).Watermark != 90 {
		t.Fatalf("input 1 went back to %v", c.Input(1))
	}
	c.End(0)
	s, ch = c.IdleAt(0, 200)
	want(t, "an ended input", s, ch, 90, true, false)
}
