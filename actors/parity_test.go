package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestParityCut is the lecture's job: a checkpoint right after the source has
// emitted 5 holds source=5, sum_even=6, sum_odd=9, read back from the store;
// a failure on record 7 of the odd sum rolls back and the final sums are exact.
func TestParityCut(t *testing.T) {
	const n = 20_000
	store, err := snapshots.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gate := testsrc.NewGate(5)
	fail := newFailures(7)
	sink := newLatest()
	g := topology.New("parity", topology.MaxParallelism(2))
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &testsrc.Gated{N: n, Gate: gate}
	})
	keyed := topology.KeyByHash(src, func(v int64) int64 { return v % 2 }, func(k int64) uint64 { return uint64(k) })
	topology.Sink(keyedSum(keyed, "sum", 2, fail), "sink", sink.put)

	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(20*time.Millisecond), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 5)
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	cps := snapshots.NewCheckpoints(store, "parity", nil)
	m, err := cps.ReadManifest(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, e := range m.Tasks {
		st, err := cps.ReadTaskState(context.Background(), e.State)
		if err != nil {
			t.Fatal(err)
		}
		if st.TaskId != e.TaskId {
			t.Errorf("manifest entry %s points at the state of %s", e.TaskId, st.TaskId)
		}
		switch e.TaskId {
		case "source#0":
			got["source"], err = topology.GeneratedRecords(st)
		case "sum#0", "sum#1":
			var totals map[int64]int64
			totals, err = topology.DecodeValueState[int64, int64](st, "total")
			for k, v := range totals {
				if k == 0 {
					got["sum_even"] = v
				} else {
					got["sum_odd"] = v
				}
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got["source"] != 5 || got["sum_even"] != 6 || got["sum_odd"] != 9 {
		t.Fatalf("checkpoint %d: got %v, want source=5 sum_even=6 sum_odd=9", id, got)
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	if fail.injected.Load() != 1 {
		t.Fatalf("injected %d failures, want 1", fail.injected.Load())
	}
	if ev.count(actors.EventRestoring) != 1 {
		t.Fatalf("restores: %d, want 1", ev.count(actors.EventRestoring))
	}
	want := map[int64]int64{0: paritySum(n, 0), 1: paritySum(n, 1)}
	assertEqualMaps(t, "sink", sink.snapshot(), want)
	assertEqualMaps(t, "final checkpoint", finalTotals(t, store, "parity", "sum"), want)
}

func assertEqualMaps(t testing.TB, what string, got, want map[int64]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: key %d = %d, want %d", what, k, got[k], v)
		}
	}
}
