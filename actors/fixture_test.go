package actors_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// The stored-format fixture: a store written by snapflow at the end of
// issue 21 (SNAPFLOW_WRITE_FIXTURE=1 rewrites it), before the public
// surface moves (issue 22), which must restore it unchanged. It holds the
// checkpoints of a keyed sum, one of them incremental, and a savepoint the
// job stopped with. The source is testsrc.Gated, whose offset is the count
// of records emitted as 8 big-endian bytes.
const (
	fixtureDir = "testdata/store-issue21"
	fixtureJob = "fixture-sum"
	fixtureN   = 1000
)

// fixtureKey is record v's key: a key per hundred records, so that an
// incremental checkpoint leaves the key groups of the earlier keys where
// the checkpoint before stored them.
func fixtureKey(v int64) int64 { return v / 100 }

func fixtureGraph(gate *testsrc.Gate, sumParallelism int) *topology.Graph {
	g := topology.New(fixtureJob)
	src := topology.FromSource(g, "src", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: fixtureN, Gate: gate} })
	sums := keyedSum(topology.KeyBy(src, fixtureKey), "sum", sumParallelism, nil)
	topology.Sink(sums, "sink", func(kv) error { return nil })
	return g
}

// TestWriteFixture writes the fixture when SNAPFLOW_WRITE_FIXTURE=1: a
// full checkpoint at record 300, an incremental one at 450, and the
// savepoint "fixture" the job stops with at 600.
func TestWriteFixture(t *testing.T) {
	if os.Getenv("SNAPFLOW_WRITE_FIXTURE") != "1" {
		t.Skip("writes testdata: SNAPFLOW_WRITE_FIXTURE=1")
	}
	if err := os.RemoveAll(fixtureDir); err != nil {
		t.Fatal(err)
	}
	store, err := snapshots.NewDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	gate := testsrc.NewGate(300)
	j, err := actors.Start(context.Background(), fixtureGraph(gate, 2), actors.WithStore(store),
		actors.WithCheckpointInterval(0), actors.WithIncrementalCheckpoints(10), actors.WithInlineStateLimit(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int64{300, 450} {
		gate.SetLimit(at)
		gate.WaitReached(t, at)
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	gate.SetLimit(600)
	gate.WaitReached(t, 600)
	if _, err := j.StopWithSavepoint(context.Background(), "fixture"); err != nil {
		t.Fatal(err)
	}
	// The lease objects name the machine and process that wrote them; a
	// restore claims a lease of its own without them.
	if err := os.RemoveAll(filepath.Join(fixtureDir, fixtureJob, "leases")); err != nil {
		t.Fatal(err)
	}
}

// TestFixtureRestores restores every checkpoint and the savepoint of the
// fixture, at the parallelism they were taken at and at another, runs the
// job to its end and checks every key's sum: stored formats do not change.
func TestFixtureRestores(t *testing.T) {
	if os.Getenv("SNAPFLOW_WRITE_FIXTURE") == "1" {
		t.Skip("writing the fixture")
	}
	store, err := snapshots.NewDir(fixtureDir)
	if err != nil {
		t.Fatal(err)
	}
	cps := snapshots.NewCheckpoints(store, fixtureJob, nil)
	list, err := cps.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	incremental := false
	var points []uint64
	for _, c := range list {
		if !c.Complete {
			continue
		}
		points = append(points, c.ID)
		rp, err := cps.LoadCheckpoint(context.Background(), c.ID)
		if err != nil {
			t.Fatalf("checkpoint %d: %v", c.ID, err)
		}
		for _, e := range rp.Manifest.GetTasks() {
			for _, s := range e.GetState().GetKeyGroups() {
				incremental = incremental || s.GetKey() != ""
			}
		}
	}
	if len(points) < 2 || !incremental {
		t.Fatalf("the fixture has checkpoints %v (an incremental one: %v): want at least 2, one incremental", points, incremental)
	}
	want := map[int64]int64{}
	for v := int64(1); v <= fixtureN; v++ {
		want[fixtureKey(v)] += v
	}
	run := func(t *testing.T, p int, from ...actors.Option) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(fixtureDir)); err != nil {
			t.Fatal(err)
		}
		copied, err := snapshots.NewDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		j, err := actors.Start(context.Background(), fixtureGraph(testsrc.NewGate(fixtureN), p),
			append(from, actors.WithStore(copied), actors.WithCheckpointInterval(0))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := waitJob(t, j); err != nil {
			t.Fatal(err)
		}
		assertEqualMaps(t, "final totals", finalTotals(t, copied, fixtureJob, "sum"), want)
	}
	// Started again without a point, the job resumes where it stopped: its
	// origin, the savepoint.
	t.Run("resume/p=2", func(t *testing.T) { run(t, 2) })
	for _, p := range []int{2, 3} {
		t.Run("savepoint/p="+strconv.Itoa(p), func(t *testing.T) { run(t, p, actors.WithSavepoint("fixture")) })
		for _, id := range points {
			t.Run("checkpoint-"+strconv.FormatUint(id, 10)+"/p="+strconv.Itoa(p), func(t *testing.T) { run(t, p, actors.WithCheckpoint(id)) })
		}
	}
}
