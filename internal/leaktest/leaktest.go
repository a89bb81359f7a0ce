// Package leaktest checks that no goroutine outlives a test, with patience
// for goroutines that are on their way out on a loaded machine.
//
// An actor's mailbox goroutine, an HTTP connection's reader or a timer's
// callback can still be returning when the code that stopped it has
// returned; goleak's own retries last about half a second, which a busy
// machine can exceed. These helpers retry for Patience. A goroutine that
// never ends is still reported.
package leaktest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Patience is how long Find waits for goroutines to end.
const Patience = 30 * time.Second

// Find is goleak.Find, retried until no goroutine is left or Patience has
// passed. goleak.Find backs off between its own attempts, so this does not
// spin.
func Find(opts ...goleak.Option) error {
	deadline := time.Now().Add(Patience)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}

// Main runs the tests and then fails the run if a goroutine is left; use it
// as TestMain's body.
func Main(m *testing.M, opts ...goleak.Option) {
	code := m.Run()
	if code == 0 {
		if err := Find(opts...); err != nil {
			fmt.Fprintln(os.Stderr, "leaktest: goroutines left after a successful run:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// Check fails t if a goroutine started since opts' snapshot (use
// goleak.IgnoreCurrent() taken at the start) is left; defer it.
func Check(t testing.TB, opts ...goleak.Option) {
	t.Helper()
	if err := Find(opts...); err != nil {
		t.Error(err)
	}
}
