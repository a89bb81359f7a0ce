package baseline_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// run must stop its actors, timers and actor system.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
