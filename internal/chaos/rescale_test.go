package chaos

import (
	"context"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestRunRescale runs the rescale shape through 1 -> 4 -> 2 -> 3 without
// random failures: only the forced ones (the first upload of each
// savepoint, the first restore of each). Every savepoint is taken after
// one failed attempt, every phase restores its savepoint twice, and the
// final state is exact.
func TestRunRescale(t *testing.T) {
	res, err := Run(context.Background(), RunConfig{Shape: Rescale, N: 6400, Store: snapshots.NewMem(), Seed: 1, Phases: []int{1, 4, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Savepoints != 3 || res.SavepointsFailed < 3 || res.SavepointRestores < 3 {
		t.Fatalf("%d savepoints (%d attempts failed), %d restores of a savepoint; want 3, at least 3 and at least 3",
			res.Savepoints, res.SavepointsFailed, res.SavepointRestores)
	}
	if got := res.FinalStates["check2"]; len(got) != keys+keys/2 || got[0] != 6400/keys || got[keys] != 6400/keys/2 {
		t.Fatalf("final state of check2: %v", got)
	}
}

// TestRunRescaleDetectsLoss: a shape that loses the records of one key
// before its second checker fails the run, at the first savepoint, which
// does not hold that checker at the sources' positions.
func TestRunRescaleDetectsLoss(t *testing.T) {
	lossy := Rescale
	lossy.Name = "lossy"
	lossy.BuildPhase = func(g *topology.Graph, ph Phase, n int64, rate float64, in *Injector, sink *Sink) {
		a := KeyedSplits(g, "source-a", 0, keys, n/keys, rate, ph.Gate, topology.Parallelism(ph.Parallelism))
		first := Check(a, "check", ph.Parallelism, in, sink.v)
		lost := topology.Filter(first, "lose-key-5", func(e Event) bool { return e.Key != 5 }, topology.Parallelism(ph.Parallelism))
		topology.Sink(Check(lost, "check2", 2, in, sink.v), "sink", sink.Write, topology.Parallelism(2))
	}
	_, err := Run(context.Background(), RunConfig{Shape: lossy, N: 6400, Store: snapshots.NewMem(), Seed: 1, Phases: []int{2, 3}})
	if err == nil || !strings.Contains(err.Error(), "phase 0") || !strings.Contains(err.Error(), "the state of check2 is not at the sources' positions: key 5: 0, want 50") {
		t.Fatalf("Run = %v, want the savepoint of phase 0 refused for key 5 of check2", err)
	}
}
