package baseline_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// run must stop its actors, timers and actor system.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := findLeaks(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak: errors on successful test run:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// leakPatience is how long findLeaks lets goroutines that are on their way
// out finish. An actor's mailbox goroutine returns just after its last
// message, which may be after the run that stopped it has returned; on a
// loaded machine that can take longer than goleak's own retries (about half
// a second). A goroutine that never ends is still reported.
const leakPatience = 30 * time.Second

// findLeaks is goleak.Find, retried until no goroutine is left or
// leakPatience has passed.
func findLeaks(opts ...goleak.Option) error {
	deadline := time.Now().Add(leakPatience)
	for {
		err := goleak.Find(opts...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
	}
}
