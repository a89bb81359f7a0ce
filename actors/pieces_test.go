package actors_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
)

// TestBarrierSplitsSlowBatch: where barriers overtake, a task whose
// records are slow (1ms each here) processes its batches in pieces, and a
// barrier that arrives meanwhile waits for the piece in progress, not for
// the rest of the batch: the task snapshots part way through a batch, and
// stores the rest as channel state (unaligned) or processes it after its
// snapshot (aligned, switched by a timeout). Each value is counted once.
func TestBarrierSplitsSlowBatch(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []actors.Option
	}{
		{"unaligned", []actors.Option{actors.WithCheckpointMode(actors.CheckpointUnaligned)}},
		{"aligned-timeout", []actors.Option{actors.WithAlignmentTimeout(time.Millisecond)}},
	} {
		t.Run(c.name, func(t *testing.T) { testSplitsSlowBatch(t, c.opts...) })
	}
}

func testSplitsSlowBatch(t *testing.T, opts ...actors.Option) {
	const n, batch = 640, 64
	var job atomic.Pointer[actors.Job]
	var processed atomic.Int64
	const ckpts = 4
	results := make(chan error, ckpts)
	// The source holds at half the records until the checkpoints are done:
	// a source that has ended takes part in no checkpoint but the final one.
	gate := testsrc.NewGate(n / 2)
	g := countJob("pieces", n, gate, &processed, func(p int64) {
		time.Sleep(time.Millisecond) // a slow record (an external call, say); not a synchronisation
		// Checkpoints triggered while the task still has records to process.
		if p%60 == 0 && p <= 60*ckpts {
			if j := job.Load(); j != nil {
				go func() { _, err := j.Checkpoint(context.Background()); results <- err }()
			} else {
				results <- nil
			}
		}
	})

	var mu sync.Mutex
	atSnapshot := map[uint64]int64{}
	inFlight := map[uint64]uint64{}
	store := snapshots.NewMem()
	faults := &actorstest.Faults{Snapshot: func(task string, id uint64) {
		if task == "count#0" {
			mu.Lock()
			atSnapshot[id] = processed.Load()
			mu.Unlock()
		}
	}}
	j, err := actors.Start(context.Background(), g, append(opts, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithBatchSize(batch), actorstest.WithFaults(faults),
		actors.WithListener(func(e actors.Event) {
			if e.Kind != actors.EventCheckpointCompleted {
				return
			}
			for _, tc := range e.Tasks {
				if tc.Task == "count#0" {
					mu.Lock()
					inFlight[e.Checkpoint] = tc.InFlight
					mu.Unlock()
				}
			}
		}))...)
	if err != nil {
		t.Fatal(err)
	}
	job.Store(j)
	for range ckpts {
		if err := <-results; err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	}
	gate.SetLimit(n)
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	mid := 0
	for id, at := range atSnapshot {
		if at%batch != 0 && at < n {
			mid++
		}
		t.Logf("checkpoint %d: count snapshotted after %d records (%d into a batch of %d); %d bytes in flight", id, at, at%batch, batch, inFlight[id])
	}
	// A barrier lands on a batch's end by chance about once in 64.
	if mid < ckpts/2 {
		t.Errorf("%d of %d checkpoints snapshotted count part way through a batch, want at least 2", mid, len(atSnapshot))
	}
	counts := countsOf(t, store, "pieces", "count")
	for v := int64(1); v <= n; v++ {
		if counts[v] != 1 {
			t.Fatalf("count counted value %d %d times", v, counts[v])
		}
	}
}
