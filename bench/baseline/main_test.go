package baseline_test

import (
	"testing"

	"github.com/snapflow/snapflow/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// run must stop its actors, timers and actor system.
func TestMain(m *testing.M) { leaktest.Main(m) }
