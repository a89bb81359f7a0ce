package actors_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// The tests of this file check that a stop-with-savepoint holds the
// processing-time timers of every task that has snapshotted it, and the
// idle status of every source, until the job stops or the savepoint
// fails: a timer fires once, in the job that stops or in the one that
// resumes from the savepoint, never in both.

// savepointTimers returns the timers, of either domain, that savepoint
// name of procJob's job holds.
func savepointTimers(ctx context.Context, t *testing.T, store snapshots.Store, name string) int {
	t.Helper()
	r, err := snapshots.NewCheckpoints(store, "proctimers", nil).LoadSavepoint(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	return pendingTimers(t, r.States)
}

// pendingTimers returns the timers, of either domain, that states hold.
func pendingTimers(t *testing.T, states map[string]*messages.TaskState) int {
	t.Helper()
	pending := 0
	for _, st := range states {
		ev, proc, err := topology.PendingTimers(st)
		if err != nil {
			t.Fatal(err)
		}
		pending += ev + proc
	}
	return pending
}

// runToEnd runs g with opts (and the test's logger) until it ends.
func runToEnd(ctx context.Context, t *testing.T, g *topology.Graph, opts ...actors.Option) {
	t.Helper()
	job, err := actors.Start(ctx, g, append(opts, actors.WithLogger(testLogger(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
}

// oncePerKey checks that each of keys 0..keys-1 counts 1 in fired.
func oncePerKey(t *testing.T, fired map[int64]int, keys int64, when string) {
	t.Helper()
	for k := range keys {
		if fired[k] != 1 {
			t.Errorf("%s, key %d's timer fired %d times, want once", when, k, fired[k])
		}
	}
}

// snapshotsAfter makes procJob's timer tasks wait in a snapshot until the
// wall clock, which their timers are set by, has passed the time in by
// (unix ns; 0: they do not wait), so that every timer has its tick in the
// task's mailbox as the snapshot ends.
func snapshotsAfter(by *atomic.Int64) *actorstest.Faults {
	return &actorstest.Faults{Snapshot: func(task string, _ uint64) {
		if at := by.Load(); at != 0 && strings.HasPrefix(task, "timers#") {
			<-time.After(time.Until(time.Unix(0, at)) + 20*time.Millisecond)
		}
	}}
}

// A task that has snapshotted a stop-with-savepoint fires no
// processing-time timer before the job stops: every timer fires once, in
// the run that stops or in the one that resumes, never in both. The timer
// tasks wait in their snapshot until every timer is due, so that each
// has its tick in the mailbox as the snapshot ends.
func TestStopSavepointHoldsProcessingTimers(t *testing.T) {
	const n, keys, delay = 1000, 10, 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	store := snapshots.NewMem()
	var mu sync.Mutex
	fired := map[int64]int{} // in the timer's function
	onFire := func(k int64) {
		mu.Lock()
		fired[k]++
		mu.Unlock()
	}
	sink := func(int64) error { return nil }
	var dueBy atomic.Int64 // every timer is due by then (unix ns); 0: not yet known
	faults := snapshotsAfter(&dueBy)
	gate := testsrc.NewGate(n / 2)
	job, err := actors.Start(ctx, procJob(gate, n, keys, delay, sink, onFire), actors.WithStore(store),
		actors.WithCheckpointInterval(0), actorstest.WithFaults(faults), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/2) // every key has registered its timer
	dueBy.Store(time.Now().Add(delay).UnixNano())
	if _, err := job.StopWithSavepoint(ctx, "held"); err != nil {
		t.Fatal(err)
	}
	_ = job.Wait()
	pending := savepointTimers(ctx, t, store, "held")
	mu.Lock()
	before := len(fired)
	for k, c := range fired {
		if c != 1 {
			t.Errorf("before the stop, key %d's timer fired %d times", k, c)
		}
	}
	mu.Unlock()
	if pending+before != keys {
		t.Fatalf("the savepoint holds %d timers and %d fired in the job it stopped, want %d in all", pending, before, keys)
	}
	dueBy.Store(0)
	gate.SetLimit(n)
	runToEnd(ctx, t, procJob(gate, n, keys, delay, sink, onFire), actors.WithStore(store), actors.WithSavepoint("held"),
		actorstest.WithFaults(faults))
	mu.Lock()
	defer mu.Unlock()
	oncePerKey(t, fired, keys, "in the two runs")
	t.Logf("%d timers held in the savepoint, %d fired before it", pending, before)
}

// A stop-with-savepoint that fails lets the job go on, and with it the
// processing-time timers its snapshot held: each fires while the source
// still waits.
func TestFailedStopReleasesProcessingTimers(t *testing.T) {
	const n, keys, delay = 1000, 10, 100 * time.Millisecond
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	store := &failingPuts{Store: snapshots.NewMem(), prefix: snapshots.SavepointsPrefix("proctimers")}
	store.armed.Store(true)
	var mu sync.Mutex
	fired := map[int64]int{}
	allFired := make(chan struct{})
	onFire := func(k int64) {
		mu.Lock()
		defer mu.Unlock()
		if fired[k]++; len(fired) == keys && fired[k] == 1 {
			close(allFired)
		}
	}
	var dueBy atomic.Int64
	faults := snapshotsAfter(&dueBy)
	gate := testsrc.NewGate(n / 2)
	job, err := actors.Start(ctx, procJob(gate, n, keys, delay, func(int64) error { return nil }, onFire), actors.WithStore(store),
		actors.WithCheckpointInterval(0), actorstest.WithFaults(faults), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/2)
	dueBy.Store(time.Now().Add(delay).UnixNano())
	if _, err := job.StopWithSavepoint(ctx, "refused"); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("StopWithSavepoint with a store that refuses savepoints: %v, want the store's error", err)
	}
	select {
	case <-allFired:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("after the failed stop, %d of %d timers fired", len(fired), keys)
	}
	gate.SetLimit(n)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	oncePerKey(t, fired, keys, "after the failed stop")
}

// A stop-with-savepoint that times out behind backpressure is aborted
// while its barrier, or the snapshot it makes a task take, still waits
// behind input. When that snapshot runs, after the abort, it must not hold
// the task's processing-time timers: the job goes on, and every timer
// registered after it fires while the source still waits.
func TestAbortedStopBehindBackpressureReleasesTimers(t *testing.T) {
	// Batches of 16 and 8 credits: a keyed task processes about 9 batches
	// before its output is blocked, and holds 8 more unprocessed. The
	// source stops at 416 records, 208 per keyed task (even keys on one,
	// odd on the other), so that it has sent them all when the stop's
	// barrier leaves: the barrier reaches each keyed task at once, and its
	// snapshot waits there behind the unprocessed batches.
	const keys, limit = 10, 416
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	hold, held := make(chan struct{}), make(chan struct{})
	var holdOnce, heldOnce sync.Once
	var mu sync.Mutex
	fired := map[int64]int{}
	allFired := make(chan struct{})
	g := topology.New("abortedstop", topology.MaxParallelism(128))
	gate := testsrc.NewGate(limit)
	src := topology.FromSource(g, "src", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: 3 * limit, Gate: gate} })
	keyed := topology.KeyByHash(src, func(v int64) int64 { return v % keys }, func(k int64) uint64 { return uint64(k%2) * 64 })
	out := topology.Process(keyed, "timers",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			armed := topology.Value[bool](s, "armed")
			topology.OnTimer(s, func(ctx *topology.Context[int64], _ topology.Timer, _ *topology.Collector[int64]) error {
				mu.Lock()
				defer mu.Unlock()
				if fired[ctx.Key()]++; len(fired) == keys && fired[ctx.Key()] == 1 {
					close(allFired)
				}
				return nil
			})
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				// Only records read after the stop failed arm the timers.
				if a, _ := armed.Get(); !a && v >= limit {
					armed.Set(true)
					ctx.RegisterProcessingTimer(time.Now().Add(10 * time.Millisecond))
				}
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(2))
	topology.Sink(out, "sink", func(int64) error {
		heldOnce.Do(func() { close(held) })
		<-hold
		return nil
	})
	job, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0),
		actors.WithCheckpointTimeout(300*time.Millisecond), actors.WithBatchSize(16), actors.WithCredits(8),
		actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer holdOnce.Do(func() { close(hold) })
	<-held // the sink holds its first record: backpressure up to the source
	gate.WaitReached(t, limit)
	if _, err := job.StopWithSavepoint(ctx, "behind"); err == nil {
		t.Fatal("StopWithSavepoint succeeded behind a sink that holds every record")
	}
	holdOnce.Do(func() { close(hold) })
	gate.SetLimit(2 * limit)
	select {
	case <-allFired:
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("after the aborted stop, %d of %d timers fired", len(fired), keys)
	}
	gate.SetLimit(3 * limit)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
}

// idleStop is the job of the idle-status tests, an event-time window
// count over the union of two gated sources. Source a stops after 10 of
// its 20 records, far behind source b in event time (its other 10 are far
// ahead, so that none is ever late), and is idle after a second without a
// record; b has no idleness timeout. While a holds b's windows back, only
// a's idle status can close them.
type idleStop struct {
	ref          map[windowKey]int64
	sink         *windowSink
	emitted      map[windowKey]int // under sink.mu
	bClosed      chan struct{}     // closed when the first window of b's is emitted
	gateA, gateB *testsrc.Gate
	// idleBy is when a is idle by (unix ns): the counting tasks wait in
	// their snapshot until it has passed, and the sink in its snapshot
	// long enough to take what they emit after theirs. 0: nobody waits.
	idleBy atomic.Int64
	faults *actorstest.Faults
}

const (
	idleStopA, idleStopLimitA, idleStopB, idleStopOffB = 20, 10, 2000, 100_000
	idleStopTimeout                                    = time.Second
)

func idleStopIdxA(v int64) int64 {
	if v <= idleStopLimitA {
		return v - 1
	}
	return 10*idleStopOffB + v
}

func idleStopIdxB(v int64) int64 { return idleStopOffB + v - 1 }

func newIdleStop() *idleStop {
	s := &idleStop{ref: map[windowKey]int64{}, emitted: map[windowKey]int{}, bClosed: make(chan struct{}),
		gateA: testsrc.NewGate(idleStopLimitA), gateB: testsrc.NewGate(idleStopB / 2)}
	for v := int64(1); v <= idleStopA; v++ {
		i := idleStopIdxA(v)
		s.ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	for v := int64(1); v <= idleStopB; v++ {
		i := idleStopIdxB(v)
		s.ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	s.sink = newWindowSink(s.ref)
	// A window of b's ends after a's first records, and before its far ones.
	firstB := etWindowEnd(etTime(idleStopIdxB(1))).UnixNano()
	farA := etTime(idleStopIdxA(idleStopLimitA + 1)).UnixNano()
	var once sync.Once
	s.sink.onWindow = func(w windowCount) {
		s.emitted[w.windowKey]++
		if w.End >= firstB && w.End < farA {
			once.Do(func() { close(s.bClosed) })
		}
	}
	s.faults = &actorstest.Faults{Snapshot: func(task string, _ uint64) {
		at := s.idleBy.Load()
		switch {
		case at == 0:
		case strings.HasPrefix(task, "count#"):
			<-time.After(time.Until(time.Unix(0, at)) + 300*time.Millisecond)
		case strings.HasPrefix(task, "sink#"):
			// What the counting tasks emit after their barrier, within a
			// linger, reaches the sink before the job stops.
			<-time.After(300 * time.Millisecond)
		}
	}}
	return s
}

func (s *idleStop) build() *topology.Graph {
	return etJobFrom("idlestop", func(g *topology.Graph) topology.Stream[click] {
		source := func(name string, gate *testsrc.Gate, n int64, idx func(int64) int64, idle time.Duration) topology.Stream[click] {
			src := topology.FromSource(g, name, func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} },
				topology.WithWatermarks(topology.WatermarkStrategy[int64]{
					Timestamp:      func(v int64) time.Time { return etTime(idx(v)) },
					OutOfOrderness: 10 * time.Millisecond,
					IdleTimeout:    idle,
				}))
			return topology.Map(src, name+"-click", func(v int64) click { return click{User: idx(v) % etUsers, I: idx(v)} })
		}
		return topology.Union(source("a", s.gateA, idleStopA, idleStopIdxA, idleStopTimeout),
			source("b", s.gateB, idleStopB, idleStopIdxB, 0))
	}, s.sink.bad, s.sink.out)
}

// start starts the job on store and waits until both sources wait at
// their gates; the snapshots of the stop to come wait for a's idleness.
func (s *idleStop) start(ctx context.Context, t *testing.T, store snapshots.Store) *actors.Job {
	t.Helper()
	job, err := actors.Start(ctx, s.build(), actors.WithStore(store), actors.WithCheckpointInterval(0),
		actorstest.WithFaults(s.faults), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	s.gateA.WaitReached(t, idleStopLimitA)
	s.gateB.WaitReached(t, idleStopB/2)
	// a read its last record before now: it is idle by now + its timeout.
	s.idleBy.Store(time.Now().Add(idleStopTimeout).UnixNano())
	return job
}

// check fails t unless every window emitted was emitted once, with its
// count, and, when complete, every window was.
func (s *idleStop) check(t *testing.T, complete bool) {
	t.Helper()
	s.sink.check(t, complete)
	s.sink.mu.Lock()
	defer s.sink.mu.Unlock()
	for w, c := range s.emitted {
		if c != 1 {
			t.Errorf("user %d's window %v was emitted %d times, want once", w.User, time.Unix(0, w.End).UTC(), c)
		}
	}
}

// A source that reads nothing when a stop-with-savepoint's barrier leaves
// it sends no idle status after that barrier, even once its idleness
// timeout passes before the job has stopped: the status would advance the
// watermark downstream and fire event-time timers that the savepoint
// holds, and they would fire again after the resume. Every window must be
// emitted once, with its whole count, across the stopped run and the
// resumed one.
func TestStopSavepointHoldsIdleStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s := newIdleStop()
	store := snapshots.NewMem()
	job := s.start(ctx, t, store)
	if _, err := job.StopWithSavepoint(ctx, "idle"); err != nil {
		t.Fatal(err)
	}
	_ = job.Wait()
	s.sink.mu.Lock()
	before := len(s.emitted)
	s.sink.mu.Unlock()
	s.idleBy.Store(0)
	s.gateA.SetLimit(idleStopA)
	s.gateB.SetLimit(idleStopB)
	runToEnd(ctx, t, s.build(), actors.WithStore(store), actors.WithSavepoint("idle"), actorstest.WithFaults(s.faults))
	s.check(t, true)
	// 0 unless a went idle before the stop's barrier left it (a slow
	// machine): then the windows closed before the stop, as they may.
	t.Logf("%d of %d windows emitted before the stop", before, len(s.ref))
}

// A stop-with-savepoint that fails lets a source that went idle while the
// stop held it send its idle status: the windows it held back close while
// both sources still wait. (The job is then stopped: b would end before a
// read its last records, and those would be late.)
func TestFailedStopReleasesIdleStatus(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	s := newIdleStop()
	store := &failingPuts{Store: snapshots.NewMem(), prefix: snapshots.SavepointsPrefix("idlestop")}
	store.armed.Store(true)
	job := s.start(ctx, t, store)
	if _, err := job.StopWithSavepoint(ctx, "refused"); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Fatalf("StopWithSavepoint with a store that refuses savepoints: %v, want the store's error", err)
	}
	select {
	case <-s.bClosed:
	case <-ctx.Done():
		t.Fatal("after the failed stop, no window of source b closed while source a was idle")
	}
	stopJob(t, job)
	s.check(t, false)
}
