package main

import (
	"regexp"
	"strings"
	"testing"
)

// raceOptions is the race detector's setting for the processes the tests
// start: a race does not change the exit code, so that the races inside
// protoactor-go's remote package at Remote.Shutdown do not fail every
// process. Seen here: its endpoint reader's suspended flag and its endpoint
// manager's stopped flag, written without synchronisation while gRPC
// goroutines read them, and an endpoint reader's channel closed by its
// stream handler while Shutdown sends on it. checkRaces fails the test on
// any other race.
const raceOptions = "GORACE=exitcode=0"

// raceAccess is the line of a race report that names one of the two
// accesses; the next line is the function that made it.
var raceAccess = regexp.MustCompile(`(?i)^(previous )?(atomic )?(read|write) at 0x[0-9a-f]+`)

// upstreamRacePkg is the package whose own races are tolerated.
const upstreamRacePkg = "github.com/asynkron/protoactor-go/remote."

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
		if report := lines[i:end]; !upstreamRace(report) {
			t.Errorf("%s: a data race:\n%s", p.name, strings.Join(report, "\n"))
		}
		i = end
	}
}

// upstreamRace says whether both accesses of a race report are made by
// protoactor-go's remote package: the first function of each access's
// stack, past the runtime's (closechan, chansend, ...), is one of its.
func upstreamRace(report []string) bool {
	accesses := 0
	for i, l := range report {
		if !raceAccess.MatchString(strings.TrimSpace(l)) {
			continue
		}
		accesses++
		if !strings.HasPrefix(firstFrame(report[i+1:]), upstreamRacePkg) {
			return false
		}
	}
	return accesses == 2
}

// stackFunc is a function line of a stack: "pkg/path.(*T).Method(...)",
// with no space before the parenthesis of its arguments. The log lines the
// process writes to stderr meanwhile ("time=... level=ERROR msg=...") can
// land among a report's lines, and are not.
var stackFunc = regexp.MustCompile(`^[^\s(]+\(.*\)$`)

// firstFrame returns the first function in stack lines (functions and
// their files alternate; a blank line ends the stack) that is not the
// runtime's.
func firstFrame(stack []string) string {
	for _, l := range stack {
		f := strings.TrimSpace(l)
		switch {
		case f == "":
			return ""
		case strings.HasPrefix(f, "/"), strings.Contains(f, ".go:"), !stackFunc.MatchString(f): // a file, or a log line
		case strings.HasPrefix(f, "runtime."), strings.HasPrefix(f, "internal/"), strings.HasPrefix(f, "sync/atomic."):
		default:
			return f
		}
	}
	return ""
}
