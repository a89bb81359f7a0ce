package restart

import (
	"fmt"
	"math"
	"time"
)

// Defaults of the Policy fields left zero.
const (
	DefaultInitialBackoff = 10 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultMultiplier     = 2
	DefaultJitter         = 0.2
	DefaultMaxFailures    = 10
	DefaultWindow         = time.Minute
)

// NoRestarts, as Policy.MaxFailures, restarts nothing: the first failure
// fails the job. (A zero MaxFailures means DefaultMaxFailures.)
const NoRestarts = -1

// Policy configures a Strategy. A zero field takes its default.
type Policy struct {
	// InitialBackoff is the delay after the first failure in a quiet window.
	InitialBackoff time.Duration
	// MaxBackoff caps every delay, jitter included.
	MaxBackoff time.Duration
	// Multiplier grows the delay with each failure inside the window; >= 1.
	Multiplier float64
	// Jitter, in [0, 1), scales the delay by a factor in
	// [1-Jitter, 1+Jitter] before the cap. Zero means the default; a caller
	// that wants none passes rnd = 0.5 to OnFailure.
	Jitter float64
	// MaxFailures is how many failures within Window are restarted; one more
	// exhausts the strategy. Zero means DefaultMaxFailures; NoRestarts means
	// none: the first failure exhausts the strategy.
	MaxFailures int
	// Window is how long a failure counts.
	Window time.Duration
}

// WithDefaults returns p with its zero fields set to their defaults.
func (p Policy) WithDefaults() Policy {
	if p.InitialBackoff == 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.MaxBackoff == 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.Multiplier == 0 {
		p.Multiplier = DefaultMultiplier
	}
	if p.Jitter == 0 {
		p.Jitter = DefaultJitter
	}
	if p.MaxFailures == 0 {
		p.MaxFailures = DefaultMaxFailures
	}
	if p.Window == 0 {
		p.Window = DefaultWindow
	}
	return p
}

// Validate reports the first invalid field of p with its defaults applied.
func (p Policy) Validate() error {
	p = p.WithDefaults()
	switch {
	case p.InitialBackoff < 0:
		return fmt.Errorf("restart: negative initial backoff %v", p.InitialBackoff)
	case p.MaxBackoff < 0:
		return fmt.Errorf("restart: negative max backoff %v", p.MaxBackoff)
	case p.MaxBackoff < p.InitialBackoff:
		return fmt.Errorf("restart: max backoff %v below initial backoff %v", p.MaxBackoff, p.InitialBackoff)
	case !(p.Multiplier >= 1) || math.IsInf(p.Multiplier, 1):
		return fmt.Errorf("restart: multiplier %v, want a finite number >= 1", p.Multiplier)
	case !(p.Jitter >= 0 && p.Jitter < 1):
		return fmt.Errorf("restart: jitter %v, want a fraction in [0, 1)", p.Jitter)
	case p.MaxFailures < NoRestarts:
		return fmt.Errorf("restart: max failures %d: want a count >= 0, or restart.NoRestarts (-1) for none", p.MaxFailures)
	case p.Window < 0:
		return fmt.Errorf("restart: negative window %v", p.Window)
	}
	return nil
}
