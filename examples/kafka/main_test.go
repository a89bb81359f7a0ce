package main

import (
	"testing"

	"github.com/snapflow/snapflow/internal/proctest"
)

// exe is the example, built once for the process tests (with the race
// detector when the tests run with it).
var exe string

func TestMain(m *testing.M) { proctest.Main(m, "kafka", &exe) }

// waitFor bounds every wait on a process or on Kafka (see proctest).
const waitFor = proctest.WaitFor

// proc is a process of the example (see proctest.Start).
type proc = proctest.Proc

// startProc starts the example with args.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	return proctest.Start(t, exe, name, nil, args...)
}
