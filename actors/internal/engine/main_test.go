package engine

import (
	"testing"

	"github.com/snapflow/snapflow/internal/leaktest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }
