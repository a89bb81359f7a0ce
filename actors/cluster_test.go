package actors_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/internal/racedetect"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// clusterJob is a keyed sum with a shuffle: records 1..n keyed by v%keys.
func clusterJob(n int64, keys int64) func() *topology.Graph {
	return func() *topology.Graph {
		g := topology.New("cluster-sum")
		src := topology.Generate(g, "src", n, func(i int64) int64 { return i + 1 }, topology.Parallelism(2))
		keyed := topology.KeyBy(src, func(v int64) int64 { return v % keys })
		sums := keyedSum(keyed, "sum", 3, nil)
		topology.Sink(sums, "sink", func(kv) error { return nil })
		return g
	}
}

func wantKeyed(n, keys int64) map[int64]int64 {
	want := map[int64]int64{}
	for v := int64(1); v <= n; v++ {
		want[v%keys] += v
	}
	return want
}

// startWorkers runs n workers joining addr until ctx ends; wait returns
// their errors.
func startWorkers(t *testing.T, ctx context.Context, addr string, n int, job func() *topology.Graph) (wait func() []error) {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cluster.ServeWorker(ctx, cluster.Worker{Join: addr, Slots: 6, Jobs: []func() *topology.Graph{job}, Logger: testLogger(t), Secret: testSecret})
		}()
	}
	return func() []error { wg.Wait(); return errs }
}

// inProcessCluster skips a test that runs several nodes in this process
// under the race detector: see package racedetect.
func inProcessCluster(t *testing.T) {
	if racedetect.Enabled {
		t.Skip("several cluster nodes in one process trip protoactor-go remote's own data races; examples/cluster runs the cluster as processes")
	}
}

func TestClusterInProcessExact(t *testing.T) {
	inProcessCluster(t)
	const n, keys = 200_000, 64
	dir := t.TempDir()
	job := clusterJob(n, keys)
	ev := &events{}
	j, err := actors.Start(context.Background(), job(), cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: dir, Secret: testSecret}),
		actors.WithCheckpointInterval(20e6), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := startWorkers(t, ctx, j.Address(), 2, job)
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	for i, err := range wait() {
		if err != nil {
			t.Errorf("worker %d: %v", i, err)
		}
	}
	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertEqualMaps(t, "final totals", finalTotals(t, store, "cluster-sum", "sum"), wantKeyed(n, keys))
	if ev.count(actors.EventNodeJoined) != 2 || ev.count(actors.EventPlaced) < 1 {
		t.Errorf("events: %d joined, %d placed", ev.count(actors.EventNodeJoined), ev.count(actors.EventPlaced))
	}
	// The workers sent their task counters to the coordinator, the last
	// ones when the job ended.
	ms := metricsByTask(j)
	for _, c := range []struct {
		op string
		f  func(actors.TaskMetrics) uint64
	}{{"src", recordsOut}, {"sum", recordsIn}, {"sum", recordsOut}, {"sink", recordsIn}} {
		if got := sumOf(ms, c.op, c.f); got != n {
			t.Errorf("the coordinator's task metrics: %s counted %d records, want %d: %+v", c.op, got, n, ms)
		}
	}
	for id, m := range ms {
		if m.QueuedBatches != 0 || (m.Operator == "src" && m.RecordsIn != 0) || (m.Operator == "sink" && m.RecordsOut != 0) {
			t.Errorf("%s: %+v", id, m)
		}
	}
}

func TestClusterWorkerLeavesInProcess(t *testing.T) {
	inProcessCluster(t)
	const n, keys = 20_000, 16
	gate := testsrc.NewGate(1000)
	job := func() *topology.Graph {
		g := topology.New("cluster-gated")
		src := topology.FromSource(g, "src", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} })
		sums := keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % keys }), "sum", 3, nil)
		topology.Sink(sums, "sink", func(kv) error { return nil })
		return g
	}
	dir := t.TempDir()
	ev := &events{}
	j, err := actors.Start(context.Background(), job(), cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: dir, Secret: testSecret}),
		actors.WithCheckpointInterval(0), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	ctxA, leave := context.WithCancel(context.Background())
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	waitA := startWorkers(t, ctxA, j.Address(), 1, job)
	waitB := startWorkers(t, ctxB, j.Address(), 1, job)
	gate.WaitReached(t, 1000)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	// The workers' heartbeat answers carry their task counters.
	running := waitMetrics(t, j, "the source's 1000 records in the coordinator's metrics", func(ms map[string]actors.TaskMetrics) bool {
		return ms["src#0"].RecordsOut == 1000 && sumOf(ms, "sum", recordsIn) == 1000
	})
	lost := ev.subscribe()
	leave()
	waitFor(t, lost, "the node-lost event", func(e actors.Event) bool { return e.Kind == actors.EventNodeLost })
	waitFor(t, lost, "the failure of its tasks", func(e actors.Event) bool {
		if e.Kind == actors.EventTaskFailed && e.Cause != actors.CauseNodeLost {
			t.Errorf("the failure of a lost worker's tasks: cause %q, want %q", e.Cause, actors.CauseNodeLost)
		}
		return e.Kind == actors.EventTaskFailed
	})
	if errs := waitA(); !errors.Is(errs[0], context.Canceled) {
		t.Errorf("worker A: %v, want context.Canceled", errs[0])
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	if errs := waitB(); errs[0] != nil {
		t.Errorf("worker B: %v", errs[0])
	}
	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	assertEqualMaps(t, "final totals", finalTotals(t, store, "cluster-gated", "sum"), wantKeyed(n, keys))
	// The lost worker's counts stay; what was replayed counts again.
	end := metricsByTask(j)
	if got := end["src#0"].RecordsOut; got < n || got < running["src#0"].RecordsOut {
		t.Errorf("the source sent %d records by the end, %d while running: want at least %d", got, running["src#0"].RecordsOut, n)
	}
	if ev.count(actors.EventRestoring) < 1 || ev.count(actors.EventPlaced) < 2 {
		t.Errorf("events: %d restoring, %d placed, want a rollback and a new placement", ev.count(actors.EventRestoring), ev.count(actors.EventPlaced))
	}
}
