package actors_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

var seedFlag = flag.Uint64("seed", 0, "seed of the random failure tests (0: from the clock, or SNAPFLOW_SEED)")

func testSeed(t *testing.T) uint64 {
	seed := *seedFlag
	if s := os.Getenv("SNAPFLOW_SEED"); seed == 0 && s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SNAPFLOW_SEED: %v", err)
		}
		seed = v
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (replay with -seed=%d)", seed, seed)
	return seed
}

// shape builds a topology under test and returns the expected final "total"
// state of its operator "sum" for a failure-free run.
type shape struct {
	name  string
	n     int64
	build func(g *topology.Graph, n int64, fail *failures) *latest
	want  func(n int64) map[int64]int64 // nil: no closed form
	// pick returns a record value the operator "sum" sees.
	pick func(rng *rand.Rand, n int64) int64
}

func sumsBy(values func(yield func(int64)), key func(int64) int64) map[int64]int64 {
	out := map[int64]int64{}
	values(func(v int64) { out[key(v)] += v })
	return out
}

var shapes = []shape{
	{
		name: "chain",
		n:    200_000,
		build: func(g *topology.Graph, n int64, fail *failures) *latest {
			src := topology.Sequence(g, "source", 1, n)
			tripled := topology.Map(src, "triple", func(v int64) int64 { return 3 * v })
			even := topology.Filter(tripled, "drop-multiples-of-5", func(v int64) bool { return v%5 != 0 })
			out := newLatest()
			topology.Sink(keyedSum(topology.KeyBy(even, func(v int64) int64 { return v % 7 }), "sum", 2, fail), "sink", out.put)
			return out
		},
		want: func(n int64) map[int64]int64 {
			return sumsBy(func(yield func(int64)) {
				for v := int64(1); v <= n; v++ {
					if 3*v%5 != 0 {
						yield(3 * v)
					}
				}
			}, func(v int64) int64 { return v % 7 })
		},
		pick: func(rng *rand.Rand, n int64) int64 {
			for {
				if v := 1 + rng.Int64N(n); 3*v%5 != 0 {
					return 3 * v
				}
			}
		},
	},
	{
		name: "fanout",
		n:    200_000,
		build: func(g *topology.Graph, n int64, fail *failures) *latest {
			src := topology.Sequence(g, "source", 1, n)
			sums := keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % 16 }), "sum", 4, fail)
			// Second keyed stage: the sum of the running sums per key % 3.
			rs := topology.Map(sums, "running", func(x kv) int64 { return x.Sum*4 + x.Key%3 })
			out := newLatest()
			topology.Sink(keyedSum(topology.KeyBy(rs, func(v int64) int64 { return v % 4 }), "sum2", 2, nil), "sink", out.put)
			return out
		},
		pick: func(rng *rand.Rand, n int64) int64 { return 1 + rng.Int64N(n) },
	},
	{
		name: "union",
		n:    100_000,
		build: func(g *topology.Graph, n int64, fail *failures) *latest {
			a := topology.Sequence(g, "odds", 1, n, topology.Parallelism(2))
			b := topology.Generate(g, "evens", n, func(i int64) int64 { return n + 1 + i })
			u := topology.Union(topology.Filter(a, "odd", func(v int64) bool { return v%2 == 1 }), b)
			out := newLatest()
			topology.Sink(keyedSum(topology.KeyBy(u, func(v int64) int64 { return v % 11 }), "sum", 3, fail), "sink", out.put)
			return out
		},
		want: func(n int64) map[int64]int64 {
			return sumsBy(func(yield func(int64)) {
				for v := int64(1); v <= n; v++ {
					if v%2 == 1 {
						yield(v)
					}
				}
				for i := int64(0); i < n; i++ {
					yield(n + 1 + i)
				}
			}, func(v int64) int64 { return v % 11 })
		},
		pick: func(rng *rand.Rand, n int64) int64 {
			if v := 1 + rng.Int64N(2*n); v > n || v%2 == 1 {
				return v
			}
			return n + 1 + rng.Int64N(n)
		},
	},
}

// failuresPerRun is the number of record values at which the operator "sum"
// panics once in each faulty run.
const failuresPerRun = 8

// TestRandomFailures injects operator panics at seeded random records, with a
// checkpoint every 20ms, and checks that the final state and the sink's
// output equal those of a failure-free run.
func TestRandomFailures(t *testing.T) {
	seed := testSeed(t)
	for i, sh := range shapes {
		t.Run(sh.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, uint64(i)))
			var at []int64
			for range failuresPerRun {
				at = append(at, sh.pick(rng, sh.n))
			}
			t.Logf("failing on records %v", at)
			clean := runShape(t, sh, nil)
			fail := newFailures(at...)
			faulty := runShape(t, sh, fail)
			if got := fail.injected.Load(); got != int64(len(fail.at)) {
				t.Fatalf("%d failures injected, want %d", got, len(fail.at))
			}
			assertEqualMaps(t, "final state with failures vs without", faulty.state, clean.state)
			assertEqualMaps(t, "sink with failures vs without", faulty.sink, clean.sink)
			if sh.want != nil {
				assertEqualMaps(t, "final state vs closed form", clean.state, sh.want(sh.n))
			}
			t.Logf("%d failures injected, %d restores, %d checkpoints completed", fail.injected.Load(), faulty.restores, faulty.completed)
		})
	}
}

type shapeResult struct {
	state, sink         map[int64]int64
	restores, completed int
}

func runShape(t *testing.T, sh shape, fail *failures) shapeResult {
	t.Helper()
	store := snapshots.NewMem()
	g := topology.New(sh.name)
	out := sh.build(g, sh.n, fail)
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(20*time.Millisecond), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond, MaxFailures: 20}))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	op := "sum"
	if sh.name == "fanout" {
		op = "sum2"
		assertEqualMaps(t, "first stage", finalTotals(t, store, sh.name, "sum"), sumsBy(func(yield func(int64)) {
			for v := int64(1); v <= sh.n; v++ {
				yield(v)
			}
		}, func(v int64) int64 { return v % 16 }))
	}
	return shapeResult{
		state: finalTotals(t, store, sh.name, op), sink: out.snapshot(),
		restores: ev.count(actors.EventRestoring), completed: ev.count(actors.EventCheckpointCompleted),
	}
}

// TestStopAndResume stops a job mid-run and starts it again on the same
// store: it resumes from the newest complete checkpoint and ends exact.
func TestStopAndResume(t *testing.T) {
	const n = 30_000
	store := snapshots.NewMem()
	build := func(gate *testsrc.Gate) (*topology.Graph, *latest) { return paritySumJob("resume", n, gate, nil) }
	gate := testsrc.NewGate(n / 3)
	g, _ := build(gate)
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/3)
	first, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(2 * n / 3)
	gate.WaitReached(t, 2*n/3)
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Stop: %v, want ErrStopped", err)
	}

	var ev events
	g2, out := build(testsrc.NewGate(n))
	j2, err := actors.Start(context.Background(), g2, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j2); err != nil {
		t.Fatal(err)
	}
	running := ev.of(actors.EventRunning)
	if len(running) == 0 || running[0].Checkpoint != first {
		t.Fatalf("second run started from %+v, want checkpoint %d", running, first)
	}
	want := parityWant(n)
	assertEqualMaps(t, "final state", finalTotals(t, store, "resume", "sum"), want)
	// The sink saw the second run only: its newest sums are the final ones.
	assertEqualMaps(t, "sink", out.snapshot(), want)
}

// TestCorruptStateFallsBack corrupts a state object of the newest checkpoint:
// the next start logs it and resumes from the previous checkpoint.
func TestCorruptStateFallsBack(t *testing.T) {
	const n = 30_000
	dir := t.TempDir()
	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	build := func(gate *testsrc.Gate) (*topology.Graph, *latest) { return paritySumJob("corrupt", n, gate, nil) }
	gate := testsrc.NewGate(1000)
	g, _ := build(gate)
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	older, newer := twoCheckpoints(t, j, gate)
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	key := stateKey(t, store, "corrupt", newer, "sum#1")
	if err := store.Put(context.Background(), key, []byte("garbage, not a state")); err != nil {
		t.Fatal(err)
	}

	var logs syncBuilder
	var ev events
	g2, out := build(testsrc.NewGate(n))
	j2, err := actors.Start(context.Background(), g2, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(textLogger(&logs)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j2); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != older {
		t.Fatalf("resumed from %+v, want the older checkpoint %d", r, older)
	}
	if !strings.Contains(logs.String(), key) {
		t.Errorf("the log does not name the corrupt object %s:\n%s", key, logs.String())
	}
	want := map[int64]int64{0: paritySum(n, 0), 1: paritySum(n, 1)}
	assertEqualMaps(t, "final state", finalTotals(t, store, "corrupt", "sum"), want)
	assertEqualMaps(t, "sink", out.snapshot(), want)
}

// TestAlwaysPanickingOperator fails the job once its restart strategy is
// exhausted, with the root cause.
func TestAlwaysPanickingOperator(t *testing.T) {
	g := topology.New("doomed")
	src := topology.Sequence(g, "source", 1, 1000)
	boom := topology.Map(src, "boom", func(v int64) int64 { panic("boom at " + strconv.FormatInt(v, 10)) })
	topology.Sink(boom, "sink", func(int64) error { return nil })
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, MaxFailures: 3, Window: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	err = waitJob(t, j)
	var je *actors.JobError
	if !errors.As(err, &je) {
		t.Fatalf("Wait: %v, want a *JobError", err)
	}
	var te *actors.TaskError
	if !errors.As(err, &te) {
		t.Fatalf("Wait: %v, want a *TaskError cause", err)
	}
	if te.Task != "boom#0" || te.Operator != "boom" || te.Value != "boom at 1" {
		t.Errorf("cause: task %q operator %q value %v", te.Task, te.Operator, te.Value)
	}
	if !strings.Contains(string(te.Stack), "TestAlwaysPanickingOperator") {
		t.Errorf("the stack does not show the operator function:\n%s", te.Stack)
	}
	if got := ev.count(actors.EventTaskFailed); got != 4 {
		t.Errorf("%d failures, want 4 (3 tolerated + 1)", got)
	}
	if !strings.Contains(err.Error(), "restart strategy exhausted") {
		t.Errorf("error does not say why: %v", err)
	}
}

// TestOperatorErrorRecovers: an error returned by an operator is a failure
// like a panic, and the job recovers from it.
func TestOperatorErrorRecovers(t *testing.T) {
	const n = 5000
	var failed bool
	g := topology.New("errors")
	src := topology.Sequence(g, "source", 1, n)
	fm := topology.FlatMap(src, "check", func(v int64, out *topology.Collector[int64]) error {
		if v == 4321 && !failed {
			failed = true // only touched by the one task of "check"
			return errors.New("transient problem")
		}
		out.Emit(v)
		return nil
	})
	store := snapshots.NewMem()
	topology.Sink(keyedSum(topology.KeyBy(fm, func(v int64) int64 { return v % 2 }), "sum", 1, nil), "sink", func(kv) error { return nil })
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	f := ev.of(actors.EventTaskFailed)
	if len(f) != 1 || !strings.Contains(f[0].Err.Error(), "transient problem") {
		t.Fatalf("failures: %+v", f)
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "errors", "sum"), map[int64]int64{0: paritySum(n, 0), 1: paritySum(n, 1)})
}

// TestFlappingTaskBacksOff: a task that fails at once after every restore is
// restarted only after the strategy's growing backoff, never in a busy loop.
func TestFlappingTaskBacksOff(t *testing.T) {
	p := restart.Policy{InitialBackoff: 4 * time.Millisecond, MaxBackoff: 32 * time.Millisecond, Multiplier: 2, Jitter: 0.2, MaxFailures: 7, Window: time.Minute}
	g := topology.New("flapping")
	src := topology.Sequence(g, "source", 1, 1000)
	topology.Sink(topology.Map(src, "flap", func(int64) int64 { panic("flap") }), "sink", func(int64) error { return nil })
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithListener(ev.listen), actors.WithRestartPolicy(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err == nil {
		t.Fatal("the flapping job did not fail")
	}
	fails := ev.of(actors.EventTaskFailed)
	if len(fails) != p.MaxFailures+1 {
		t.Fatalf("%d failures, want %d", len(fails), p.MaxFailures+1)
	}
	backoff := p.InitialBackoff
	for i := 1; i < len(fails); i++ {
		gap := fails[i].Time.Sub(fails[i-1].Time)
		if floor := time.Duration(float64(backoff) * (1 - p.Jitter)); gap < floor {
			t.Errorf("restart %d came %v after failure %d, before the backoff floor %v", i, gap, i, floor)
		}
		backoff = min(2*backoff, p.MaxBackoff)
	}
}

// TestSynchronousSnapshots: the stop-the-world mode takes consistent
// checkpoints too, and recovers exactly.
func TestSynchronousSnapshots(t *testing.T) {
	const n = 50_000
	gate := testsrc.NewGate(10_000)
	g, out := paritySumJob("sync", n, gate, newFailures(30_001))
	store := snapshots.NewMem()
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen),
		actorstest.WithSynchronousSnapshots(), actors.WithCheckpointInterval(2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	// Two checkpoints before the failure, however fast the machine.
	for _, limit := range []int64{10_000, 20_000} {
		gate.SetLimit(limit)
		gate.WaitReached(t, limit)
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if ev.count(actors.EventCheckpointCompleted) < 2 || ev.count(actors.EventRestoring) != 1 {
		t.Fatalf("%d checkpoints, %d restores", ev.count(actors.EventCheckpointCompleted), ev.count(actors.EventRestoring))
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "sync", "sum"), parityWant(n))
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}
