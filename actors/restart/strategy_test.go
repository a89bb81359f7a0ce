package restart

import (
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const ms = time.Millisecond

// noJitter is the rnd that gives a jitter factor of exactly 1.
const noJitter = 0.5

func TestBackoffGrowsAndCaps(t *testing.T) {
	p := Policy{InitialBackoff: 10 * ms, MaxBackoff: time.Second, MaxFailures: 100, Window: time.Hour}
	want := []time.Duration{10 * ms, 20 * ms, 40 * ms, 80 * ms, 160 * ms, 320 * ms, 640 * ms, time.Second, time.Second, time.Second}
	s := New(p)
	for i, w := range want {
		d, ok := s.OnFailure(at(time.Duration(i)*ms), noJitter)
		if !ok || d != w {
			t.Fatalf("failure %d: OnFailure = %v, %v; want %v", i+1, d, ok, w)
		}
	}
	// With the most jitter the delay still never exceeds the cap.
	for _, rnd := range []float64{0.999999, 1, 7} {
		s := New(p)
		for i := range 60 {
			d, ok := s.OnFailure(at(time.Duration(i)*ms), rnd)
			if !ok || d <= 0 || d > time.Second {
				t.Fatalf("rnd %v, failure %d: OnFailure = %v, %v", rnd, i+1, d, ok)
			}
		}
	}
}

func TestJitterBounds(t *testing.T) {
	p := Policy{InitialBackoff: 100 * ms, MaxBackoff: time.Hour, Jitter: 0.25, MaxFailures: 1, Window: time.Second}
	tests := []struct {
		rnd  float64
		want time.Duration
	}{
		{0, 75 * ms},
		{0.5, 100 * ms},
		{0.75, 112500 * time.Microsecond},
		{-3, 75 * ms}, // out of range: clamped
		{2, 125 * ms},
	}
	for _, tt := range tests {
		if d, _ := New(p).OnFailure(t0, tt.rnd); d != tt.want {
			t.Errorf("rnd %v: delay %v, want %v", tt.rnd, d, tt.want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 1000 {
		d, _ := New(p).OnFailure(t0, r.Float64())
		if d < 75*ms || d > 125*ms {
			t.Fatalf("delay %v outside [75ms, 125ms]", d)
		}
	}
}

func TestWindowResets(t *testing.T) {
	s := New(Policy{Window: time.Minute, MaxFailures: 3})
	for i, want := range []time.Duration{10 * ms, 20 * ms, 40 * ms} {
		if d, ok := s.OnFailure(at(time.Duration(i)*10*time.Second), noJitter); !ok || d != want {
			t.Fatalf("failure %d: %v, %v; want %v", i+1, d, ok, want)
		}
	}
	if n := s.Failures(at(59 * time.Second)); n != 3 {
		t.Fatalf("Failures at 59s = %d, want 3", n)
	}
	if n := s.Failures(at(60 * time.Second)); n != 2 {
		t.Fatalf("Failures at 60s = %d, want 2 (the one at 0s left)", n)
	}
	// At 60s the failure at 0s dropped out: a fourth one is allowed.
	if d, ok := s.OnFailure(at(60*time.Second), noJitter); !ok || d != 40*ms {
		t.Fatalf("failure at 60s: %v, %v; want 40ms", d, ok)
	}
	// After a quiet window the exponent resets.
	if n := s.Failures(at(200 * time.Second)); n != 0 {
		t.Fatalf("Failures after a quiet window = %d", n)
	}
	if d, ok := s.OnFailure(at(200*time.Second), noJitter); !ok || d != 10*ms {
		t.Fatalf("failure after a quiet window: %v, %v; want 10ms", d, ok)
	}
}

func TestExhaustion(t *testing.T) {
	s := New(Policy{MaxFailures: 3, Window: time.Minute})
	for i := range 3 {
		if _, ok := s.OnFailure(at(time.Duration(i)*time.Second), noJitter); !ok {
			t.Fatalf("failure %d exhausted the strategy", i+1)
		}
	}
	if s.Exhausted() {
		t.Fatal("Exhausted after MaxFailures failures")
	}
	if d, ok := s.OnFailure(at(3*time.Second), noJitter); ok || d != 0 {
		t.Fatalf("failure 4 = %v, %v; want exhausted", d, ok)
	}
	if !s.Exhausted() {
		t.Fatal("not Exhausted")
	}
	// Exhaustion is final, even after a quiet window.
	if _, ok := s.OnFailure(at(time.Hour), noJitter); ok {
		t.Fatal("restarted after exhaustion")
	}
}

func TestSpreadFailuresNeverExhaust(t *testing.T) {
	s := New(Policy{MaxFailures: 2, Window: time.Minute})
	for i := range 100 {
		d, ok := s.OnFailure(at(time.Duration(i)*31*time.Second), noJitter)
		if !ok || d > 20*ms {
			t.Fatalf("failure %d: %v, %v", i+1, d, ok)
		}
	}
}

func TestFlappingTask(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 0))
		s := New(Policy{})
		var last time.Duration
		for i := 0; ; i++ {
			d, ok := s.OnFailure(at(time.Duration(i)*ms), r.Float64())
			if !ok {
				if i != DefaultMaxFailures {
					t.Fatalf("seed %d: exhausted at failure %d, want %d", seed, i+1, DefaultMaxFailures+1)
				}
				break
			}
			if d <= 0 || d <= last || d > DefaultMaxBackoff {
				t.Fatalf("seed %d, failure %d: delay %v after %v", seed, i+1, d, last)
			}
			last = d
		}
	}
}

func TestTinyBackoffNeverZero(t *testing.T) {
	s := New(Policy{InitialBackoff: 1, MaxBackoff: 1, Jitter: 0.9})
	if d, ok := s.OnFailure(t0, 0); !ok || d != 1 {
		t.Fatalf("OnFailure = %v, %v; want 1ns", d, ok)
	}
}

func TestHugeExponentCapped(t *testing.T) {
	s := New(Policy{Multiplier: 1e300, MaxBackoff: time.Duration(1<<63 - 1), MaxFailures: 5})
	for i := range 5 {
		if d, ok := s.OnFailure(t0, 0.99); !ok || d <= 0 {
			t.Fatalf("failure %d: %v, %v", i+1, d, ok)
		}
	}
}

// TestNoRestarts: restart.NoRestarts exhausts the strategy at the first
// failure, while a zero MaxFailures still means the default.
func TestNoRestarts(t *testing.T) {
	p := Policy{MaxFailures: NoRestarts}
	if err := p.Validate(); err != nil {
		t.Fatalf("NoRestarts is invalid: %v", err)
	}
	if got := p.WithDefaults().MaxFailures; got != NoRestarts {
		t.Fatalf("WithDefaults turned NoRestarts into %d", got)
	}
	s := New(p)
	if d, ok := s.OnFailure(at(0), noJitter); ok || d != 0 {
		t.Fatalf("first failure with NoRestarts = %v, %v; want exhausted", d, ok)
	}
	if got := (Policy{}).WithDefaults().MaxFailures; got != DefaultMaxFailures {
		t.Fatalf("zero MaxFailures became %d, want the default %d", got, DefaultMaxFailures)
	}
}
