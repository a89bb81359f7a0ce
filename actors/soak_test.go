package actors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/chaos"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

// soakRates are the failure rates of the soak.
var soakRates = chaos.Rates{
	OperatorPanic: 0.0002, SnapshotPanic: 0.04, RestorePanic: 0.05,
	DropBatch: 0.001, DupBatch: 0.001,
	StoreError: 0.005, StoreLatency: 200 * time.Microsecond,
	Straggler: 0.001, StragglerTime: 2 * time.Millisecond,
}

// TestSoak runs every soak shape on the memory store and on MinIO, with
// checkpoints every 20ms and failures of every kind, until the target number
// of task failures is reached, then the rescaling shape (subtest rescale).
// SNAPFLOW_SOAK=full (make soak) runs the long version; the short one runs
// in make test. The seed is printed; replay with -seed.
func TestSoak(t *testing.T) {
	seed := testSeed(t)
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "soak")
	t.Run("shapes", func(t *testing.T) { soakShapes(t, seed, srv) })
	t.Run("rescale", func(t *testing.T) { soakRescale(t, seed, srv) })
}

// soakShapes runs the shapes of chaos.Shapes in turn.
func soakShapes(t *testing.T, seed uint64, srv *miniotest.Server) {
	// Sources are paced (rate records/s per task), so that each run lasts
	// long enough for 20ms checkpoints to complete between failures and
	// recoveries restore real mid-stream state.
	target, n, budget, rate := 24, int64(40_000), 2, 100_000.0
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		target, n, budget = 240, 100_000, 4
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	total := map[chaos.Kind]int{}
	taskFailures, runs, completed, fromCkpt := 0, 0, 0, 0
	start := time.Now()
	// Until a recovery has restored a mid-stream checkpoint, runs go on
	// past the target: how soon one does depends on the machine's speed.
	for taskFailures < target || fromCkpt == 0 {
		sh := chaos.Shapes[runs%len(chaos.Shapes)]
		store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
		if runs%2 == 1 {
			store, storeName = srv.Store(t, "soak", fmt.Sprintf("run-%d", runs)), "minio"
		}
		runSeed := rng.Uint64()
		res, err := chaos.Run(context.Background(), chaos.RunConfig{
			Shape: sh, N: n, Store: store, Seed: runSeed, Rates: soakRates, Budget: budget, Rate: rate, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatalf("run %d (%s on %s, seed %d): %v\ninjected: %s", runs, sh.Name, storeName, runSeed, err, chaos.FormatCounts(res.Counts))
		}
		for k, c := range res.Counts {
			total[k] += c
		}
		taskFailures += res.Failures // observed by the job, not merely injected
		completed += res.Completed
		fromCkpt += res.FromCkpt
		runs++
		t.Logf("run %d: %-7s on %-5s seed %d: %d failures, %d restores (%d from a checkpoint), %d checkpoints, %d stale messages dropped, %v; injected %s",
			runs, sh.Name, storeName, runSeed, res.Failures, res.Restores, res.FromCkpt, res.Completed, res.Stale, res.Elapsed.Round(time.Millisecond), chaos.FormatCounts(res.Counts))
		if runs > 50*target {
			t.Fatalf("only %d task failures after %d runs", taskFailures, runs)
		}
	}
	t.Logf("soak: %d runs, %d task failures observed, %d restores from a checkpoint, %d checkpoints completed, %v; injected %s",
		runs, taskFailures, fromCkpt, completed, time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
	// The short soak is too short to promise every kind; the full one must.
	full := os.Getenv("SNAPFLOW_SOAK") == "full"
	if fromCkpt == 0 || (full && fromCkpt < taskFailures/4) {
		t.Errorf("only %d of %d recoveries restored a mid-stream checkpoint: the soak must exercise restores", fromCkpt, taskFailures)
	}
	for _, k := range []chaos.Kind{chaos.OperatorPanic, chaos.SnapshotPanic, chaos.RestorePanic, chaos.DropBatch, chaos.DupBatch, chaos.StoreError} {
		if total[k] == 0 && full {
			t.Errorf("no %s was injected", k)
		}
	}
}

// soakRescale runs the rescaling shape (chaos.Rescale), alternately on the
// memory store and on MinIO: four phases of parallelisms chosen from each
// run's seed, each ended by a stop-with-savepoint that the next starts
// from, with failures injected throughout. Every run is verified by
// chaos.Run: every savepoint holds the checkers exactly at the sources'
// positions, each phase's recovery restored its savepoint again after a
// failure while restoring it, and the final state is that of a
// failure-free run. Runs go on until the target number of task failures.
func soakRescale(t *testing.T, seed uint64, srv *miniotest.Server) {
	target, n, budget, rate := 8, int64(16_000), 1, 100_000.0
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		target, n, budget = 120, 100_000, 3
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	total := map[chaos.Kind]int{}
	var sum chaos.RunResult
	runs := 0
	start := time.Now()
	for runs < 2 || sum.Failures < target {
		store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
		if runs%2 == 1 {
			store, storeName = srv.Store(t, "soak", fmt.Sprintf("rescale-%d", runs)), "minio"
		}
		runSeed := rng.Uint64()
		res, err := chaos.Run(context.Background(), chaos.RunConfig{
			Shape: chaos.Rescale, N: n, Store: store, Seed: runSeed, Rates: soakRates, Budget: budget, Rate: rate, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatalf("rescale run %d on %s, seed %d, phases %v: %v\ninjected: %s", runs, storeName, runSeed, res.Phases, err, chaos.FormatCounts(res.Counts))
		}
		for k, c := range res.Counts {
			total[k] += c
		}
		sum.Failures += res.Failures
		sum.Restores += res.Restores
		sum.FromCkpt += res.FromCkpt
		sum.Completed += res.Completed
		sum.Savepoints += res.Savepoints
		sum.SavepointsFailed += res.SavepointsFailed
		sum.SavepointRestores += res.SavepointRestores
		sum.StartRetries += res.StartRetries
		runs++
		t.Logf("rescale run %d on %-5s seed %d, phases %v: %d failures, %d restores (%d from a checkpoint, %d of a savepoint), %d checkpoints, %d savepoints (%d attempts failed), %d Start retries, %d stale messages dropped, %v; injected %s",
			runs, storeName, runSeed, res.Phases, res.Failures, res.Restores, res.FromCkpt, res.SavepointRestores, res.Completed,
			res.Savepoints, res.SavepointsFailed, res.StartRetries, res.Stale, res.Elapsed.Round(time.Millisecond), chaos.FormatCounts(res.Counts))
		if runs > 50*target {
			t.Fatalf("only %d task failures after %d runs", sum.Failures, runs)
		}
	}
	t.Logf("rescale soak: %d runs, %d task failures observed, %d restores (%d from a checkpoint, %d of a savepoint), %d checkpoints, %d savepoints taken, %d savepoint attempts failed, %d Start retries, %v; injected %s",
		runs, sum.Failures, sum.Restores, sum.FromCkpt, sum.SavepointRestores, sum.Completed, sum.Savepoints, sum.SavepointsFailed, sum.StartRetries,
		time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
}
