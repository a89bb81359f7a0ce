package restart

import (
	"math"
	"time"
)

// Strategy tracks a job's recent failures and decides how long to wait
// before each restart. It is not safe for concurrent use.
type Strategy struct {
	p Policy
	// failures are the times of the failures that may still be inside the
	// window, oldest first.
	failures  []time.Time
	exhausted bool
}

// New returns a Strategy for p with its defaults applied. New panics if p is
// invalid: call p.Validate first.
func New(p Policy) *Strategy {
	if err := p.Validate(); err != nil {
		panic(err)
	}
	return &Strategy{p: p.WithDefaults()}
}

// Policy returns the strategy's policy, defaults applied.
func (s *Strategy) Policy() Policy { return s.p }

// OnFailure records a failure at now; rnd in [0,1) is the jitter source (the
// shell passes rand.Float64()). It returns the delay before restarting, or
// ok=false when the strategy is exhausted: more than MaxFailures failures
// within Window. Exhaustion is final; every later call returns ok=false.
func (s *Strategy) OnFailure(now time.Time, rnd float64) (delay time.Duration, ok bool) {
	if s.exhausted {
		return 0, false
	}
	s.prune(now)
	earlier := len(s.failures)
	s.failures = append(s.failures, now)
	if len(s.failures) > max(s.p.MaxFailures, 0) {
		s.exhausted = true
		return 0, false
	}
	return s.backoff(earlier, rnd), true
}

// Exhausted reports whether OnFailure has returned ok=false.
func (s *Strategy) Exhausted() bool { return s.exhausted }

// Failures returns how many recorded failures are inside the window at now.
func (s *Strategy) Failures(now time.Time) int {
	n := 0
	for _, t := range s.failures {
		if s.inside(t, now) {
			n++
		}
	}
	return n
}

// inside reports whether a failure at t still counts at now.
func (s *Strategy) inside(t, now time.Time) bool { return now.Sub(t) < s.p.Window }

// prune drops the failures that left the window.
func (s *Strategy) prune(now time.Time) {
	kept := s.failures[:0]
	for _, t := range s.failures {
		if s.inside(t, now) {
			kept = append(kept, t)
		}
	}
	s.failures = kept
}

// backoff is the delay after a failure with n earlier ones in the window.
func (s *Strategy) backoff(n int, rnd float64) time.Duration {
	limit := float64(s.p.MaxBackoff)
	d := float64(s.p.InitialBackoff) * math.Pow(s.p.Multiplier, float64(n))
	d = math.Min(d, limit) // also tames +Inf
	switch {
	case rnd < 0 || math.IsNaN(rnd):
		rnd = 0
	case rnd > 1:
		rnd = 1
	}
	d *= 1 + s.p.Jitter*(2*rnd-1)
	if d >= limit {
		return s.p.MaxBackoff
	}
	return max(time.Duration(d), 1)
}
