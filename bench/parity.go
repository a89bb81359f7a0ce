package main

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// parityResult is one run of the parity job.
type parityResult struct {
	records     int64
	elapsed     time.Duration
	checkpoints int
}

func (r parityResult) recordsPerSec() float64 { return float64(r.records) / r.elapsed.Seconds() }

// runParity runs the lecture's job over 1..n: a source, a keyed sum of
// parallelism 2 and a counting sink, with the given checkpoint interval
// (0: off) on store.
func runParity(ctx context.Context, n int64, interval time.Duration, store snapshots.Store) (parityResult, error) {
	g := topology.New("bench-parity", topology.MaxParallelism(2))
	src := topology.Sequence(g, "source", 1, n)
	keyed := topology.KeyByHash(src, func(v int64) int64 { return v % 2 }, func(k int64) uint64 { return uint64(k) })
	sums := topology.Process(keyed, "sum", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		total := topology.Value[int64](s, "total")
		return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			t, _ := total.Get()
			t += v
			total.Set(t)
			out.Emit(t)
			return nil
		}
	}, topology.Parallelism(2))
	var seen atomic.Int64
	topology.Sink(sums, "sink", func(int64) error { seen.Add(1); return nil })
	var completed atomic.Int64
	start := time.Now()
	err := actors.Run(ctx, g, actors.WithStore(store), actors.WithCheckpointInterval(interval),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted {
				completed.Add(1)
			}
		}))
	return parityResult{records: seen.Load(), elapsed: time.Since(start), checkpoints: int(completed.Load())}, err
}
