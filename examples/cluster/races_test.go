package main

import (
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/racedetect"
)

// raceOptions is the race detector's setting for the processes the tests
// start: a race does not change the exit code, so that the races inside
// protoactor-go's remote package at Remote.Shutdown do not fail every
// process. Seen here: its endpoint reader's suspended flag and its endpoint
// manager's stopped flag, written without synchronisation while gRPC
// goroutines read them, and an endpoint reader's channel closed by its
// stream handler while Shutdown sends on it. checkRaces fails the test on
// any other race.
const raceOptions = racedetect.TolerantEnv

// checkRaces fails t for every race report in p's output unless both of
// its accesses are made by functions of protoactor-go's remote package.
func checkRaces(t *testing.T, p *child) {
	t.Helper()
	lines := p.linesFrom(0)
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "WARNING: DATA RACE" {
			continue
		}
		end := i + 1
		for end < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[end]), "==================") {
			end++
		}
		if report := lines[i:end]; !racedetect.Upstream(report) {
			t.Errorf("%s: a data race:\n%s", p.name, strings.Join(report, "\n"))
		}
		i = end
	}
}
