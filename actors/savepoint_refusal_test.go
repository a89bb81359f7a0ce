package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// savepointed runs shape at parallelism 2 until its sources reach limit,
// and stops it with savepoint "sp" in store.
func savepointed(t *testing.T, store snapshots.Store, shape rescaleShape, limit int64) uint64 {
	t.Helper()
	gate := testsrc.NewGate(limit)
	j, err := actors.Start(context.Background(), shape.build(2, gate, func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, limit)
	return stopWithSavepoint(t, j, "sp")
}

// TestSavepointRefusals: what Start refuses when starting from a savepoint,
// before any source opens, each with an error that names the operator,
// state or savepoint and says what to do.
func TestSavepointRefusals(t *testing.T) {
	shape := rescaleShape{job: "refuse", n: 1 << 40, maxP: 32}
	store := snapshots.NewMem()
	savepointed(t, store, shape, 3000)
	// A checkpoint of the job that is newer than the savepoint: a refused
	// savepoint must never fall back to it.
	gate := testsrc.NewGate(4000)
	j, err := actors.Start(context.Background(), shape.build(2, gate, func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithSavepoint("sp"), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 4000)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}

	stage1 := func(build func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64], opts ...topology.Option) func(*topology.Graph, topology.Stream[int64]) topology.Stream[int64] {
		return func(g *topology.Graph, in topology.Stream[int64]) topology.Stream[int64] {
			return topology.Process(topology.KeyBy(in, func(v int64) int64 { return v % rescaleKeys1 }), "stage1", build, opts...)
		}
	}
	counter := func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		topology.Value[int64](ks, "count")
		topology.Value[int64](ks, "sum")
		return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			out.Emit(v)
			return nil
		}
	}
	for _, c := range []struct {
		name   string
		maxP   int
		stage1 func(*topology.Graph, topology.Stream[int64]) topology.Stream[int64]
		opts   []actors.Option
		is     error
		want   []string
	}{
		{name: "max parallelism", maxP: 64, stage1: stage1(counter, topology.Parallelism(3)), is: topology.ErrRestoreRefused,
			want: []string{`savepoint "sp"`, `operator "stage1": max parallelism changed from 32 to 64`, "topology.MaxParallelism(32)"}},
		{name: "operator renamed without its id", stage1: func(g *topology.Graph, in topology.Stream[int64]) topology.Stream[int64] {
			return topology.Process(topology.KeyBy(in, func(v int64) int64 { return v % rescaleKeys1 }), "counts", counter)
		}, is: topology.ErrRestoreRefused,
			want: []string{`operator "stage1": the checkpoint holds its keyed state, but the job has no operator with that id`, `topology.OperatorID("stage1")`, "actors.WithAllowNonRestoredState"}},
		{name: "state type changed", stage1: stage1(func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			topology.Value[float64](ks, "count")
			topology.Value[int64](ks, "sum")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				out.Emit(v)
				return nil
			}
		}), is: topology.ErrIncompatibleState, want: []string{`operator "stage1"`, `state "count": value type changed from int64 to float64`}},
		{name: "savepoint missing", stage1: stage1(counter), opts: []actors.Option{actors.WithSavepoint("nope")}, is: snapshots.ErrNotFound,
			want: []string{`start from savepoint "nope"`, "snapflow savepoints list"}},
		{name: "invalid savepoint name", stage1: stage1(counter), opts: []actors.Option{actors.WithSavepoint("a/b")}, is: snapshots.ErrInvalidSavepointName,
			want: []string{`WithSavepoint("a/b")`}},
		{name: "checkpoint missing", stage1: stage1(counter), opts: []actors.Option{actors.WithCheckpoint(999)}, is: snapshots.ErrNotFound,
			want: []string{"start from checkpoint 999"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opened atomic.Int64
			g := topology.New(shape.job, topology.MaxParallelism(max(c.maxP, shape.maxP)))
			src := topology.FromSplits(g, "source-a", topology.Splits{Initial: func(p int) [][]byte { return make([][]byte, p) }},
				func(int, int) topology.SplitSource[int64] { opened.Add(1); return nil })
			topology.Sink(c.stage1(g, src), "sink", func(int64) error { return nil })
			opts := append([]actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithSavepoint("sp")}, c.opts...)
			j, err := actors.Start(context.Background(), g, opts...)
			if err == nil {
				_ = j.Stop()
				t.Fatal("Start accepted the savepoint")
			}
			if !errors.Is(err, c.is) {
				t.Errorf("Start: %v\ndoes not wrap %v", err, c.is)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Start: %v\ndoes not say %s", err, w)
				}
			}
			if opened.Load() != 0 {
				t.Error("a source was created before the refusal")
			}
		})
	}

	// WithAllowNonRestoredState drops the state of the missing operator id, and
	// says so.
	g := topology.New(shape.job, topology.MaxParallelism(shape.maxP))
	src := testsrc.GatedSplits(g, "source-a", 10, func(i int64) int64 { return i }, testsrc.NewGate(10))
	b := testsrc.GatedSplits(g, "source-b", 10, func(i int64) int64 { return i }, testsrc.NewGate(10))
	topology.Sink(topology.Union(src, b), "sink", func(int64) error { return nil })
	var logs syncBuilder
	j, err = actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(textLogger(&logs)),
		actors.WithSavepoint("sp"), actors.WithAllowNonRestoredState())
	if err != nil {
		t.Fatalf("WithAllowNonRestoredState: %v", err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "WithAllowNonRestoredState") || !strings.Contains(logs.String(), "stage1") {
		t.Errorf("the dropped state was not logged:\n%s", logs.String())
	}
}

// TestCorruptSavepointRefused: a savepoint with a corrupt object is refused
// with an error naming the object, never skipped for another checkpoint.
func TestCorruptSavepointRefused(t *testing.T) {
	shape := rescaleShape{job: "corrupt", n: 1 << 40, maxP: 16}
	store := snapshots.NewMem()
	savepointed(t, store, shape, 2000)
	key := savepointStateKey(t, store, shape.job, "sp", "stage1#1")
	data, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x40
	if err := store.Put(context.Background(), key, data); err != nil {
		t.Fatal(err)
	}
	_, err = actors.Start(context.Background(), shape.build(3, testsrc.NewGate(1), func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithSavepoint("sp"))
	if !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), `savepoint "sp"`) {
		t.Fatalf("Start from a corrupt savepoint: %v\nwant ErrCorrupt naming %s and the savepoint", err, key)
	}
}

// TestSavepointNameChecks: Savepoint refuses an invalid name and one a
// complete savepoint already has, and the job runs on.
func TestSavepointNameChecks(t *testing.T) {
	shape := rescaleShape{job: "names", n: 5000, maxP: 16}
	store := snapshots.NewMem()
	gate := testsrc.NewGate(1000)
	j, err := actors.Start(context.Background(), shape.build(2, gate, func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Savepoint(context.Background(), "one"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Savepoint(context.Background(), "one"); !errors.Is(err, snapshots.ErrSavepointExists) {
		t.Errorf("a second savepoint of the same name: %v", err)
	}
	if _, err := j.Savepoint(context.Background(), "../x"); !errors.Is(err, snapshots.ErrInvalidSavepointName) {
		t.Errorf("an invalid name: %v", err)
	}
	gate.SetLimit(shape.n)
	if err := waitJob(t, j); err != nil {
		t.Fatalf("the job after the refusals: %v", err)
	}
	if _, err := j.Savepoint(context.Background(), "late"); !errors.Is(err, actors.ErrFinished) {
		t.Errorf("a savepoint of a finished job: %v", err)
	}
}

// failingPuts fails every Put under prefix while armed.
type failingPuts struct {
	snapshots.Store
	prefix string
	armed  atomic.Bool
}

func (s *failingPuts) Put(ctx context.Context, key string, data []byte) error {
	if s.armed.Load() && strings.HasPrefix(key, s.prefix) {
		return errors.New("injected: the store refuses " + key)
	}
	return s.Store.Put(ctx, key, data)
}

// TestFailedSavepointKeepsJobRunning: a savepoint whose upload fails, and a
// stop-with-savepoint likewise, leave the job running (its sources produce
// again) and say why; the job then finishes with the exact result, and the
// failed savepoint is not complete.
func TestFailedSavepointKeepsJobRunning(t *testing.T) {
	shape := rescaleShape{job: "failsp", n: 6000, maxP: 16}
	mem := snapshots.NewMem()
	store := &failingPuts{Store: mem, prefix: snapshots.SavepointsPrefix(shape.job)}
	store.armed.Store(true)
	gate := testsrc.NewGate(1000)
	j, err := actors.Start(context.Background(), shape.build(2, gate, func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	if _, err := j.Savepoint(context.Background(), "bad"); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("Savepoint with failing uploads: %v, want the upload's error", err)
	}
	if _, err := j.StopWithSavepoint(context.Background(), "bad-stop"); err == nil || !strings.Contains(err.Error(), "injected") {
		t.Errorf("StopWithSavepoint with failing uploads: %v, want the upload's error", err)
	}
	store.armed.Store(false)
	// The name of a failed attempt can be used again: the clean-up of the
	// failed attempt never touches the new one's objects.
	retried, err := j.Savepoint(context.Background(), "bad")
	if err != nil {
		t.Fatalf("Savepoint again after a failed attempt: %v", err)
	}
	gate.SetLimit(shape.n)
	if err := waitJob(t, j); err != nil {
		t.Fatalf("the job after failed savepoints: %v", err)
	}
	if ok, err := j.Checkpoints().SavepointExists(context.Background(), "bad-stop"); ok || err != nil {
		t.Errorf("savepoint bad-stop: exists %t, %v", ok, err)
	}
	if sp, err := j.Checkpoints().LoadSavepoint(context.Background(), "bad"); err != nil || sp.Manifest.CheckpointId != retried {
		t.Errorf("the savepoint retried under a failed attempt's name, once every clean-up ran: %v, %v", sp, err)
	}
	rp, err := j.Checkpoints().LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("final checkpoint: %v %v", rp, err)
	}
	count1, _, sum2 := shape.want()
	assertEqualMaps(t, "stage1 count", states(t, rp, "stage1", "count"), count1)
	assertEqualMaps(t, "stage2 sum", states(t, rp, "stage2", "sum"), sum2)
}

// TestOriginWhenNewCheckpointsUnusable: a job started from a savepoint
// whose own checkpoints are all unusable (corrupt) resumes from the
// savepoint again, not from a checkpoint of its earlier history nor from
// nothing, and ends exact.
func TestOriginWhenNewCheckpointsUnusable(t *testing.T) {
	shape := rescaleShape{job: "origin", n: 8000, maxP: 16}
	store := snapshots.NewMem()
	savepointed(t, store, shape, 2000)
	gate := testsrc.NewGate(4000)
	j, err := actors.Start(context.Background(), shape.build(3, gate, func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithSavepoint("sp"), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 4000)
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	key := stateKey(t, store, shape.job, id, "stage1#0")
	data, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x10
	if err := store.Put(context.Background(), key, data); err != nil {
		t.Fatal(err)
	}
	var ev events
	j, err = actors.Start(context.Background(), shape.build(2, testsrc.NewGate(shape.n), func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Savepoint != "sp" {
		t.Fatalf("restarted from %+v, want savepoint sp", r)
	}
	rp, err := j.Checkpoints().LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("final checkpoint: %v %v", rp, err)
	}
	count1, _, sum2 := shape.want()
	assertEqualMaps(t, "stage1 count", states(t, rp, "stage1", "count"), count1)
	assertEqualMaps(t, "stage2 sum", states(t, rp, "stage2", "sum"), sum2)
}

// TestStopWithSavepointThenPlainRestart: a job stopped with a savepoint
// and started again without WithSavepoint resumes from the savepoint, not
// from its older checkpoints, and ends exact.
func TestStopWithSavepointThenPlainRestart(t *testing.T) {
	shape := rescaleShape{job: "plain-restart", n: 8000, maxP: 16}
	store := snapshots.NewMem()
	gate := testsrc.NewGate(3000)
	j, err := actors.Start(context.Background(), shape.build(2, gate, func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 3000)
	older, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(5000)
	gate.WaitReached(t, 5000)
	id := stopWithSavepoint(t, j, "stopped")
	var ev events
	j, err = actors.Start(context.Background(), shape.build(2, testsrc.NewGate(shape.n), func(int64) error { return nil }), actors.WithInlineStateLimit(0),
		actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Savepoint != "stopped" || r[0].Checkpoint != id {
		t.Fatalf("restarted from %+v, want savepoint stopped (checkpoint %d), not checkpoint %d", r, id, older)
	}
	rp, err := j.Checkpoints().LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("final checkpoint: %v %v", rp, err)
	}
	count1, _, sum2 := shape.want()
	assertEqualMaps(t, "stage1 count", states(t, rp, "stage1", "count"), count1)
	assertEqualMaps(t, "stage2 sum", states(t, rp, "stage2", "sum"), sum2)
}
