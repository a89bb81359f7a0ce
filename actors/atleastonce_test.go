package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// seenJob reads 1..n from a split source of parallelism 3 into a keyed
// operator of parallelism 2 (3 inputs per task) that counts, per key, how
// often it processed each value, failing once at each value of fail.
func seenJob(name string, n, keys int64, fail *failures) *topology.Graph {
	g := topology.New(name)
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i + 1 }, testsrc.NewGate(n), topology.Parallelism(3))
	seen := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % keys }), "seen",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			times := topology.MapOf[int64, int64](ks, "times")
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				fail.maybePanic(ctx.TaskID(), v)
				c, _ := times.Get(v)
				times.Put(v, c+1)
				return nil
			}
		}, topology.Parallelism(2))
	topology.Sink(seen, "sink", func(int64) error { return nil })
	return g
}

// seenCounts reads, from the job's final checkpoint, how often each value
// was counted.
func seenCounts(t *testing.T, store snapshots.Store, job string) map[int64]int64 {
	t.Helper()
	return countsOf(t, store, job, "seen")
}

// TestAtLeastOnceLosesNothing runs a job whose keyed tasks have three
// inputs, with failures and a checkpoint every 2ms: at least once, every
// value is counted at least once (duplicates are counted and reported);
// aligned, every value exactly once.
func TestAtLeastOnceLosesNothing(t *testing.T) {
	const n, keys = 30_000, 64
	for _, c := range []struct {
		name string
		mode actors.CheckpointMode
	}{{"at-least-once", actors.CheckpointAtLeastOnce}, {"aligned", actors.CheckpointAligned}} {
		t.Run(c.name, func(t *testing.T) {
			store := snapshots.NewMem()
			fail := newFailures(7_001, 15_002, 24_003)
			var ev events
			err := actors.Run(context.Background(), seenJob("seen", n, keys, fail), actors.WithStore(store), actors.WithLogger(testLogger(t)),
				actors.WithCheckpointInterval(2*time.Millisecond), actors.WithCheckpointMode(c.mode), actors.WithListener(ev.listen))
			if err != nil {
				t.Fatal(err)
			}
			if fail.injected.Load() != 3 {
				t.Fatalf("%d failures injected, want 3", fail.injected.Load())
			}
			got := seenCounts(t, store, "seen")
			var dups, lost int64
			for v := int64(1); v <= n; v++ {
				switch k := got[v]; {
				case k == 0:
					lost++
				case k > 1:
					dups += k - 1
				}
			}
			t.Logf("%s: %d values, %d restores, %d duplicates counted", c.name, n, ev.count(actors.EventRestoring), dups)
			if lost > 0 || int64(len(got)) != n {
				t.Fatalf("%d of %d values lost (%d distinct counted)", lost, n, len(got))
			}
			if c.mode == actors.CheckpointAligned && dups != 0 {
				t.Fatalf("aligned: %d duplicates, want exactly once", dups)
			}
		})
	}
}

// TestCheckpointModeRefused: Start refuses a mode it does not know.
func TestCheckpointModeRefused(t *testing.T) {
	_, err := actors.Start(context.Background(), seenJob("refused", 10, 2, nil), actors.WithStore(snapshots.NewMem()), actors.WithCheckpointMode(actors.CheckpointMode(7)))
	if err == nil || err.Error() != fmt.Sprintf("actors: WithCheckpointMode(%d): unknown mode (want actors.CheckpointAligned, actors.CheckpointUnaligned or actors.CheckpointAtLeastOnce)", 7) {
		t.Fatalf("Start with mode 7: %v", err)
	}
}
