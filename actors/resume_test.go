package actors_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// jobShape is a variant of the parity job: a gated source of 1..n, an optional
// stateless map, a keyed sum and a sink.
type jobShape struct {
	srcP, mapP, sumP, maxP int    // 0: the default (no map for mapP)
	state                  string // name of the sum's state; "" is "total"
	float                  bool   // the state is a Value[float64]
	extra                  bool   // also declares a Value[int64] "count"
}

// openCounter counts the sources a job opens.
type openCounter struct {
	testsrc.Gated
	opened *atomic.Int64
}

func (c *openCounter) Open(ctx context.Context, off []byte) error {
	c.opened.Add(1)
	return c.Gated.Open(ctx, off)
}

// build returns the job "evolve" of jobShape s and how many sources it opened.
func (s jobShape) build(n int64, gate *testsrc.Gate) (*topology.Graph, *latest, *atomic.Int64) {
	var opts []topology.GraphOption
	if s.maxP > 0 {
		opts = append(opts, topology.MaxParallelism(s.maxP))
	}
	g := topology.New("evolve", opts...)
	opened := new(atomic.Int64)
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &openCounter{Gated: testsrc.Gated{N: n, Gate: gate}, opened: opened}
	}, topology.Parallelism(max(1, s.srcP)))
	if s.mapP > 0 {
		src = topology.Map(topology.Rebalance(src), "identity", func(v int64) int64 { return v }, topology.Parallelism(s.mapP))
	}
	name := s.state
	if name == "" {
		name = "total"
	}
	sums := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 2 }), "sum",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, kv] {
			var add func(int64) int64
			if s.float {
				total := topology.Value[float64](ks, name)
				add = func(v int64) int64 { t, _ := total.Get(); total.Set(t + float64(v)); return int64(t) + v }
			} else {
				total := topology.Value[int64](ks, name)
				add = func(v int64) int64 { t, _ := total.Get(); total.Set(t + v); return t + v }
			}
			var count *topology.ValueState[int64, int64]
			if s.extra {
				count = topology.Value[int64](ks, "count")
			}
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[kv]) error {
				if count != nil {
					c, _ := count.Get()
					count.Set(c + 1)
				}
				out.Emit(kv{ctx.Key(), add(v)})
				return nil
			}
		}, topology.Parallelism(max(1, s.sumP)))
	out := newLatest()
	topology.Sink(sums, "sink", out.put)
	return g, out, opened
}

// checkpointed runs the default jobShape until the source has emitted 1..1000,
// takes a checkpoint and stops, leaving the checkpoint in store.
func checkpointed(t *testing.T, store snapshots.Store, base jobShape) uint64 {
	t.Helper()
	gate := testsrc.NewGate(1000)
	g, _, _ := base.build(100_000, gate)
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	return id
}

// TestResumeRefusesInexactRestores: a checkpoint that cannot be restored
// exactly is refused by Start, before any source is opened, with an error
// that says what changed, even with WithAllowTopologyChange.
func TestResumeRefusesInexactRestores(t *testing.T) {
	base := jobShape{sumP: 2}
	for _, c := range []struct {
		name    string
		next    jobShape
		wantErr error
		want    string
	}{
		{"max parallelism", jobShape{sumP: 2, maxP: 64}, topology.ErrRestoreRefused, "max parallelism changed from 128 to 64"},
		// The test source keeps one offset per task: it cannot be rescaled.
		{"source parallelism", jobShape{srcP: 2, sumP: 2}, topology.ErrRestoreRefused,
			`operator "source": its source keeps one offset per task (a Source), which cannot be redistributed over 2 tasks: implement SplitSource`},
		// The state declarations are not part of the topology's fingerprint:
		// these are refused without WithAllowTopologyChange too.
		{"state type", jobShape{sumP: 2, float: true}, topology.ErrIncompatibleState, `"total"`},
		{"state removed", jobShape{sumP: 2, state: "sum"}, topology.ErrIncompatibleState, `"total"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := snapshots.NewMem()
			checkpointed(t, store, base)
			g, _, opened := c.next.build(100_000, testsrc.NewGate(100_000))
			opts := []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t))}
			if !c.next.float && c.next.state == "" {
				opts = append(opts, actors.WithAllowTopologyChange())
			}
			j, err := actors.Start(context.Background(), g, opts...)
			if err == nil {
				_ = j.Stop()
				t.Fatal("Start accepted the checkpoint")
			}
			if !errors.Is(err, c.wantErr) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Start: %v\nwant an error wrapping %v that says %s", err, c.wantErr, c.want)
			}
			if n := opened.Load(); n != 0 {
				t.Fatalf("%d sources were opened before the refusal", n)
			}
		})
	}
}

// TestResumeAllowsSafeChanges: a new state, and a stateless operator added
// at another parallelism, restore exactly.
func TestResumeAllowsSafeChanges(t *testing.T) {
	const n = 20_000
	for _, c := range []struct {
		name  string
		next  jobShape
		allow bool
	}{
		{"new state", jobShape{sumP: 2, extra: true}, false},
		{"new stateless operator", jobShape{sumP: 2, mapP: 3}, true},
		// With WithAllowTopologyChange keyed state is redistributed.
		{"lower parallelism", jobShape{sumP: 1}, true},
		{"higher parallelism", jobShape{sumP: 4}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := snapshots.NewMem()
			id := checkpointed(t, store, jobShape{sumP: 2})
			g, out, _ := c.next.build(n, testsrc.NewGate(n))
			opts := []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t))}
			if c.allow {
				opts = append(opts, actors.WithAllowTopologyChange())
			}
			var ev events
			j, err := actors.Start(context.Background(), g, append(opts, actors.WithListener(ev.listen))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != id {
				t.Fatalf("resumed from %+v, want checkpoint %d", r, id)
			}
			assertEqualMaps(t, "final state", finalTotals(t, store, "evolve", "sum"), parityWant(n))
			assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
		})
	}
}

// TestFinishedJobStartedAgain: a job that ran to the end is not resumed
// silently: Start says so, and WithStartOver runs it again from the start.
func TestFinishedJobStartedAgain(t *testing.T) {
	const n = 5_000
	store := snapshots.NewMem()
	run := func(opts ...actors.Option) (*latest, *events, error) {
		g, out := paritySumJob("again", n, testsrc.NewGate(n), nil)
		var ev events
		j, err := actors.Start(context.Background(), g, append([]actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen)}, opts...)...)
		if err != nil {
			return nil, nil, err
		}
		return out, &ev, waitJob(t, j)
	}
	if _, _, err := run(); err != nil {
		t.Fatal(err)
	}
	_, _, err := run()
	if !errors.Is(err, actors.ErrAlreadyFinished) || !strings.Contains(err.Error(), "WithStartOver") {
		t.Fatalf("second Start: %v, want ErrAlreadyFinished naming WithStartOver", err)
	}
	out, ev, err := run(actors.WithStartOver())
	if err != nil {
		t.Fatalf("Start with WithStartOver: %v", err)
	}
	if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != 0 {
		t.Fatalf("WithStartOver resumed from %+v, want the beginning", r)
	}
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
	assertEqualMaps(t, "final state", finalTotals(t, store, "again", "sum"), parityWant(n))
}

// TestNilStoreRefused: a nil store, or a nil *Dir from a failed NewDir, is
// refused by Start instead of panicking or falling back to a default.
func TestNilStoreRefused(t *testing.T) {
	var dir *snapshots.Dir
	for _, c := range []struct {
		store snapshots.Store
		want  string
	}{
		{nil, "store is nil"},
		{dir, "*snapshots.Dir"},
	} {
		g, _ := paritySumJob("nil", 10, testsrc.NewGate(10), nil)
		j, err := actors.Start(context.Background(), g, actors.WithStore(c.store))
		if err == nil {
			_ = j.Stop()
			t.Fatalf("Start with WithStore(%#v) succeeded", c.store)
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "WithStore") {
			t.Fatalf("Start with WithStore(%#v): %v; want it to name WithStore and %q", c.store, err, c.want)
		}
	}
}

// TestDefaultStore: without WithStore a job keeps its checkpoints in
// snapshots.DefaultDir, the directory snapshots.Open("") opens.
func TestDefaultStore(t *testing.T) {
	t.Chdir(t.TempDir())
	const n = 3_000
	g, _ := paritySumJob("default", n, testsrc.NewGate(n), nil)
	if err := actors.Run(context.Background(), g, actors.WithLogger(testLogger(t))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(snapshots.DefaultDir, "default", "checkpoints")); err != nil {
		t.Fatalf("no checkpoints in the default directory: %v", err)
	}
	store, err := snapshots.Open(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "default", "sum"), parityWant(n))
}

// TestNoRestarts: restart.NoRestarts fails the job at the first failure.
func TestNoRestarts(t *testing.T) {
	g, _ := paritySumJob("norestart", 10_000, testsrc.NewGate(10_000), newFailures(500))
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithListener(ev.listen), actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}))
	if err != nil {
		t.Fatal(err)
	}
	err = waitJob(t, j)
	var je *actors.JobError
	if !errors.As(err, &je) || !strings.Contains(je.Reason, "restarts are disabled") || !strings.Contains(err.Error(), "record 500") {
		t.Fatalf("Wait: %v, want a JobError saying restarts are disabled, caused by the failure on 500", err)
	}
	if n := ev.count(actors.EventRestoring); n != 0 {
		t.Fatalf("%d restores with NoRestarts", n)
	}
}

// blockingSource emits 1..100, then blocks in Read until the context given
// to Open is done.
type blockingSource struct {
	ctx     context.Context
	next    int64
	blocked chan struct{}
}

func (b *blockingSource) Open(ctx context.Context, _ []byte) error { b.ctx = ctx; return nil }
func (b *blockingSource) Read(buf []int64) (int, error) {
	if b.next < 100 {
		n := 0
		for n < len(buf) && b.next < 100 {
			b.next++
			buf[n] = b.next
			n++
		}
		return n, nil
	}
	select {
	case b.blocked <- struct{}{}:
	default:
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}
func (b *blockingSource) Offset() []byte { return nil }
func (b *blockingSource) Close() error   { return nil }

// TestStopInterruptsBlockedSource: Stop cancels the context a source got in
// Open, so a Read blocked on it returns, and Stop does not wait for it.
func TestStopInterruptsBlockedSource(t *testing.T) {
	blocked := make(chan struct{}, 1)
	g := topology.New("blocked")
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &blockingSource{blocked: blocked} })
	topology.Sink(src, "sink", func(int64) error { return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	stopped := make(chan error, 1)
	go func() { stopped <- j.Stop() }()
	if err := waitJob(t, j); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Wait: %v, want ErrStopped", err)
	}
	if err := <-stopped; !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Stop: %v", err)
	}
}
