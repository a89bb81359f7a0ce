package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
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

// TestRunRescaleFromUnalignedCheckpoints runs the rescale shape through
// 1 -> 4 -> 2 -> 3 with unaligned checkpoints and unpaced sources, each
// phase stopped at a checkpoint that stored records in flight and the next
// started from it: its channel state is redistributed over the new
// parallelisms (and again after the forced failure of its first restore),
// the checkers see every key's records in order, and the final state is
// exact.
func TestRunRescaleFromUnalignedCheckpoints(t *testing.T) {
	res, err := Run(context.Background(), RunConfig{Shape: Rescale, N: 64_000, Store: snapshots.NewMem(), Seed: 1, Phases: []int{1, 4, 2, 3},
		Interval: time.Millisecond, FromCheckpoints: true, Options: []actors.Option{actors.WithCheckpointMode(actors.CheckpointUnaligned)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d phases started from a checkpoint, %d of them holding records in flight; %d restores of those checkpoints",
		res.CheckpointRescales, res.InFlightRescales, res.SavepointRestores)
	if res.InFlightRescales == 0 {
		t.Fatal("no phase started from a checkpoint that held records in flight: nothing was redistributed")
	}
	if res.CheckpointRescales != 3 || res.SavepointRestores < 3 || res.Savepoints != 0 {
		t.Fatalf("%d phases from a checkpoint, %d restores of them, %d savepoints; want 3, at least 3 and 0",
			res.CheckpointRescales, res.SavepointRestores, res.Savepoints)
	}
	if got := res.FinalStates["check2"]; len(got) != keys+keys/2 || got[0] != 64_000/keys || got[keys] != 64_000/keys/2 {
		t.Fatalf("final state of check2: %v", got)
	}
}

// TestRunRescaleStopNotRecorded: with SameSavepointName, the first
// stop-with-savepoint whose savepoint completes fails all the same, its
// write of the job's origin failing (actors.ErrNotStopped). That savepoint
// is complete and never overwritten, so the runner must stop the job again
// under another name, and the next phase start from that one; it retried
// "phase-0" until it gave up, refused each time as existing.
func TestRunRescaleStopNotRecorded(t *testing.T) {
	rc := RunConfig{Shape: Rescale, N: 6400, Seed: 1, Phases: []int{1, 2}, SameSavepointName: true}
	store := &originFailsOnce{Store: snapshots.NewMem(), key: snapshots.OriginKey(jobName(rc))}
	rc.Store = store
	res, err := Run(context.Background(), rc)
	if err != nil {
		t.Fatal(err)
	}
	if !store.failed.Load() {
		t.Fatal("no stop wrote the job's origin")
	}
	if res.Savepoints != 1 || res.SavepointsFailed < 2 {
		t.Fatalf("%d savepoints (%d attempts failed); want 1 and at least 2", res.Savepoints, res.SavepointsFailed)
	}
	if ok, err := snapshots.NewCheckpoints(store, jobName(rc), nil).SavepointExists(context.Background(), "phase-0"); err != nil || !ok {
		t.Fatalf("the savepoint of the stop that failed: complete %t, %v; want it complete", ok, err)
	}
}

// originFailsOnce fails the first write of key, the job's origin, without
// storing it.
type originFailsOnce struct {
	snapshots.Store
	key    string
	failed atomic.Bool
}

func (s *originFailsOnce) Put(ctx context.Context, key string, data []byte) error {
	if key == s.key && s.failed.CompareAndSwap(false, true) {
		return fmt.Errorf("test: the first write of %s fails: %w", key, ErrInjected)
	}
	return s.Store.Put(ctx, key, data)
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
