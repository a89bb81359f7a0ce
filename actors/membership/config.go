package membership

import (
	"fmt"
	"time"
)

// Defaults of the Config fields left zero.
const (
	DefaultHeartbeatInterval = time.Second
	DefaultHeartbeatTimeout  = 5 * time.Second
)

// Config sets the failure detector of a Members table. A zero field takes its
// default.
type Config struct {
	// HeartbeatInterval is how often the coordinator pings each worker. The
	// table does not use it; it is validated here against HeartbeatTimeout
	// and read by the shell.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout is how long a worker may stay silent (no heartbeat ack
	// since its registration or its last ack) before it is declared lost.
	// It must exceed HeartbeatInterval.
	HeartbeatTimeout time.Duration
}

// WithDefaults returns c with its zero fields set to their defaults.
func (c Config) WithDefaults() Config {
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	return c
}

// Validate reports the first invalid field of c with its defaults applied.
// The errors wrap ErrInvalid and name the field.
func (c Config) Validate() error {
	c = c.WithDefaults()
	switch {
	case c.HeartbeatInterval < 0:
		return fmt.Errorf("%w config: HeartbeatInterval %v, want > 0", ErrInvalid, c.HeartbeatInterval)
	case c.HeartbeatTimeout < 0:
		return fmt.Errorf("%w config: HeartbeatTimeout %v, want > 0", ErrInvalid, c.HeartbeatTimeout)
	case c.HeartbeatTimeout <= c.HeartbeatInterval:
		return fmt.Errorf("%w config: HeartbeatTimeout %v must exceed HeartbeatInterval %v",
			ErrInvalid, c.HeartbeatTimeout, c.HeartbeatInterval)
	}
	return nil
}
