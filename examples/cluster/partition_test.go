//go:build linux

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/netns"
)

// newPartitionCluster returns a test cluster whose coordinator (node 0) and
// workers "worker 1" and "worker 2" (nodes 1 and 2) run in network
// namespaces of a private network of their own, which the test cuts. It
// skips when namespaces cannot be made, except under CI=true, where it
// fails.
func newPartitionCluster(t *testing.T, workers int) (*testCluster, *netns.Net) {
	t.Helper()
	if err := netns.Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true and the partition tests cannot run: %v", err)
		}
		t.Skip(err)
	}
	n, err := netns.New(1 + workers)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Close(); err != nil {
			t.Error(err)
		}
	})
	c := newTestCluster(t) // its processes are killed before the namespaces go
	c.net = n
	c.place = func(name string) int {
		if i, err := strconv.Atoi(strings.TrimPrefix(name, "worker ")); err == nil {
			return i
		}
		return 0
	}
	return c, n
}

// startPartitioned starts the coordinator and workers in their
// namespaces and waits for a complete checkpoint; the sources are held
// halfway at the latest. Each worker has slots for the whole job, so that
// either can run it alone.
func startPartitioned(c *testCluster, n *netns.Net, count int) (coord *child, workers []*child, addrs []string) {
	c.t.Helper()
	coord, addr := c.startCoordinator("coordinator", n.Node(0).IP+":0", count, "-allow-plaintext")
	for i := 1; i <= count; i++ {
		name := "worker " + strconv.Itoa(i)
		w, a := c.startWorker(name, addr, "-listen", n.Node(i).IP+":0", "-allow-plaintext", "-slots", "6", "-register-timeout", "2m")
		workers, addrs = append(workers, w), append(addrs, a)
	}
	c.awaitEvent(coord, 0, "checkpoint-completed", func(e eventLine) bool { return e.get("final") == "false" })
	return coord, workers, addrs
}

// cut cuts the links from node a to node b (and back, when both).
func cut(t *testing.T, n *netns.Net, a, b int, both bool) (heal func()) {
	t.Helper()
	pairs := [][2]int{{a, b}}
	if both {
		pairs = append(pairs, [2]int{b, a})
	}
	for _, p := range pairs {
		if err := n.Cut(p[0], p[1]); err != nil {
			t.Fatal(err)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			for _, p := range pairs {
				if err := n.Heal(p[0], p[1]); err != nil {
					t.Error(err) // heal may run on a timer's goroutine
				}
			}
		})
	}
}

// TestPartitions cuts links between the nodes of a running job, in network
// namespaces, while the sources run: every case must be detected (or, for a
// short cut, ride it out) and end exactly once.
func TestPartitions(t *testing.T) {
	lostLink := func(e eventLine) bool { return strings.Contains(e.get("err"), "lost the link to") }
	for _, tc := range []struct {
		name string
		a, b int
		both bool
		// kind and match say which coordinator event shows the cut
		// detected; "" for a cut that heals by itself.
		kind  string
		match func(eventLine) bool
		// healAfter heals a cut that the job may ride out.
		healAfter time.Duration
	}{
		{name: "worker from coordinator", a: 0, b: 2, both: true, kind: "node-lost"},
		{name: "workers from each other", a: 1, b: 2, both: true, kind: "task-failed", match: lostLink},
		{name: "asymmetric", a: 1, b: 2, kind: "task-failed", match: lostLink},
		{name: "healing", a: 1, b: 2, both: true, healAfter: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, n := newPartitionCluster(t, 2)
			coord, workers, addrs := startPartitioned(c, n, 2)
			from := len(coord.linesFrom(0))
			heal := cut(t, n, tc.a, tc.b, tc.both)
			defer heal()
			c.release()
			if tc.kind == "" {
				time.AfterFunc(tc.healAfter, heal) // the fault schedule, not a synchronisation
			} else {
				_, ev := c.awaitEvent(coord, from, tc.kind, tc.match)
				if tc.kind == "node-lost" && nodeAddr(ev.get("node")) != addrs[1] {
					t.Errorf("node-lost %s, want worker 2 at %s", ev.get("node"), addrs[1])
				}
				heal()
			}
			c.expectExact(coord, workers...)
		})
	}
}

// The partition soak's shapes: the short one runs in `make test`; the full
// one (SNAPFLOW_SOAK=full, `make soak`) cuts at least 30 times.
const (
	partitionShortEvents = 4
	partitionFullEvents  = 32
	partitionWorkers     = 3
)

// TestPartitionSoak cuts links of a running job, one event at a time, on a
// seeded random schedule (SNAPFLOW_SEED=<seed> replays it): a worker from
// the coordinator (both ways or one), two workers that exchange data from
// each other (both ways or one), or a short cut of either kind that heals
// after 100-700 ms. A lasting cut heals once the coordinator shows it
// detected (node-lost or task-failed); the next event waits for a
// checkpoint completed after the heal. The sources hold halfway (barriers
// still cross every link); at the end they are released
// and the job must end exactly once, every worker exiting 0.
func TestPartitionSoak(t *testing.T) {
	events := partitionShortEvents
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		events = partitionFullEvents
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SNAPFLOW_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SNAPFLOW_SEED=%q: %v", v, err)
		}
	}
	t.Logf("partition soak: seed %d (replay with SNAPFLOW_SEED=%d), %d events", seed, seed, events)
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	c, n := newPartitionCluster(t, partitionWorkers)
	c.job = append(c.job, "-records", "40000", "-rate", "4000")
	coord, workers, addrs := startPartitioned(c, n, partitionWorkers)
	// The sources hold halfway until the end: the job cannot finish
	// before the last event, however slow the machine. Barriers cross
	// the links every 20 ms meanwhile.
	var log []string
	healedAt := 0
	for ev := range events {
		// The job runs: a checkpoint completed after the last heal.
		c.awaitEvent(coord, healedAt, "checkpoint-completed", func(e eventLine) bool { return e.get("final") == "false" })
		p := lastPlacement(t, coord)
		pairs := exchanging(p, addrs)
		short := rng.IntN(4) == 0
		both := rng.IntN(2) == 0
		var a, b int
		kind := "worker-coordinator"
		if len(pairs) > 0 && rng.IntN(2) == 0 {
			pr := pairs[rng.IntN(len(pairs))]
			a, b, kind = pr[0], pr[1], "worker-worker"
		} else {
			// A worker that holds tasks: one lost by an earlier event
			// may still be registering again, and a cut of a worker
			// outside the job has nothing to detect.
			var placed []int
			for i, addr := range addrs {
				if len(p.tasksOn(addr)) > 0 {
					placed = append(placed, i+1)
				}
			}
			a, b = 0, placed[rng.IntN(len(placed))]
		}
		if rng.IntN(2) == 0 {
			a, b = b, a
		}
		from := len(coord.linesFrom(0))
		heal := cut(t, n, a, b, both)
		what := fmt.Sprintf("%d: %s %d->%d both=%v", ev, kind, a, b, both)
		if short {
			d := time.Duration(100+rng.IntN(600)) * time.Millisecond
			healed := make(chan struct{})
			time.AfterFunc(d, func() { heal(); close(healed) }) // the fault schedule, not a synchronisation
			what += fmt.Sprintf(" healing after %v", d)
			<-healed
		} else {
			_, det := c.awaitEvent(coord, from, "", func(e eventLine) bool { return e.kind == "node-lost" || e.kind == "task-failed" })
			heal()
			what += fmt.Sprintf(" detected: %s %s", det.kind, det.get("err"))
		}
		healedAt = len(coord.linesFrom(0))
		log = append(log, what)
	}
	c.release()
	c.expectExact(coord, workers...)
	t.Logf("partition soak: seed %d, %d events:\n%s", seed, events, strings.Join(log, "\n"))
}

// lastPlacement returns the coordinator's latest placement.
func lastPlacement(t *testing.T, coord *child) placement {
	t.Helper()
	var last string
	for _, e := range events(coord, 0) {
		if e.kind == "placed" {
			last = e.get("placement")
		}
	}
	p, err := parsePlacement(last)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// exchanging returns the pairs of workers (as nodes: worker i is node i)
// between which a channel of p runs: a source's to a sum's, a sum's to the
// sink's.
func exchanging(p placement, addrs []string) [][2]int {
	has := func(i int, prefix string) bool {
		for _, task := range p.tasksOn(addrs[i]) {
			if strings.HasPrefix(task, prefix) {
				return true
			}
		}
		return false
	}
	var pairs [][2]int
	for i := range addrs {
		for j := range addrs {
			if i < j && (has(i, "source#") && has(j, "sum#") || has(i, "sum#") && has(j, "sink#") ||
				has(j, "source#") && has(i, "sum#") || has(j, "sum#") && has(i, "sink#")) {
				pairs = append(pairs, [2]int{i + 1, j + 1})
			}
		}
	}
	return pairs
}
