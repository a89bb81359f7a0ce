package actors_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestSinkBatch: a batch sink behind a keyed sum of 0..n-1 with checkpoints and one
// failure receives batches of at most the batch size, never empty, and
// ends with every key's exact total (records replayed after the restore
// are written again, and the latest value per key is the final one).
func TestSinkBatch(t *testing.T) {
	const n, batch = 20000, 64
	g := topology.New("sinkbatch")
	fail := newFailures(12345)
	sums := keyedSum(topology.KeyBy(topology.Sequence(g, "source", 0, n-1), func(v int64) int64 { return v % 10 }), "sum", 2, fail)
	out := newLatest()
	var batches, largest, empty atomic.Int64
	topology.SinkBatch(sums, "sink", func(kvs []kv) error {
		batches.Add(1)
		if len(kvs) == 0 {
			empty.Add(1)
		}
		for {
			old := largest.Load()
			if int64(len(kvs)) <= old || largest.CompareAndSwap(old, int64(len(kvs))) {
				break
			}
		}
		for _, v := range kvs {
			if err := out.put(v); err != nil {
				return err
			}
		}
		return nil
	})
	store := snapshots.NewMem()
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithBatchSize(batch), actors.WithCheckpointInterval(5*time.Millisecond),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxFailures: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	want := map[int64]int64{}
	for v := range int64(n) {
		want[v%10] += v
	}
	assertEqualMaps(t, "sink", out.snapshot(), want)
	if fail.injected.Load() != 1 {
		t.Errorf("%d failures injected, want 1", fail.injected.Load())
	}
	if largest.Load() > batch || empty.Load() > 0 || batches.Load() < n/batch {
		t.Errorf("%d batches, the largest of %d records, %d empty; want at least %d, none over %d, none empty", batches.Load(), largest.Load(), empty.Load(), n/batch, batch)
	}
}

// TestSinkBatchError: an error returned by a batch sink fails the job
// once the restart policy gives up, and the job's error wraps it.
func TestSinkBatchError(t *testing.T) {
	boom := errors.New("the database refused the batch")
	g := topology.New("sinkbatcherr")
	topology.SinkBatch(topology.Sequence(g, "source", 0, 1000), "sink", func([]int64) error { return boom })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 1, Window: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); !errors.Is(err, boom) {
		t.Fatalf("job ended with %v, want an error wrapping %q", err, boom)
	}
}

// TestSinkBatchBoundOnReplay: channel state stored by a job with batches of
// 64 is replayed into the same job with a batch size of 8, and its batch
// sink still gets at most 8 records at a time. Every value reaches the sink
// in one of the two runs.
func TestSinkBatchBoundOnReplay(t *testing.T) {
	const n, big, small = 5000, 64, 8
	ctx := context.Background()
	unaligned := actors.WithCheckpointMode(actors.CheckpointUnaligned)
	var mu sync.Mutex
	seen := map[int64]int{}
	var largest atomic.Int64
	job := func() *topology.Graph {
		g := topology.New("sinkbatch-replay")
		topology.SinkBatch(topology.Sequence(g, "source", 1, n), "sink", func(vs []int64) error {
			for {
				old := largest.Load()
				if int64(len(vs)) <= old || largest.CompareAndSwap(old, int64(len(vs))) {
					break
				}
			}
			mu.Lock()
			defer mu.Unlock()
			for _, v := range vs {
				seen[v]++
			}
			return nil
		})
		return g
	}
	// The first run stores channel state once one of its checkpoints is
	// triggered while the sink holds its first batch; a run may end before
	// that (the sink drains at once when released), and is then run again.
	var store *snapshots.Mem
	var id uint64
	longest := 0
	for attempt := 0; attempt < 20 && longest <= small; attempt++ {
		clear(seen)
		store = snapshots.NewMem()
		runCtx, cancel := context.WithCancel(ctx)
		var taken atomic.Uint64 // the first checkpoint that stored records in flight
		hold, release := holdUntilFull("sink#0", "source#0")
		j, err := actors.Start(runCtx, job(), hold, actors.WithStore(store), actors.WithLogger(testLogger(t)), unaligned,
			actors.WithBatchSize(big), actors.WithCheckpointInterval(2*time.Millisecond), actors.WithRetainedCheckpoints(1000),
			actors.WithListener(func(e actors.Event) {
				if e.Kind == actors.EventCheckpointCompleted && e.InFlight > 0 && taken.CompareAndSwap(0, e.Checkpoint) {
					cancel()
				}
			}))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		release(j)
		if err := j.Wait(); err != nil && !errors.Is(err, context.Canceled) { // canceled, or finished first
			cancel()
			t.Fatalf("first run: %v", err)
		}
		cancel()
		if id = taken.Load(); id == 0 {
			continue
		}
		rp, err := snapshots.NewCheckpoints(store, "sinkbatch-replay", nil).LoadCheckpoint(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range rp.States {
			for _, it := range st.InFlight {
				longest = max(longest, len(it.Ends))
			}
		}
	}
	if longest <= small {
		t.Fatalf("in 20 runs, no checkpoint stored a batch of over %d records in flight (the last: checkpoint %d, batches of up to %d)", small, id, longest)
	}
	largest.Store(0)
	replayed := &countLog{msg: "replaying the channel state of an unaligned checkpoint"}
	if err := actors.Run(ctx, job(), actors.WithStore(store), unaligned, actors.WithBatchSize(small),
		actors.WithLogger(slog.New(teeHandler{replayed, testLogger(t).Handler()})),
		actors.WithCheckpoint(id), actors.WithCheckpointInterval(2*time.Millisecond)); err != nil {
		t.Fatalf("resume from checkpoint %d: %v", id, err)
	}
	if replayed.n.Load() == 0 {
		t.Fatal("no task replayed channel state")
	}
	if largest.Load() > small {
		t.Errorf("after replaying batches of up to %d records, the sink got %d at once, want at most %d", longest, largest.Load(), small)
	}
	mu.Lock()
	defer mu.Unlock()
	for v := int64(1); v <= n; v++ {
		if seen[v] == 0 {
			t.Fatalf("value %d never reached the sink", v)
		}
	}
}
