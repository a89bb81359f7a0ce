package main

import (
	"testing"

	"github.com/snapflow/snapflow/internal/proctest"
)

// exe is the example, built once for the process tests (with the race
// detector when the tests run with it).
var exe string

func TestMain(m *testing.M) { proctest.Main(m, "rescale", &exe) }

// proc is a process of the example (see proctest.Start).
type proc = proctest.Proc

// startProc starts the example with args, and env added to the
// environment.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return proctest.Start(t, exe, name, env, args...)
}

// runProc runs the example to its exit and returns the exit code.
func runProc(t *testing.T, name string, env []string, args ...string) (*proc, int) {
	t.Helper()
	p := startProc(t, name, env, args...)
	return p, p.Exit()
}

// mustSucceed runs the example and fails the test unless it exits 0.
func mustSucceed(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p, code := runProc(t, name, env, args...)
	if code != 0 {
		t.Fatalf("%s exited %d, want 0", name, code)
	}
	return p
}
