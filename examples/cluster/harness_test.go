//go:build unix

package main

import (
	"cmp"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/netns"
)

// awaitDeadline bounds every wait for a line or an exit: generous, since the
// tests must pass on a loaded machine; a wait that times out fails the test
// with every process's output.
const awaitDeadline = 2 * time.Minute

// testCluster runs the processes of one test: a coordinator, workers,
// sharing a store in a temporary directory. Every process is killed (with
// its process group) and reaped when the test ends, and a failing test logs
// everything each one printed.
type testCluster struct {
	t     *testing.T
	dir   string
	store string
	hold  string   // the sources pause halfway until this file exists
	env   []string // added to every process's environment (a MinIO store's credentials)
	job   []string // more job flags, given to every process (e.g. -sink-dir)
	// workerFlags are given to every worker startWorker starts.
	workerFlags []string
	procs       []*child
	// net, when set, is the private network the processes run in: each
	// in the namespace of node place(name) (see newPartitionCluster).
	net   *netns.Net
	place func(name string) int
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	dir := t.TempDir()
	c := &testCluster{t: t, dir: dir, store: filepath.Join(dir, "store"), hold: filepath.Join(dir, "release")}
	t.Cleanup(func() {
		for _, p := range c.procs {
			p.stop()
		}
		for _, p := range c.procs {
			checkRaces(t, p)
		}
		if t.Failed() {
			// A process that exited with an error first: CI keeps only
			// part of a long report, and the coordinators' event lines
			// would hide a worker's panic.
			procs := slices.Clone(c.procs)
			slices.SortStableFunc(procs, func(a, b *child) int {
				return cmp.Compare(b.exitCode(), a.exitCode())
			})
			for _, p := range procs {
				t.Logf("--- %s (pid %d, %s) printed (> stdout, ! stderr):\n%s", p.name, p.pid(), p.exitStatus(), p.output())
			}
		}
	})
	return c
}

// jobFlags are the job's flags for the process tests: the records last a few
// seconds at the paced rate, and the sources hold halfway until release.
func (c *testCluster) jobFlags() []string {
	return append([]string{"-records", "6000", "-keys", "200", "-rate", "3000", "-hold", c.hold}, c.job...)
}

// coordinatorFlags are the coordinator's flags: 20 ms checkpoints and a
// short heartbeat.
func (c *testCluster) coordinatorFlags(listen string, workers int) []string {
	return []string{"-role", "coordinator", "-listen", listen, "-store", c.store, "-workers", strconv.Itoa(workers),
		"-interval", "20ms", "-heartbeat", "200ms", "-heartbeat-timeout", "1s",
		// The soak fails nodes faster than the default restart policy
		// allows (10 a minute); a busy machine may add false losses.
		"-max-failures", "1000"}
}

// start starts a process of the binary.
func (c *testCluster) start(name string, args ...string) *child {
	c.t.Helper()
	bin := exe
	if c.net != nil {
		bin, args = c.net.Command(c.place(name), exe, args...)
	}
	p, err := startChild(name, append([]string{raceOptions}, c.env...), bin, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.procs = append(c.procs, p)
	return p
}

// startCoordinator starts a coordinator of the job and returns it with its
// address.
func (c *testCluster) startCoordinator(name, listen string, workers int, extra ...string) (*child, string) {
	c.t.Helper()
	args := append(append(c.coordinatorFlags(listen, workers), c.jobFlags()...), extra...)
	p := c.start(name, args...)
	_, line := c.await(p, 0, "its address", func(l string) bool { return strings.HasPrefix(l, listeningPrefix) })
	return p, strings.TrimPrefix(line, listeningPrefix)
}

// startWorker starts a worker joining join and returns it with its address.
func (c *testCluster) startWorker(name, join string, extra ...string) (*child, string) {
	c.t.Helper()
	args := append(append(append([]string{"-role", "worker", "-join", join, "-listen", "127.0.0.1:0"}, c.jobFlags()...), c.workerFlags...), extra...)
	p := c.start(name, args...)
	_, line := c.await(p, 0, "its address", func(l string) bool { return strings.HasPrefix(l, listeningPrefix) })
	return p, strings.TrimPrefix(line, listeningPrefix)
}

// await waits for a line of p at index from or later that matches, and
// returns its index and text; it fails the test if p exits first or the
// deadline passes.
func (c *testCluster) await(p *child, from int, what string, match func(string) bool) (int, string) {
	c.t.Helper()
	return c.awaitWithin(p, from, what, awaitDeadline, match)
}

// awaitWithin is await with a deadline of its own.
func (c *testCluster) awaitWithin(p *child, from int, what string, deadline time.Duration, match func(string) bool) (int, string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), deadline)
	defer cancel()
	i, line, err := p.waitLine(ctx, from, match)
	if err != nil {
		c.t.Fatalf("waiting for %s of %s: %v", what, p.name, err)
	}
	return i, line
}

// awaitEvent waits for an event line of kind ("": any), at index from or later, that
// satisfies ok (nil: any).
func (c *testCluster) awaitEvent(p *child, from int, kind string, ok func(eventLine) bool) (int, eventLine) {
	c.t.Helper()
	var ev eventLine
	i, _ := c.await(p, from, "event "+kind, func(l string) bool {
		e, isEvent, err := parseEvent(l)
		if err != nil {
			c.t.Errorf("%s: %v", p.name, err)
			return false
		}
		if !isEvent || (kind != "" && e.kind != kind) || (ok != nil && !ok(e)) {
			return false
		}
		ev = e
		return true
	})
	return i, ev
}

// exit waits for p to exit and returns its exit code (-1: ended by a
// signal).
func (c *testCluster) exit(p *child) int {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), awaitDeadline)
	defer cancel()
	if err := p.wait(ctx); err != nil && p.exitStatus() == "running" {
		c.t.Fatalf("%s did not exit: %v", p.name, err)
	}
	return p.exitCode()
}

// release lets the sources go on past their halfway hold.
func (c *testCluster) release() {
	c.t.Helper()
	if err := os.WriteFile(c.hold, nil, 0o600); err != nil {
		c.t.Fatal(err)
	}
}

// expectExact waits for the coordinator to print exactly-once: OK and exit
// 0, and for every worker to exit 0.
func (c *testCluster) expectExact(coord *child, workers ...*child) {
	c.t.Helper()
	c.expectExactWithin(coord, awaitDeadline, workers...)
}

// expectExactWithin is expectExact for a job whose end may take longer
// than awaitDeadline: one paced to a known rate.
func (c *testCluster) expectExactWithin(coord *child, deadline time.Duration, workers ...*child) {
	c.t.Helper()
	c.awaitWithin(coord, 0, okLine, deadline, func(l string) bool { return l == okLine })
	if code := c.exit(coord); code != 0 {
		c.t.Fatalf("the coordinator exited %d after %q", code, okLine)
	}
	for _, w := range workers {
		if code := c.exit(w); code != 0 {
			c.t.Errorf("%s exited %d at the end of the job, want 0", w.name, code)
		}
	}
}

// events returns the coordinator's events from index from on.
func events(p *child, from int) []eventLine {
	var out []eventLine
	for _, l := range p.linesFrom(from) {
		if ev, ok, err := parseEvent(l); ok && err == nil {
			out = append(out, ev)
		}
	}
	return out
}

// busiest returns the index of the worker (by address) that runs the most
// tasks in p, with at least one task of the keyed sum.
func busiest(p placement, addrs []string) int {
	best, most := -1, 0
	for i, a := range addrs {
		tasks := p.tasksOn(a)
		hasSum := slices.ContainsFunc(tasks, func(t string) bool { return strings.HasPrefix(t, "sum#") })
		if hasSum && len(tasks) > most {
			best, most = i, len(tasks)
		}
	}
	return best
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}
