package actors_test

import (
	"context"
	"errors"
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
