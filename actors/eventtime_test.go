package actors_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// click is an event of the event-time tests: user and index.
type click struct{ User, I int64 }

const (
	etEvents = 30000
	etUsers  = 17
	etWindow = 50 * time.Millisecond
)

var etBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// etTime is event i's time: 100µs apart, each up to 4.9ms behind its
// place, so within an out-of-orderness of 10ms no event is late.
func etTime(i int64) time.Time {
	return etBase.Add(time.Duration(i)*100*time.Microsecond - time.Duration((i*7919)%50)*100*time.Microsecond)
}

func etWindowEnd(t time.Time) time.Time { return t.Truncate(etWindow).Add(etWindow) }

type windowKey struct {
	User int64
	End  int64 // ns
}

type windowCount struct {
	windowKey
	N int64
}

// etJob counts each user's events per 50ms event-time window with an
// event-time timer per window, and checks every record's timestamp and
// the watermark it sees. bad collects what went wrong.
func etJob(name string, bad func(string), out func(windowCount) error) *topology.Graph {
	return etJobFrom(name, func(g *topology.Graph) topology.Stream[click] {
		src := topology.Generate(g, "clicks", etEvents, func(i int64) click { return click{User: i % etUsers, I: i} },
			topology.Parallelism(2),
			topology.WithWatermarks(topology.WatermarkStrategy[click]{
				Timestamp:      func(c click) time.Time { return etTime(c.I) },
				OutOfOrderness: 10 * time.Millisecond,
			}))
		return topology.Map(src, "pass", func(c click) click { return c }, topology.Parallelism(2))
	}, bad, out)
}

func etJobFrom(name string, source func(*topology.Graph) topology.Stream[click], bad func(string), out func(windowCount) error) *topology.Graph {
	g := topology.New(name)
	passed := source(g)
	counts := topology.Process(topology.KeyBy(passed, func(c click) int64 { return c.User }), "count",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, click, windowCount] {
			n := topology.MapOf[int64, int64](s, "n") // window end -> events
			topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[windowCount]) error {
				end := tm.Time.UnixNano()
				c, _ := n.Get(end)
				n.Delete(end)
				if ts, ok := ctx.Timestamp(); !ok || !ts.Equal(tm.Time) || tm.Domain != topology.EventTime {
					bad(fmt.Sprintf("timer of user %d at %v: timestamp %v %v, domain %v", ctx.Key(), tm.Time, ts, ok, tm.Domain))
				}
				out.Emit(windowCount{windowKey{ctx.Key(), end}, c})
				return nil
			})
			return func(ctx *topology.Context[int64], c click, _ *topology.Collector[windowCount]) error {
				ts, ok := ctx.Timestamp()
				if !ok || !ts.Equal(etTime(c.I)) {
					bad(fmt.Sprintf("event %d: timestamp %v %v, want %v", c.I, ts, ok, etTime(c.I)))
				}
				if wm, ok := ctx.Watermark(); ok && ts.Before(wm) {
					bad(fmt.Sprintf("event %d at %v is behind the watermark %v", c.I, ts, wm))
				}
				end := etWindowEnd(ts)
				v, _ := n.Get(end.UnixNano())
				n.Put(end.UnixNano(), v+1)
				ctx.RegisterEventTimer(end)
				return nil
			}
		}, topology.Parallelism(3))
	topology.Sink(counts, "sink", out)
	return g
}

func etReference() map[windowKey]int64 {
	ref := map[windowKey]int64{}
	for i := range int64(etEvents) {
		ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	return ref
}

// windowSink collects what an event-time job emits: each window's count,
// checked against ref as it arrives (replays included), and what the job's
// own checks report. onWindow, when set, sees each window.
type windowSink struct {
	ref      map[windowKey]int64
	onWindow func(windowCount)
	mu       sync.Mutex
	got      map[windowKey]int64
	problems []string
}

func newWindowSink(ref map[windowKey]int64) *windowSink {
	return &windowSink{ref: ref, got: map[windowKey]int64{}}
}

func (s *windowSink) bad(msg string) {
	s.mu.Lock()
	s.problems = append(s.problems, msg)
	s.mu.Unlock()
}

func (s *windowSink) out(w windowCount) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if want := s.ref[w.windowKey]; w.N != want {
		s.problems = append(s.problems, fmt.Sprintf("user %d window %v: emitted %d, want %d", w.User, time.Unix(0, w.End).UTC(), w.N, want))
	}
	s.got[w.windowKey] = w.N
	if s.onWindow != nil {
		s.onWindow(w)
	}
	return nil
}

// check fails t on a reported problem and, when complete, unless every
// window of ref was emitted with its count; it returns the windows emitted.
func (s *windowSink) check(t *testing.T, complete bool) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.problems) > 0 {
		t.Fatalf("%d problems, the first: %v", len(s.problems), s.problems[:min(5, len(s.problems))])
	}
	if complete && !maps.Equal(s.got, s.ref) {
		t.Fatalf("%d windows emitted, want %d", len(s.got), len(s.ref))
	}
	return len(s.got)
}

// The windowed counts of an event-time job with timers equal those
// computed in plain Go, with and without a failure of the counting task,
// and every count emitted, replays included, is the right one.
func TestEventTimeWindowsExact(t *testing.T) {
	ref := etReference()
	for _, c := range []struct{ fail, incremental bool }{{false, false}, {true, false}, {true, true}} {
		fail := c.fail
		t.Run(fmt.Sprintf("failure=%v,incremental=%v", c.fail, c.incremental), func(t *testing.T) {
			sink := newWindowSink(ref)
			opts := []actors.Option{actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(20 * time.Millisecond),
				actors.WithLogger(testLogger(t))}
			if c.incremental {
				opts = append(opts, actors.WithIncrementalCheckpoints(0))
			}
			var failed atomic.Bool
			var batches atomic.Int64
			if fail {
				opts = append(opts, actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
					if task == "count#1" && batches.Add(1) == 20 && !failed.Swap(true) {
						panic("injected failure")
					}
				}}))
			}
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := actors.Run(ctx, etJob("eventtime", sink.bad, sink.out), opts...); err != nil {
				t.Fatal(err)
			}
			sink.check(t, true)
			if fail && !failed.Load() {
				t.Fatal("the failure was never injected")
			}
		})
	}
}

// Watermarks fire timers while the job runs, not only at its end: the
// source stops half-way until a window has reached the sink, which only
// the watermark it sent before stopping can close. Then a checkpoint is
// taken with timers pending, a counting task fails, and the restored
// timers still close every window with the right count.
func TestEventTimeTimersFireBeforeTheEnd(t *testing.T) {
	t.Run("full", func(t *testing.T) { testTimersBeforeTheEnd(t, false) })
	t.Run("incremental", func(t *testing.T) { testTimersBeforeTheEnd(t, true) })
}

// testTimersBeforeTheEnd: with incremental checkpoints, a second
// checkpoint at three quarters refers to the first for the key groups it
// did not write, and the restore reads timers from both.
func testTimersBeforeTheEnd(t *testing.T, incremental bool) {
	ref := etReference()
	gate := testsrc.NewGate(etEvents / 2)
	first := make(chan struct{})
	var once sync.Once
	sink := newWindowSink(ref)
	sink.onWindow = func(windowCount) { once.Do(func() { close(first) }) }
	g := etJobFrom("eventtime-gated", func(g *topology.Graph) topology.Stream[click] {
		src := topology.FromSource(g, "clicks", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: etEvents, Gate: gate} },
			topology.WithWatermarks(topology.WatermarkStrategy[int64]{
				Timestamp:      func(v int64) time.Time { return etTime(v - 1) },
				OutOfOrderness: 10 * time.Millisecond,
			}))
		return topology.Map(src, "click", func(v int64) click { return click{User: (v - 1) % etUsers, I: v - 1} }, topology.Parallelism(2))
	}, sink.bad, sink.out)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	store := snapshots.NewMem()
	var failNow, failed atomic.Bool
	faults := &actorstest.Faults{Process: func(task string) {
		if failNow.Load() && task == "count#0" && !failed.Swap(true) {
			panic("injected failure")
		}
	}}
	opts := []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0), actorstest.WithFaults(faults)}
	if incremental {
		opts = append(opts, actors.WithIncrementalCheckpoints(0))
	}
	job, err := actors.Start(ctx, g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, etEvents/2)
	select {
	case <-first:
	case <-ctx.Done():
		t.Fatal("no window closed while the source waited half-way: the watermark did not fire the timers")
	}
	id, err := job.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := snapshots.NewCheckpoints(store, "eventtime-gated", nil).LoadCheckpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	pending := pendingTimers(t, r.States)
	if pending == 0 {
		t.Fatalf("checkpoint %d holds no pending timer", id)
	}
	t.Logf("checkpoint %d holds %d pending timers", id, pending)
	if incremental {
		gate.SetLimit(etEvents * 3 / 4)
		gate.WaitReached(t, etEvents*3/4)
		if _, err := job.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	failNow.Store(true)
	gate.SetLimit(etEvents)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	sink.check(t, true)
	if !failed.Load() {
		t.Fatal("the failure was never injected")
	}
}

// Across nodes, timestamps and watermarks cross the wire: the windowed
// counts of the event-time job in a cluster of two workers equal the
// reference.
func TestClusterEventTimeExact(t *testing.T) {
	inProcessCluster(t)
	sink := newWindowSink(etReference())
	job := func() *topology.Graph { return etJob("eventtime-cluster", sink.bad, sink.out) }
	j, err := actors.Start(context.Background(), job(), cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: t.TempDir(), Secret: testSecret}),
		actors.WithCheckpointInterval(20*time.Millisecond), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := startWorkers(t, ctx, j.Address(), 2, job)
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	sink.check(t, true)
}

// procJob registers, for each key's first record, a processing-time timer
// delay after it, and emits the key when it fires; sink gets the keys.
// onFire, when given, is called with the key in the timer's function.
func procJob(gate *testsrc.Gate, n, keys int64, delay time.Duration, sink func(int64) error, onFire ...func(int64)) *topology.Graph {
	g := topology.New("proctimers")
	src := topology.FromSource(g, "src", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} })
	fired := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % keys }), "timers",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			armed := topology.Value[bool](s, "armed")
			topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[int64]) error {
				if tm.Domain != topology.ProcessingTime {
					return fmt.Errorf("a timer of domain %v", tm.Domain)
				}
				for _, f := range onFire {
					f(ctx.Key())
				}
				out.Emit(ctx.Key())
				return nil
			})
			return func(ctx *topology.Context[int64], _ int64, _ *topology.Collector[int64]) error {
				if a, _ := armed.Get(); !a {
					armed.Set(true)
					ctx.RegisterProcessingTimer(time.Now().Add(delay))
				}
				return nil
			}
		}, topology.Parallelism(2))
	topology.Sink(fired, "sink", sink)
	return g
}

// Processing-time timers fire from the task's clock while the source
// waits; those still pending in a savepoint fire once after the job
// resumes from it, also when they became due while it was down.
func TestProcessingTimers(t *testing.T) {
	const n, keys = 1000, 10
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	store := snapshots.NewMem()

	// First run: every key's timer fires while the source is held.
	var mu sync.Mutex
	var once sync.Once
	count := map[int64]int{}
	allFired := make(chan struct{})
	sink := func(k int64) error {
		mu.Lock()
		defer mu.Unlock()
		count[k]++
		if len(count) == keys {
			once.Do(func() { close(allFired) })
		}
		return nil
	}
	gate := testsrc.NewGate(n / 2)
	job, err := actors.Start(ctx, procJob(gate, n, keys, 5*time.Millisecond, sink), actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/2)
	select {
	case <-allFired:
	case <-ctx.Done():
		t.Fatal("the processing-time timers did not fire while the source waited")
	}
	gate.SetLimit(n)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	for k := range int64(keys) {
		if count[k] != 1 {
			t.Fatalf("key %d's timer fired %d times", k, count[k])
		}
	}

	// Second run, on a store of its own: the timers are due a second
	// after the keys' first records, the job stops with a savepoint that
	// holds them, and resumes once they are due.
	mu.Lock()
	clear(count)
	mu.Unlock()
	store = snapshots.NewMem()
	gate2 := testsrc.NewGate(n / 2)
	delay := time.Second
	job, err = actors.Start(ctx, procJob(gate2, n, keys, delay, sink), actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate2.WaitReached(t, n/2)
	if _, err := job.StopWithSavepoint(ctx, "timers-pending"); err != nil {
		t.Fatal(err)
	}
	_ = job.Wait()
	pending := savepointTimers(ctx, t, store, "timers-pending")
	mu.Lock()
	firedBefore := len(count)
	mu.Unlock()
	if pending+firedBefore != keys {
		t.Fatalf("the savepoint holds %d timers and %d fired before it, want %d in all", pending, firedBefore, keys)
	}
	// The pending timers are due at most delay after the savepoint: wait
	// for the wall clock to pass that, so that they are due while down.
	<-time.After(delay)
	gate2.SetLimit(n)
	runToEnd(ctx, t, procJob(gate2, n, keys, delay, sink), actors.WithStore(store), actors.WithSavepoint("timers-pending"))
	mu.Lock()
	defer mu.Unlock()
	oncePerKey(t, count, keys, "after the resume")
	t.Logf("%d timers pending in the savepoint, %d fired before it", pending, firedBefore)
}

// Timers are redistributed with their keys: a job with pending event-time
// timers is stopped with savepoints and resumed at parallelism 1, 3 and 2,
// and every timer fires exactly once, on the task that owns its key.
func TestTimersRescale(t *testing.T) {
	const n, keys = 3000, 40
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	store := snapshots.NewMem()
	gate := testsrc.NewGate(n / 3)
	var mu sync.Mutex
	owner := map[int64]string{} // key -> the task that last processed a record of it
	fired := map[int64]int{}
	var problems []string
	build := func(p int) *topology.Graph {
		g := topology.New("timers-rescale")
		src := topology.FromSource(g, "src", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} },
			topology.WithWatermarks(topology.WatermarkStrategy[int64]{Timestamp: func(v int64) time.Time { return etBase.Add(time.Duration(v) * time.Millisecond) }}))
		out := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % keys }), "timers",
			func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
				topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[int64]) error {
					mu.Lock()
					defer mu.Unlock()
					fired[ctx.Key()]++
					if o := owner[ctx.Key()]; o != ctx.TaskID() {
						problems = append(problems, fmt.Sprintf("key %d's timer fired on %s, its records went to %s", ctx.Key(), ctx.TaskID(), o))
					}
					out.Emit(ctx.Key())
					return nil
				})
				return func(ctx *topology.Context[int64], v int64, _ *topology.Collector[int64]) error {
					mu.Lock()
					owner[ctx.Key()] = ctx.TaskID()
					mu.Unlock()
					// Registered in the first phase only, far in event
					// time: pending until the input ends, so every timer
					// that fires went through both rescales.
					if v <= n/3 {
						ctx.RegisterEventTimer(etBase.Add(time.Hour + time.Duration(ctx.Key())))
					}
					return nil
				}
			}, topology.Parallelism(p))
		topology.Sink(out, "sink", func(int64) error { return nil })
		return g
	}
	opts := func(extra ...actors.Option) []actors.Option {
		return append([]actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t))}, extra...)
	}
	job, err := actors.Start(ctx, build(1), opts()...)
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/3)
	if _, err := job.StopWithSavepoint(ctx, "p1"); err != nil {
		t.Fatal(err)
	}
	_ = job.Wait()
	gate.SetLimit(2 * n / 3)
	job, err = actors.Start(ctx, build(3), opts(actors.WithSavepoint("p1"))...)
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 2*n/3)
	if _, err := job.StopWithSavepoint(ctx, "p3"); err != nil {
		t.Fatal(err)
	}
	_ = job.Wait()
	mu.Lock()
	if len(fired) > 0 {
		t.Fatalf("timers fired before the input ended: %v", fired)
	}
	mu.Unlock()
	gate.SetLimit(n)
	job, err = actors.Start(ctx, build(2), opts(actors.WithSavepoint("p3"))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("%d problems, the first: %v", len(problems), problems[:min(5, len(problems))])
	}
	for k := range int64(keys) {
		if fired[k] != 1 {
			t.Fatalf("key %d's timer fired %d times, want 1", k, fired[k])
		}
	}
}

// An idle source holds no event time back: of two sources, one stops
// after 10 records, the other half-way; once both have read nothing for
// their idleness timeout, the operator is idle at the higher watermark,
// and the windows of the busier source close while both wait, each with
// its whole count. (A source that resumes after being idle may find its
// records late: that is what idleness trades.)
func TestIdleSourcesHoldNothingBack(t *testing.T) {
	const nA, nB, offB = 1000, 20000, 100000
	gateA, gateB := testsrc.NewGate(10), testsrc.NewGate(nB/2)
	idxA := func(v int64) int64 { return v - 1 }
	ref := map[windowKey]int64{} // the records read before the sources stop
	for v := int64(1); v <= 10; v++ {
		i := idxA(v)
		ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	for i := range int64(nB / 2) {
		ref[windowKey{(offB + i) % etUsers, etWindowEnd(etTime(offB + i)).UnixNano()}]++
	}
	late := make(chan struct{})
	var once sync.Once
	lateWindow := etTime(offB).UnixNano() // a window of source B's
	sink := newWindowSink(ref)
	sink.onWindow = func(w windowCount) {
		if w.End > lateWindow {
			once.Do(func() { close(late) })
		}
	}
	g := etJobFrom("idle", func(g *topology.Graph) topology.Stream[click] {
		source := func(name string, gate *testsrc.Gate, n int64, idx func(int64) int64) topology.Stream[click] {
			src := topology.FromSource(g, name, func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} },
				topology.WithWatermarks(topology.WatermarkStrategy[int64]{
					Timestamp:      func(v int64) time.Time { return etTime(idx(v)) },
					OutOfOrderness: 10 * time.Millisecond,
					IdleTimeout:    20 * time.Millisecond,
				}))
			return topology.Map(src, name+"-click", func(v int64) click { return click{User: idx(v) % etUsers, I: idx(v)} })
		}
		return topology.Union(source("a", gateA, nA, idxA), source("b", gateB, nB, func(v int64) int64 { return offB + v - 1 }))
	}, sink.bad, sink.out)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	job, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gateA.WaitReached(t, 10)
	gateB.WaitReached(t, nB/2)
	select {
	case <-late:
	case <-ctx.Done():
		t.Fatal("no window of the busier source closed while both sources were idle")
	}
	stopJob(t, job)
	t.Logf("%d windows closed while both sources were idle", sink.check(t, false))
}

// laggingSplits is a split source of the event-time test's clicks whose
// split k holds the clicks i with i % 2 == k, read in order; split 1 is
// read once for every ten reads of split 0, so it lags behind in event
// time, as a slow partition would.
type laggingSplits struct {
	next  [2]int64
	reads int
	told  [2]bool
}

func laggingSplitsSpec() topology.Splits {
	return topology.Splits{Initial: func(int) [][]byte {
		return [][]byte{binary.BigEndian.AppendUint64(nil, 0), binary.BigEndian.AppendUint64(nil, 1)}
	}}
}

func (s *laggingSplits) Open(_ context.Context, splits [][]byte) error {
	if len(splits) != 2 {
		return fmt.Errorf("%d splits, want 2", len(splits))
	}
	for k, b := range splits {
		s.next[k] = int64(binary.BigEndian.Uint64(b))
	}
	return nil
}

func (s *laggingSplits) ReadSplit(buf []click) (topology.SplitRead, error) {
	s.reads++
	k := 0
	if s.reads%11 == 0 || s.next[0] >= etEvents {
		k = 1
	}
	if s.next[k] >= etEvents {
		k = 1 - k
	}
	if s.next[k] >= etEvents {
		return topology.SplitRead{}, io.EOF
	}
	n := 0
	for n < len(buf) && s.next[k] < etEvents {
		buf[n] = click{User: s.next[k] % etUsers, I: s.next[k]}
		s.next[k] += 2
		n++
	}
	return topology.SplitRead{N: n, Split: k, Done: s.next[k] >= etEvents}, nil
}

func (s *laggingSplits) Read(buf []click) (int, error) {
	r, err := s.ReadSplit(buf)
	return r.N, err
}

func (s *laggingSplits) Splits() [][]byte {
	return [][]byte{binary.BigEndian.AppendUint64(nil, uint64(s.next[0])), binary.BigEndian.AppendUint64(nil, uint64(s.next[1]))}
}

func (s *laggingSplits) Close() error { return nil }

// oneWatermark hides a split source's ReadSplit: its task keeps one
// watermark over all its splits.
type oneWatermark struct{ topology.SplitSource[click] }

// A split source that reads one split at a time keeps a watermark per
// split: a lagging split holds event time back, so none of its records is
// late and every window's count is exact, with and without a failure
// that restores the splits' positions. The same source with one watermark
// per task makes the lagging split's records late, which the job's checks
// see: the test can fail.
func TestSplitWatermarks(t *testing.T) {
	ref := etReference()
	run := func(t *testing.T, perSplit, fail bool) *windowSink {
		sink := newWindowSink(ref)
		g := etJobFrom("splits", func(g *topology.Graph) topology.Stream[click] {
			return topology.FromSplits(g, "clicks", laggingSplitsSpec(), func(int, int) topology.SplitSource[click] {
				if perSplit {
					return &laggingSplits{}
				}
				return oneWatermark{&laggingSplits{}}
			}, topology.WithWatermarks(topology.WatermarkStrategy[click]{
				Timestamp:      func(c click) time.Time { return etTime(c.I) },
				OutOfOrderness: 10 * time.Millisecond,
			}))
		}, sink.bad, sink.out)
		opts := []actors.Option{actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(20 * time.Millisecond),
			actors.WithLogger(testLogger(t)), actors.WithBatchSize(64)}
		var failed atomic.Bool
		var batches atomic.Int64
		if fail {
			opts = append(opts, actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
				if task == "count#1" && batches.Add(1) == 40 && !failed.Swap(true) {
					panic("injected failure")
				}
			}}))
		}
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := actors.Run(ctx, g, opts...); err != nil {
			t.Fatal(err)
		}
		if fail && !failed.Load() {
			t.Fatal("the failure was never injected")
		}
		return sink
	}
	t.Run("per-split", func(t *testing.T) { run(t, true, false).check(t, true) })
	t.Run("per-split-failure", func(t *testing.T) { run(t, true, true).check(t, true) })
	t.Run("one-per-task", func(t *testing.T) {
		sink := run(t, false, false)
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.problems) == 0 {
			t.Fatal("with one watermark per task, no record of the lagging split was late: the test cannot tell")
		}
		t.Logf("one watermark per task: %d problems, the first: %s", len(sink.problems), sink.problems[0])
	})
}
