package actors_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
)

// TestSavepointMovesBetweenBackends runs a job in four phases ended by
// savepoints, the state alternately on the heap and on disk and at
// another parallelism each time, with a task failure in every phase: the
// final state equals that of the whole input, and the disk phases kept
// their state in databases that are gone once the job has ended.
func TestSavepointMovesBetweenBackends(t *testing.T) {
	shape := rescaleShape{job: "backends", n: 20_000, maxP: 32}
	store := snapshots.NewMem()
	dir := t.TempDir()
	pf := &phaseFaults{}
	faults := pf.faults()
	pars := []int{2, 3, 1, 2}
	for i, par := range pars {
		pf.setPhase(i)
		onDisk := i%2 == 1
		limit := shape.n * int64(i+1) / int64(len(pars))
		gate := testsrc.NewGate(limit)
		g := shape.build(par, gate, func(int64) error { return nil })
		opts := []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)),
			actorstest.WithFaults(faults), actors.WithCheckpointInterval(10 * time.Millisecond),
			actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 100, Window: time.Hour})}
		if onDisk {
			opts = append(opts, actors.WithDiskState(actors.DiskState{Dir: dir}))
		}
		if i > 0 {
			opts = append(opts, actors.WithSavepoint(fmt.Sprintf("phase-%d", i-1)))
		}
		before := diskstate.Opened()
		j, err := actors.Start(context.Background(), g, opts...)
		if err != nil {
			t.Fatalf("phase %d (parallelism %d): %v", i, par, err)
		}
		if i == len(pars)-1 {
			if err := waitJob(t, j); err != nil {
				t.Fatalf("last phase: %v", err)
			}
		} else {
			gate.WaitReached(t, limit)
			stopWithSavepoint(t, j, fmt.Sprintf("phase-%d", i))
		}
		// Each stage's tasks open a database per incarnation.
		if opened := diskstate.Opened() - before; onDisk != (opened >= int64(2*par)) {
			t.Fatalf("phase %d (on disk: %t): %d task databases opened", i, onDisk, opened)
		}
	}
	rp, err := snapshots.NewCheckpoints(store, shape.job, nil).LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("the final checkpoint: %v, %v", rp, err)
	}
	count1, sum1, sum2 := shape.want()
	assertEqualMaps(t, "stage1 count", states(t, rp, "stage1", "count"), count1)
	assertEqualMaps(t, "stage1 sum", states(t, rp, "stage1", "sum"), sum1)
	assertEqualMaps(t, "stage2 sum", states(t, rp, "stage2", "sum"), sum2)
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("task databases left behind: %v %v", left, err)
	}
}
