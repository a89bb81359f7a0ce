package main

import (
	"os"
	"regexp"
	"strings"

	"github.com/snapflow/snapflow/internal/racedetect"
)

// Under the race detector (go test -race), protoactor-go's remote package
// races with itself when a node shuts down: its endpoint reader's suspended
// flag and its endpoint manager's stopped flag are written by
// Remote.Shutdown while gRPC goroutines read them. Every cluster process
// would then exit 66. So a cluster row's processes run with
// GORACE=exitcode=0, and their output is checked instead: a race report
// both of whose accesses are made by that package is tolerated, any other
// fails the row.

// clusterEnv is the environment of a cluster row's coordinator child (its
// workers inherit it), or nil to inherit this process's.
func clusterEnv(rc rowConfig) []string {
	if !racedetect.Enabled || rc.Mode != "cluster" {
		return nil
	}
	return append(os.Environ(), "GORACE=exitcode=0")
}

// upstreamRacePkg is the package whose races with itself are tolerated.
const upstreamRacePkg = "github.com/asynkron/protoactor-go/remote."

// raceAccess is the line of a race report that names one of its two
// accesses; the next line names the function that made it.
var raceAccess = regexp.MustCompile(`(?i)^(previous )?(atomic )?(read|write) at 0x[0-9a-f]+`)

// foreignRaces returns the race reports in out that are not upstream
// races: reports with an access made outside upstreamRacePkg. Lines may
// carry a prefix (a worker's "worker 0: "): it is ignored.
func foreignRaces(out string) []string {
	const start, end = "WARNING: DATA RACE", "=================="
	var reports []string
	var report []string
	in := false
	for l := range strings.Lines(out) {
		switch {
		case strings.HasSuffix(strings.TrimSpace(l), start):
			in, report = true, []string{l}
		case in && strings.HasSuffix(strings.TrimSpace(l), end):
			in = false
			if !upstreamRace(report) {
				reports = append(reports, strings.Join(report, ""))
			}
		case in:
			report = append(report, l)
		}
	}
	if in && !upstreamRace(report) { // cut short
		reports = append(reports, strings.Join(report, ""))
	}
	return reports
}

// upstreamRace says whether both accesses of a race report are made by
// functions of upstreamRacePkg.
func upstreamRace(report []string) bool {
	strip := func(l string) string {
		l = strings.TrimSpace(l)
		if _, rest, ok := strings.Cut(l, ": "); ok && strings.HasPrefix(l, "worker ") {
			l = strings.TrimSpace(rest)
		}
		return l
	}
	accesses := 0
	for i, l := range report {
		if !raceAccess.MatchString(strip(l)) {
			continue
		}
		if i+1 >= len(report) || !strings.HasPrefix(strip(report[i+1]), upstreamRacePkg) {
			return false
		}
		accesses++
	}
	return accesses == 2
}
