package coordinator

import (
	"fmt"
	"time"
)

// DefaultTimeout is the checkpoint timeout used when Config.Timeout is 0.
const DefaultTimeout = 10 * time.Minute

// Config says when checkpoints are triggered and when they fail.
type Config struct {
	// Interval between periodic checkpoints; 0 disables periodic checkpoints
	// (manual and final ones still work).
	Interval time.Duration
	// Timeout aborts a pending checkpoint older than this (0 means
	// DefaultTimeout). It does not apply once the manifest is being written.
	Timeout time.Duration
	// MinPause is the least time between the end of one checkpoint (complete
	// or abort) and the next periodic trigger.
	MinPause time.Duration
	// TolerableFailures is how many consecutive failed checkpoints (aborted by
	// timeout, decline or store error) are tolerated; one more fails the job.
	// -1 means unlimited.
	TolerableFailures int
}

// Validate reports the first invalid field of c.
func (c Config) Validate() error {
	switch {
	case c.Interval < 0:
		return fmt.Errorf("coordinator: negative interval %v", c.Interval)
	case c.Timeout < 0:
		return fmt.Errorf("coordinator: negative timeout %v", c.Timeout)
	case c.MinPause < 0:
		return fmt.Errorf("coordinator: negative min pause %v", c.MinPause)
	case c.TolerableFailures < -1:
		return fmt.Errorf("coordinator: tolerable failures %d, want >= -1 (-1 is unlimited)", c.TolerableFailures)
	}
	return nil
}

// withDefaults fills the zero fields that have a default.
func (c Config) withDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	return c
}
