package actors_test

import (
	"context"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestClusterRescaleFromSavepoint: in cluster mode, a job stopped with a
// savepoint at parallelism 2 resumes from it at parallelism 3 on the
// workers, each worker building its tasks' state from the stored tasks
// that held their key groups, and finishes exactly.
func TestClusterRescaleFromSavepoint(t *testing.T) {
	inProcessCluster(t)
	shape := rescaleShape{job: "cluster-rescale", n: 30_000, maxP: 32}
	dir := t.TempDir()
	for phase, par := range []int{2, 3} {
		limit := shape.n / 2
		if phase == 1 {
			limit = shape.n
		}
		gate := testsrc.NewGate(limit)
		job := func() *topology.Graph { return shape.build(par, gate, func(int64) error { return nil }) }
		opts := []actors.Option{cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: dir, Secret: testSecret}), actors.WithLogger(testLogger(t)),
			actors.WithCheckpointInterval(20e6)}
		if phase == 1 {
			opts = append(opts, actors.WithSavepoint("half"))
		}
		j, err := actors.Start(context.Background(), job(), opts...)
		if err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		wait := startWorkers(t, ctx, j.Address(), 2, job)
		if phase == 0 {
			gate.WaitReached(t, limit)
			stopWithSavepoint(t, j, "half")
		} else if err := waitJob(t, j); err != nil {
			t.Fatalf("phase %d: %v", phase, err)
		}
		cancel()
		wait()
	}
	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	rp, err := snapshots.NewCheckpoints(store, shape.job, nil).LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("final checkpoint: %v %v", rp, err)
	}
	count1, sum1, sum2 := shape.want()
	assertEqualMaps(t, "stage1 count", states(t, rp, "stage1", "count"), count1)
	assertEqualMaps(t, "stage1 sum", states(t, rp, "stage1", "sum"), sum1)
	assertEqualMaps(t, "stage2 sum", states(t, rp, "stage2", "sum"), sum2)
}
