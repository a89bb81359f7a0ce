package actors_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// perTask counts what a test's operator saw, by task id.
type perTask struct {
	mu sync.Mutex
	m  map[string]uint64
}

func (p *perTask) add(task string) {
	p.mu.Lock()
	if p.m == nil {
		p.m = map[string]uint64{}
	}
	p.m[task]++
	p.mu.Unlock()
}

func (p *perTask) get(task string) uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[task]
}

// countedJob is a 3-stage job: a source of 1..n at parallelism 2, a keyed
// running sum at parallelism 3 that counts the records each of its tasks
// processes in seen, and a sink at parallelism 3.
func countedJob(name string, n int64, seen *perTask) *topology.Graph {
	g := topology.New(name)
	src := topology.Generate(g, "source", n, func(i int64) int64 { return i + 1 }, topology.Parallelism(2))
	sums := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 16 }), "sum",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, kv] {
			total := topology.Value[int64](ks, "total")
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[kv]) error {
				seen.add(ctx.TaskID())
				t, _ := total.Get()
				total.Set(t + v)
				out.Emit(kv{ctx.Key(), t + v})
				return nil
			}
		}, topology.Parallelism(3))
	topology.Sink(sums, "sink", func(kv) error { return nil }, topology.Parallelism(3))
	return g
}

func metricsByTask(j *actors.Job) map[string]actors.TaskMetrics {
	out := map[string]actors.TaskMetrics{}
	for _, m := range j.TaskMetrics() {
		out[m.Task] = m
	}
	return out
}

// sumOf adds up field f of operator op's tasks.
func sumOf(ms map[string]actors.TaskMetrics, op string, f func(actors.TaskMetrics) uint64) uint64 {
	var s uint64
	for _, m := range ms {
		if m.Operator == op {
			s += f(m)
		}
	}
	return s
}

func recordsIn(m actors.TaskMetrics) uint64  { return m.RecordsIn }
func recordsOut(m actors.TaskMetrics) uint64 { return m.RecordsOut }

// TestTaskMetricsCountRecords: after a failure-free run of a known number
// of records through three stages, every task's RecordsIn and RecordsOut
// are exact, and nothing is left queued.
func TestTaskMetricsCountRecords(t *testing.T) {
	const n = 20_000
	var seen perTask
	j, err := actors.Start(context.Background(), countedJob("metrics-exact", n, &seen), actors.WithStore(snapshots.NewMem()),
		actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	ms := j.TaskMetrics()
	if len(ms) != len(actors.PlanOf(j).Tasks) {
		t.Fatalf("%d task metrics, want one per task (%d)", len(ms), len(actors.PlanOf(j).Tasks))
	}
	for i, m := range ms {
		p := actors.PlanOf(j).Tasks[i]
		if m.Task != p.ID || m.Operator != p.Operator || m.Subtask != p.Subtask {
			t.Errorf("metrics %d are of %s (%s/%d), want the plan's task %s", i, m.Task, m.Operator, m.Subtask, p.ID)
		}
		if m.QueuedBatches != 0 {
			t.Errorf("%s: %d batches queued after the job ended", m.Task, m.QueuedBatches)
		}
		var wantIn, wantOut uint64
		switch m.Operator {
		case "source":
			wantOut = n / 2 // Generate: task s produces the i with i%2 == s
		case "sum":
			wantIn = seen.get(m.Task)
			wantOut = wantIn // one running sum out per record in
		case "sink":
			// The forward edge: sink#k receives what sum#k sent.
			wantIn = seen.get("sum#" + m.Task[len("sink#"):])
		}
		if m.RecordsIn != wantIn || m.RecordsOut != wantOut {
			t.Errorf("%s: %d records in, %d out; want %d in, %d out", m.Task, m.RecordsIn, m.RecordsOut, wantIn, wantOut)
		}
	}
	byTask := metricsByTask(j)
	if got := sumOf(byTask, "sum", recordsIn); got != n {
		t.Errorf("the sum tasks took %d records in, want %d", got, n)
	}
	if got := sumOf(byTask, "sink", recordsIn); got != n {
		t.Errorf("the sink tasks took %d records in, want %d", got, n)
	}
}

// TestTaskMetricsGrowAcrossRestore: the counters outlive the task actors,
// which a failure replaces: after a failure and a restore from the
// beginning (no checkpoint was taken), every counter is at least what it
// was at the failure, and the replayed records count on top of it.
func TestTaskMetricsGrowAcrossRestore(t *testing.T) {
	const n = 20_000
	var seen perTask
	var job atomic.Pointer[actors.Job]
	var atFailure atomic.Pointer[map[string]actors.TaskMetrics]
	var batches atomic.Int64
	faults := &actorstest.Faults{Process: func(task string) {
		// The third batch of sum#1 fails it, once.
		if task == "sum#1" && batches.Add(1) == 3 {
			ms := metricsByTask(job.Load())
			atFailure.Store(&ms)
			panic("injected failure in " + task)
		}
	}}
	var ev events
	// The tasks wait for the job pointer: Faults.Process reads it.
	gate := make(chan struct{})
	waitGate := &actorstest.Faults{Process: func(task string) {
		<-gate
		faults.Process(task)
	}}
	j, err := actors.Start(context.Background(), countedJob("metrics-restore", n, &seen), actors.WithStore(snapshots.NewMem()),
		actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0), actorstest.WithFaults(waitGate), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 3, Window: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	job.Store(j)
	close(gate)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if got := ev.count(actors.EventRestoring); got != 1 {
		t.Fatalf("%d restores, want the 1 of the injected failure", got)
	}
	if r := ev.of(actors.EventRestoring); r[0].Checkpoint != 0 {
		t.Fatalf("restored checkpoint %d, want a start from the beginning", r[0].Checkpoint)
	}
	after, before := metricsByTask(j), *atFailure.Load()
	for id, b := range before {
		a := after[id]
		if a.RecordsIn < b.RecordsIn || a.RecordsOut < b.RecordsOut || a.Backpressure < b.Backpressure {
			t.Errorf("%s went back: %+v at the failure, %+v at the end", id, b, a)
		}
		if a.QueuedBatches != 0 {
			t.Errorf("%s: %d batches queued after the job ended", id, a.QueuedBatches)
		}
	}
	// The new incarnation processed all n records again, on top of what
	// the first had counted by the failure.
	if b := sumOf(before, "sum", recordsIn); b == 0 {
		t.Fatal("no record counted by the sum tasks before the failure")
	}
	for _, c := range []struct {
		op string
		f  func(actors.TaskMetrics) uint64
	}{{"source", recordsOut}, {"sum", recordsIn}, {"sum", recordsOut}, {"sink", recordsIn}} {
		if a, b := sumOf(after, c.op, c.f), sumOf(before, c.op, c.f); a < b+n {
			t.Errorf("%s: %d at the end, %d at the failure: want at least %d more (the replay)", c.op, a, b, n)
		}
	}
}

// TestTaskMetricsBackpressure: a sink that blocks (a Faults.Process hook
// the test releases) leaves its upstream tasks without credit: they queue
// batches, and their backpressure time grows while they wait; once the
// sink is released, every batch is delivered and none stays queued.
func TestTaskMetricsBackpressure(t *testing.T) {
	const n = 20_000
	release := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	defer unblock()
	faults := &actorstest.Faults{Process: func(task string) {
		if task == "sink#0" {
			<-release
		}
	}}
	g := topology.New("metrics-backpressure")
	src := topology.Generate(g, "source", n, func(i int64) int64 { return i })
	doubled := topology.Map(src, "double", func(v int64) int64 { return 2 * v })
	topology.Sink(doubled, "sink", func(int64) error { return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actorstest.WithFaults(faults))
	if err != nil {
		t.Fatal(err)
	}
	// The sink blocks on its first batch: the map runs out of credit,
	// stops taking batches, and so the source runs out of credit too.
	blocked := waitMetrics(t, j, "both upstream tasks queueing with backpressure", func(ms map[string]actors.TaskMetrics) bool {
		for _, id := range []string{"source#0", "double#0"} {
			if ms[id].QueuedBatches == 0 || ms[id].Backpressure == 0 {
				return false
			}
		}
		return true
	})
	if m := blocked["sink#0"]; m.RecordsIn != 0 || m.Backpressure != 0 || m.QueuedBatches != 0 {
		t.Errorf("the blocked sink: %+v, want nothing counted (its first batch waits in the hook)", m)
	}
	if m := blocked["double#0"]; m.RecordsOut == 0 {
		t.Errorf("the map sent nothing before it ran out of credit: %+v", m)
	}
	later := waitMetrics(t, j, "the backpressure time to grow", func(ms map[string]actors.TaskMetrics) bool {
		return ms["double#0"].Backpressure > blocked["double#0"].Backpressure
	})
	if later["double#0"].QueuedBatches != blocked["double#0"].QueuedBatches {
		t.Errorf("the map's queue changed while the sink was blocked: %d, then %d", blocked["double#0"].QueuedBatches, later["double#0"].QueuedBatches)
	}
	unblock()
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	end := metricsByTask(j)
	for id, m := range end {
		if m.QueuedBatches != 0 {
			t.Errorf("%s: %d batches queued after the sink was released and the job ended", id, m.QueuedBatches)
		}
		if m.Backpressure < later[id].Backpressure {
			t.Errorf("%s: backpressure went back from %v to %v", id, later[id].Backpressure, m.Backpressure)
		}
	}
	if end["sink#0"].RecordsIn != n || end["sink#0"].Backpressure != 0 {
		t.Errorf("the sink: %+v, want %d records in and no backpressure (it has no output)", end["sink#0"], n)
	}
}

// waitMetrics polls j's task metrics until ok holds: the state it waits
// for has no event, but is reached whatever the machine's speed.
func waitMetrics(t *testing.T, j *actors.Job, what string, ok func(map[string]actors.TaskMetrics) bool) map[string]actors.TaskMetrics {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(testTimeout)
	defer deadline.Stop()
	for {
		ms := metricsByTask(j)
		if ok(ms) {
			return ms
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("timed out waiting for %s: %+v", what, ms)
		case <-j.Done():
			t.Fatalf("the job ended (%v) before %s: %+v", j.Wait(), what, ms)
		}
	}
}

// TestRecordsOutOncePerRecord: a source read by three operators (two of
// them on rebalance edges to several tasks) and broadcast to a fourth
// counts each record it emits once (on main, 5 times: once per consuming
// edge, and once more per further task of the broadcast), as jobs status
// shows it; each consumer takes every record in.
func TestRecordsOutOncePerRecord(t *testing.T) {
	const n = 3_000
	g := topology.New("records-out-once")
	src := topology.Sequence(g, "source", 1, n)
	discard := func(int64) error { return nil }
	topology.Sink(src, "a", discard, topology.Parallelism(2))
	topology.Sink(src, "b", discard)
	topology.Sink(src, "c", discard, topology.Parallelism(3))
	topology.Sink(topology.Broadcast(src), "d", discard, topology.Parallelism(2))
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	byTask := metricsByTask(j)
	if got := sumOf(byTask, "source", recordsOut); got != n {
		t.Errorf("the source's records out: %d, want %d (each record once)", got, n)
	}
	for op, want := range map[string]uint64{"a": n, "b": n, "c": n, "d": 2 * n} {
		if got := sumOf(byTask, op, recordsIn); got != want {
			t.Errorf("%s took %d records in, want %d", op, got, want)
		}
	}
}
