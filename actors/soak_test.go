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
// of task failures is reached. SNAPFLOW_SOAK=full (make soak) runs the long
// version; the short one runs in make test. The seed is printed; replay with
// -seed.
func TestSoak(t *testing.T) {
	seed := testSeed(t)
	target, n, budget := 24, int64(60_000), 2
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		target, n, budget = 240, 200_000, 4
	}
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "soak")
	rng := rand.New(rand.NewPCG(seed, 1))
	total := map[chaos.Kind]int{}
	taskFailures, runs, completed := 0, 0, 0
	start := time.Now()
	for taskFailures < target {
		sh := chaos.Shapes[runs%len(chaos.Shapes)]
		store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
		if runs%2 == 1 {
			store, storeName = srv.Store(t, "soak", fmt.Sprintf("run-%d", runs)), "minio"
		}
		runSeed := rng.Uint64()
		res, err := chaos.Run(context.Background(), chaos.RunConfig{
			Shape: sh, N: n, Store: store, Seed: runSeed, Rates: soakRates, Budget: budget, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatalf("run %d (%s on %s, seed %d): %v\ninjected: %s", runs, sh.Name, storeName, runSeed, err, chaos.FormatCounts(res.Counts))
		}
		for k, c := range res.Counts {
			total[k] += c
		}
		taskFailures += chaos.TaskFailures(res.Counts)
		completed += res.Completed
		runs++
		t.Logf("run %d: %-7s on %-5s seed %d: %d restores, %d checkpoints, %d stale messages dropped, %v; injected %s",
			runs, sh.Name, storeName, runSeed, res.Restores, res.Completed, res.Stale, res.Elapsed.Round(time.Millisecond), chaos.FormatCounts(res.Counts))
		if runs > 50*target {
			t.Fatalf("only %d task failures after %d runs", taskFailures, runs)
		}
	}
	t.Logf("soak: %d runs, %d task failures, %d checkpoints completed, %v; injected %s",
		runs, taskFailures, completed, time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
}
