package monitor_test

import (
	"testing"

	"github.com/snapflow/snapflow/internal/leaktest"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) { leaktest.Main(m) }
