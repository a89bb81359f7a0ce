package actors_test

import (
	"testing"

	"github.com/snapflow/snapflow/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// job must release its actors, timers and upload goroutines when it ends.
func TestMain(m *testing.M) { leaktest.Main(m) }
