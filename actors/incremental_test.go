package actors_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// incrementalJob is a gated source of 1..n, keyed by v%keys into a sum per
// key (two tasks, 256 key groups), with a sink that drops everything.
// panicAt, when not 0, makes the sum panic once on that record.
func incrementalJob(n, keys int64, gate *testsrc.Gate, panicAt int64) *topology.Graph {
	g := topology.New("incremental", topology.MaxParallelism(256))
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} })
	keyed := topology.KeyBy(src, func(v int64) int64 { return v % keys })
	var panicked atomic.Bool
	sums := topology.Process(keyed, "sum", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		sum := topology.Value[int64](s, "sum")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			if v == panicAt && panicked.CompareAndSwap(false, true) {
				panic("injected: the sum fails once")
			}
			x, _ := sum.Get()
			sum.Set(x + v)
			return nil
		}
	}, topology.Parallelism(2))
	topology.Sink(sums, "sink", func(int64) error { return nil })
	return g
}

// sums reads the sum of every key out of checkpoint h of the job.
func sums(t *testing.T, cps *snapshots.Checkpoints, m *messages.Manifest) map[int64]int64 {
	t.Helper()
	got := map[int64]int64{}
	for _, e := range m.GetTasks() {
		if e.GetOperator() != "sum" {
			continue
		}
		st, err := cps.ReadTaskState(context.Background(), e.GetState())
		if err != nil {
			t.Fatalf("read the state of %s: %v", e.GetTaskId(), err)
		}
		part, err := topology.DecodeValueState[int64, int64](st, "sum")
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(got, part)
	}
	return got
}

func wantSums(n, keys int64) map[int64]int64 {
	want := map[int64]int64{}
	for v := int64(1); v <= n; v++ {
		want[v%keys] += v
	}
	return want
}

// TestIncrementalCheckpoints: with incremental checkpoints, a checkpoint
// taken while nothing changed stores a small object per task and
// references the rest; one after a single record stores only what it
// changed; retention keeping one checkpoint leaves every referenced object
// in place; and the state read back from each checkpoint is the whole
// state.
func TestIncrementalCheckpoints(t *testing.T) {
	const n, keys = 4000, 1000
	gate := testsrc.NewGate(2000)
	completed := make(chan actors.Event, 64)
	store := snapshots.NewMem()
	j, err := actors.Start(context.Background(), incrementalJob(n, keys, gate, 0), actors.WithStore(store),
		actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0), actors.WithIncrementalCheckpoints(1000),
		actors.WithInlineStateLimit(0), actors.WithRetainedCheckpoints(1),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted {
				completed <- e
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	checkpoint := func(limit int64) actors.Event {
		t.Helper()
		id, err := j.Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		e := <-completed
		if e.Checkpoint != id {
			t.Fatalf("completed %d, want %d", e.Checkpoint, id)
		}
		m, err := j.Checkpoints().ReadManifest(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := sums(t, j.Checkpoints(), m), wantSums(limit, keys); !maps.Equal(got, want) {
			t.Fatalf("checkpoint %d: the sums read back differ from those of records 1..%d (%d keys, want %d)", id, limit, len(got), len(want))
		}
		return e
	}
	sumTasks := func(e actors.Event) (uploaded, bytes uint64) {
		for _, tc := range e.Tasks {
			if tc.Task == "sum#0" || tc.Task == "sum#1" {
				uploaded += tc.Uploaded
				bytes += tc.Bytes
			}
		}
		return uploaded, bytes
	}
	gate.WaitReached(t, 2000)
	first := checkpoint(2000)
	if up, b := sumTasks(first); up < b {
		t.Fatalf("the first checkpoint stored %d of its %d bytes: it has no base, it must be full", up, b)
	}
	idle := checkpoint(2000)
	up, b := sumTasks(idle)
	if up == 0 || up*10 > b {
		t.Fatalf("with nothing changed, the sum tasks stored %d of %d bytes; want a small part (rewrites of 1 key group per task)", up, b)
	}
	gate.SetLimit(2001)
	gate.WaitReached(t, 2001)
	one := checkpoint(2001)
	if up1, b1 := sumTasks(one); up1 == 0 || up1*10 > b1 {
		t.Fatalf("after one record, the sum tasks stored %d of %d bytes", up1, b1)
	}
	// Retention kept one checkpoint: the objects of the first, which the
	// newest references, are still in the store.
	keys1, err := store.List(context.Background(), snapshots.CheckpointPrefix("incremental", first.Checkpoint))
	if err != nil || len(keys1) == 0 {
		t.Fatalf("the objects of checkpoint %d, referenced by the newest, are gone (%v, %v)", first.Checkpoint, keys1, err)
	}
	for range 3 {
		checkpoint(2001)
	}
	gate.SetLimit(n)
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	r, err := j.Checkpoints().LoadLatest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := sums(t, j.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
		t.Fatal("the final checkpoint's sums differ from those of a failure-free run")
	}
}

// TestIncrementalRecovery: a failure after incremental checkpoints rolls
// back to one whose state spans several checkpoints' objects; the final
// state equals a failure-free run's.
func TestIncrementalRecovery(t *testing.T) {
	const n, keys = 6000, 1000
	gate := testsrc.NewGate(2000)
	restored := make(chan uint64, 8)
	store := snapshots.NewMem()
	j, err := actors.Start(context.Background(), incrementalJob(n, keys, gate, 3000), actors.WithStore(store),
		actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0), actors.WithIncrementalCheckpoints(1000),
		actors.WithInlineStateLimit(0), actors.WithRetainedCheckpoints(1),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventRestoring {
				restored <- e.Checkpoint
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	gate.WaitReached(t, 2000)
	for _, limit := range []int64{2000, 2100, 2200} {
		if limit > 2000 {
			gate.SetLimit(limit)
			gate.WaitReached(t, limit)
		}
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	gate.SetLimit(n) // record 3000 fails the sum once
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-restored:
		if id != 3 {
			t.Fatalf("recovery restored checkpoint %d, want 3 (the newest, incremental)", id)
		}
	default:
		t.Fatal("the injected failure caused no restore")
	}
	r, err := j.Checkpoints().LoadLatest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := sums(t, j.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
		t.Fatal("after the recovery, the final sums differ from those of a failure-free run")
	}
}

// TestIncrementalOptionRefused: a negative rewriteEvery is refused at
// Start, naming the option.
func TestIncrementalOptionRefused(t *testing.T) {
	g := incrementalJob(1, 1, testsrc.NewGate(1), 0)
	_, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithIncrementalCheckpoints(-1))
	if err == nil || !strings.Contains(err.Error(), "WithIncrementalCheckpoints(-1)") {
		t.Fatalf("Start with WithIncrementalCheckpoints(-1) = %v", err)
	}
	_, err = actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithInlineStateLimit(-5))
	if err == nil || !strings.Contains(err.Error(), "WithInlineStateLimit(-5)") {
		t.Fatalf("Start with WithInlineStateLimit(-5) = %v", err)
	}
	_, err = actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithInlineStateLimit(actors.MaxInlineStateLimit+1))
	if err == nil || !strings.Contains(err.Error(), "WithInlineStateLimit(") {
		t.Fatalf("Start with WithInlineStateLimit above the maximum = %v", err)
	}
}

// TestRestoreFallsBackOnCorruptKeyGroup: a restore streams each task's key
// groups and checks them; one corrupt key group in the newest checkpoint
// (whose manifest and state heads are intact) fails that restore, and
// recovery falls back to the checkpoint before it, without counting a
// failure against the restart strategy, so that the job still ends with a
// failure-free run's state.
func TestRestoreFallsBackOnCorruptKeyGroup(t *testing.T) {
	ctx := context.Background()
	const n, keys = 3000, 1000
	store := snapshots.NewMem()
	gate := testsrc.NewGate(1000)
	j, err := actors.Start(ctx, incrementalJob(n, keys, gate, 0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithInlineStateLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	if _, err := j.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(2000)
	gate.WaitReached(t, 2000)
	newest, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Stop: %v", err)
	}
	m, err := j.Checkpoints().ReadManifest(ctx, newest)
	if err != nil {
		t.Fatal(err)
	}
	var h *messages.StateHandle
	for _, e := range m.GetTasks() {
		if e.GetTaskId() == "sum#1" {
			h = e.GetState()
		}
	}
	if h == nil || len(h.GetKeyGroups()) == 0 {
		t.Fatalf("checkpoint %d holds no key groups for sum#1", newest)
	}
	data, err := store.Get(ctx, h.GetKey())
	if err != nil {
		t.Fatal(err)
	}
	sec := h.GetKeyGroups()[len(h.GetKeyGroups())/2]
	data = append([]byte(nil), data...)
	data[sec.GetOffset()+sec.GetLength()-1] ^= 0xff // the last byte of one key group's entries
	if err := store.Put(ctx, h.GetKey(), data); err != nil {
		t.Fatal(err)
	}
	var ev events
	// No restart allowed: falling back from a damaged checkpoint is not a
	// failure of the job.
	j2, err := actors.Start(ctx, incrementalJob(n, keys, testsrc.NewGate(n), 0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithInlineStateLimit(0), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}))
	if err != nil {
		t.Fatalf("Start: %v (the manifest and the heads are intact: the damage shows when the key groups are read)", err)
	}
	if err := j2.Wait(); err != nil {
		t.Fatal(err)
	}
	var from []uint64
	for _, e := range ev.of(actors.EventRestoring) {
		from = append(from, e.Checkpoint)
	}
	if len(from) == 0 || from[len(from)-1] != newest-1 {
		t.Fatalf("restores from checkpoints %v; want the last from %d, the one before the damaged %d", from, newest-1, newest)
	}
	failed := ev.of(actors.EventTaskFailed)
	if len(failed) == 0 || failed[0].Cause != actors.CauseRestore || !errors.Is(failed[0].Err, snapshots.ErrCorrupt) {
		t.Fatalf("failures %+v; want a restore failure wrapping ErrCorrupt first", failed)
	}
	r, err := j2.Checkpoints().LoadLatest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sums(t, j2.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
		t.Fatal("after falling back, the final sums differ from those of a failure-free run")
	}
}
