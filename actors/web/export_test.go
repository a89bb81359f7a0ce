package web

import "time"

// SetTimeouts sets the read and write timeouts of the servers started
// from now on, and returns a function that restores them.
func SetTimeouts(read, write time.Duration) (restore func()) {
	old := timeouts
	timeouts.read, timeouts.write = read, write
	return func() { timeouts = old }
}
