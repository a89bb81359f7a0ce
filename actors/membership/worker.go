package membership

import (
	"fmt"
	"time"
)

// Worker is one registered worker process, as the coordinator sees it.
// Workers are values: the table hands out copies.
type Worker struct {
	// ID names one incarnation of a worker process; a restarted process
	// registers under a new id.
	ID string
	// Addr is the host:port the worker's actor system listens on.
	Addr string
	// Slots is how many tasks the worker offers to host; at least 1.
	Slots int
	// Registered is when the worker registered.
	Registered time.Time
	// LastSeen is the later of Registered and the worker's last heartbeat
	// ack.
	LastSeen time.Time
	// Lost is true once the worker was declared lost; it never turns false.
	Lost bool
	// Reason says why the worker was lost; empty while it is live.
	Reason string
}

// String returns "id@addr", the worker's name in logs and placements.
func (w Worker) String() string { return w.ID + "@" + w.Addr }

// Err returns nil for a live worker, and for a lost one an error that names
// it and the reason and wraps ErrLost, for the failure of its tasks.
func (w Worker) Err() error {
	if !w.Lost {
		return nil
	}
	return fmt.Errorf("%w: %s: %s", ErrLost, w, w.Reason)
}
