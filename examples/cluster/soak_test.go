//go:build unix

package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The cluster soak's shapes: the short one runs in `make test`; the full one
// (SNAPFLOW_SOAK=full, `make soak`) injects at least 50 node failures.
const (
	soakShortFailures = 6
	soakFullFailures  = 50
	// soakCoordinatorEvery: failure n (from 0) kills the coordinator when
	// n % soakCoordinatorEvery == soakCoordinatorAt, so that the short
	// soak has one coordinator kill and the full one one in every 8.
	soakCoordinatorEvery = 8
	soakCoordinatorAt    = 3
	soakWorkers          = 4
	soakSinkDelay        = 500 * time.Microsecond
	soakBatch            = 32
)

// Failure kinds.
const (
	workerKill      = "worker-kill"
	workerStop      = "worker-stop"
	coordinatorKill = "coordinator-kill"
)

// TestClusterSoak is the chaos soak's cluster shape: a coordinator and 4
// workers run the keyed job with 20 ms checkpoints, a 1 s heartbeat timeout
// and a sink slower than the sources (its checkpoint mode, aligned,
// unaligned or aligned with a 1 ms timeout, is chosen by the seed) while a seeded random schedule (the seed is logged;
// SNAPFLOW_SEED=<seed> replays the schedule) injects node failures one at
// a time: SIGKILL of a worker that runs tasks (and a replacement worker
// started), SIGSTOP of one (resumed by SIGCONT once the coordinator has
// declared it lost; it registers again under a new id), and in every 8th
// failure SIGKILL of the coordinator, with a new one started on the same
// address and store. Each failure is injected only once the job runs
// again, in a new epoch or under the new coordinator, and a checkpoint of
// that run has completed: the schedule follows the coordinator's events,
// not the clock. At the end the sources are released and the last
// coordinator must find the exact closed form in the final checkpoint: no
// update lost or applied twice.
func TestClusterSoak(t *testing.T) {
	full := os.Getenv("SNAPFLOW_SOAK") == "full"
	failures := soakShortFailures
	// Records and rate: the first half (before the hold) lasts about
	// records/2/rate seconds, so that records still flow during the first
	// failures; the rest of the failures hit a job held halfway, which
	// cannot end before the test releases it.
	records, rate := 40_000, 4_000
	if full {
		failures = soakFullFailures
		records = 400_000
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SNAPFLOW_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SNAPFLOW_SEED=%q: want an unsigned integer: %v", s, err)
		}
		seed = n
	}
	// The checkpoint mode comes from the seed too: aligned, unaligned, or
	// aligned with a 1ms timeout (the coordinator sends it to workers).
	mode := [][]string{nil, {"-checkpoint-mode", "unaligned"}, {"-align-timeout", "1ms"}}[seed%3]
	t.Logf("cluster soak: seed %d (replay with SNAPFLOW_SEED=%d), %d node failures, checkpoint mode flags %q", seed, seed, failures, mode)
	s := newSoak(t, seed, records, rate)
	// The sink takes at most 2,000 records/s, half the sources' rate: the
	// records queue behind it while they flow, and the barriers of unaligned
	// checkpoints (and of timed-out aligned ones) overtake them. Batches of
	// 32 records keep the queues, and so an aligned checkpoint's wait for
	// them, to a few seconds (the credits bound batches, not records).
	s.job = append(s.job, "-sink-delay", soakSinkDelay.String(), "-batch", strconv.Itoa(soakBatch))
	s.job = append(s.job, mode...)
	s.overtakes = mode != nil
	began := time.Now()
	s.startAll()
	for n := range failures {
		kind := s.pick(n)
		s.inject(n, kind)
	}
	s.finish()
	s.report(seed, time.Since(began))
}

// soak is the state of one cluster soak.
type soak struct {
	t   *testing.T
	c   *testCluster
	rnd *rand.Rand
	job []string // the job's flags, added to every process's

	coord  *child
	addr   string
	coords []*child // every coordinator started, the current one last

	workers []*child // the live workers
	addrs   []string // their addresses
	started int      // workers started in all, for their names

	epoch  uint64    // the epoch of the current run
	placed placement // its placement
	at     int       // the index of the coordinator's line after which to look for events

	counts    map[string]int // failures by kind
	firstStop *bool          // whether failure 0 is a worker stop (failure 1 is the other kind)
	overtakes bool           // barriers overtake records: some checkpoint must store records in flight
}

func newSoak(t *testing.T, seed uint64, records, rate int) *soak {
	return &soak{
		t: t, c: newTestCluster(t), rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		job:    []string{"-records", strconv.Itoa(records), "-rate", strconv.Itoa(rate)},
		counts: map[string]int{},
	}
}

// startAll starts the coordinator and the workers and waits for the job to
// run with a checkpoint complete.
func (s *soak) startAll() {
	s.t.Helper()
	s.startCoordinator("127.0.0.1:0")
	for range soakWorkers {
		s.startWorker()
	}
	s.awaitRecovery(0, 0)
}

func (s *soak) startCoordinator(listen string) {
	s.t.Helper()
	name := "coordinator " + strconv.Itoa(len(s.coords)+1)
	s.coord, s.addr = s.c.startCoordinator(name, listen, soakWorkers, s.job...)
	s.coords = append(s.coords, s.coord)
}

func (s *soak) startWorker() {
	s.t.Helper()
	s.started++
	w, a := s.c.startWorker("worker "+strconv.Itoa(s.started), s.addr, append([]string{"-register-timeout", "2m"}, s.job...)...)
	s.workers, s.addrs = append(s.workers, w), append(s.addrs, a)
}

// pick chooses the kind of failure n: the first two are a worker kill and
// a worker stop in a random order, so that even the short soak has both.
func (s *soak) pick(n int) string {
	switch {
	case n%soakCoordinatorEvery == soakCoordinatorAt:
		return coordinatorKill
	case n < 2:
		if s.firstStop == nil {
			first := s.rnd.IntN(2) == 0
			s.firstStop = &first
		}
		if (n == 0) == *s.firstStop {
			return workerStop
		}
		return workerKill
	case s.rnd.IntN(2) == 0:
		return workerKill
	default:
		return workerStop
	}
}

// victim picks a random live worker that runs tasks in the current
// placement (killing an idle one would not disturb the job).
func (s *soak) victim() int {
	s.t.Helper()
	var busy []int
	for i, a := range s.addrs {
		if len(s.placed.tasksOn(a)) > 0 {
			busy = append(busy, i)
		}
	}
	if len(busy) == 0 {
		s.t.Fatalf("no live worker (%v) runs a task of epoch %d's placement %v", s.addrs, s.epoch, s.placed)
	}
	return busy[s.rnd.IntN(len(busy))]
}

// inject injects failure n of kind and waits until the job runs again
// with a checkpoint complete.
func (s *soak) inject(n int, kind string) {
	s.t.Helper()
	s.counts[kind]++
	switch kind {
	case coordinatorKill:
		s.t.Logf("failure %d: SIGKILL %s (epoch %d)", n+1, s.coord.name, s.epoch)
		old := s.coord
		killGroup(old.cmd.Process)
		if code := s.c.exit(old); code != -1 {
			s.t.Fatalf("the killed %s exited %d", old.name, code)
		}
		addr := s.addr
		s.startCoordinator(addr)
		if s.addr != addr {
			s.t.Fatalf("%s listens on %s, want %s", s.coord.name, s.addr, addr)
		}
		s.awaitRecovery(0, 0)
	case workerKill:
		v := s.victim()
		w, addr := s.workers[v], s.addrs[v]
		s.t.Logf("failure %d: SIGKILL %s at %s (epoch %d, its tasks %v)", n+1, w.name, addr, s.epoch, s.placed.tasksOn(addr))
		if err := w.cmd.Process.Kill(); err != nil {
			s.t.Fatal(err)
		}
		s.workers, s.addrs = slices.Delete(s.workers, v, v+1), slices.Delete(s.addrs, v, v+1)
		s.startWorker()
		lost := s.awaitLost(addr)
		s.awaitRecovery(lost, s.epoch+1)
	case workerStop:
		v := s.victim()
		w, addr := s.workers[v], s.addrs[v]
		s.t.Logf("failure %d: SIGSTOP %s at %s (epoch %d, its tasks %v)", n+1, w.name, addr, s.epoch, s.placed.tasksOn(addr))
		if err := w.signal(syscall.SIGSTOP); err != nil {
			s.t.Fatal(err)
		}
		lost := s.awaitLost(addr)
		if err := w.signal(syscall.SIGCONT); err != nil {
			s.t.Fatal(err)
		}
		s.awaitRecovery(lost, s.epoch+1)
	}
}

// awaitLost waits for the coordinator to declare the worker at addr lost
// and returns the index of that line.
func (s *soak) awaitLost(addr string) int {
	s.t.Helper()
	i, _ := s.c.awaitEvent(s.coord, s.at, "node-lost", func(e eventLine) bool { return nodeAddr(e.get("node")) == addr })
	return i
}

// awaitRecovery waits, from line index from of the coordinator, for the
// job to run in epoch minEpoch or later and for a checkpoint of that run
// to complete; it notes the run's epoch and placement.
func (s *soak) awaitRecovery(from int, minEpoch uint64) {
	s.t.Helper()
	i, run := s.c.awaitEvent(s.coord, from, "running", func(e eventLine) bool { return e.uint("epoch") >= minEpoch })
	s.epoch = run.uint("epoch")
	s.placed = nil
	for _, ev := range events(s.coord, from) {
		if ev.kind == "placed" && ev.uint("epoch") == s.epoch {
			p, err := parsePlacement(ev.get("placement"))
			if err != nil {
				s.t.Fatal(err)
			}
			s.placed = p
		}
	}
	if s.placed == nil {
		s.t.Fatalf("%s: no placement of epoch %d before it ran", s.coord.name, s.epoch)
	}
	s.at, _ = s.c.awaitEvent(s.coord, i, "checkpoint-completed", func(e eventLine) bool {
		return e.uint("epoch") >= s.epoch && e.get("final") == "false"
	})
}

// finish releases the sources and checks the last coordinator's result:
// the exact closed form, the live workers ending cleanly.
func (s *soak) finish() {
	s.t.Helper()
	s.c.release()
	// After the release the sink takes the second half of the records at
	// its pace: the wait allows twice that on top of the usual one.
	records, err := strconv.Atoi(s.job[1])
	if err != nil {
		s.t.Fatal(err)
	}
	s.c.expectExactWithin(s.coord, awaitDeadline+2*time.Duration(records/2)*soakSinkDelay, s.workers...)
	want := fmt.Sprintf("%skeys=200 records=%s ", resultPrefix, s.job[1])
	_, line := s.c.await(s.coord, 0, "the result line", func(l string) bool { return strings.HasPrefix(l, resultPrefix) })
	if !strings.HasPrefix(line, want) {
		s.t.Errorf("%s printed %q, want a line starting %q", s.coord.name, line, want)
	}
}

// report logs the soak's summary line.
func (s *soak) report(seed uint64, d time.Duration) {
	rollbacks, checkpoints, inFlight := 0, 0, 0
	for _, c := range s.coords {
		for _, ev := range events(c, 0) {
			switch ev.kind {
			case "restoring":
				rollbacks++
			case "checkpoint-completed":
				checkpoints++
				if ev.get("in_flight") != "" {
					inFlight++
				}
			}
		}
	}
	total := s.counts[workerKill] + s.counts[workerStop] + s.counts[coordinatorKill]
	s.t.Logf("cluster soak: seed=%d failures=%d (%s=%d %s=%d %s=%d) rollbacks=%d checkpoints=%d (%d with records in flight) duration=%v",
		seed, total, workerKill, s.counts[workerKill], workerStop, s.counts[workerStop], coordinatorKill, s.counts[coordinatorKill],
		rollbacks, checkpoints, inFlight, d.Round(time.Millisecond))
	if s.overtakes && inFlight == 0 {
		s.t.Error("no checkpoint stored records in flight: the barriers overtook none behind the slow sink")
	}
}
