package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// rescaleShape is the job of the rescaling tests: a union of two gated
// sources (values 0..n-1 and 1e6..1e6+n/2-1), a first keyed stage that
// counts and sums per key v%17 and forwards the values, and a second keyed
// stage that sums per key v%5. Each operator's parallelism is par (the
// second source's par-1, at least 1).
type rescaleShape struct {
	job  string
	n    int64
	maxP int
}

const rescaleKeys1, rescaleKeys2 = 17, 5

func (s rescaleShape) build(par int, gate *testsrc.Gate, sink func(int64) error, extra ...topology.Option) *topology.Graph {
	g := topology.New(s.job, topology.MaxParallelism(max(s.maxP, 1)))
	a := testsrc.GatedSplits(g, "source-a", s.n, func(i int64) int64 { return i }, gate, topology.Parallelism(par))
	b := testsrc.GatedSplits(g, "source-b", s.n/2, func(i int64) int64 { return 1_000_000 + i }, gate, topology.Parallelism(max(1, par-1)))
	stage1 := topology.Process(topology.KeyBy(topology.Union(a, b), func(v int64) int64 { return v % rescaleKeys1 }), "stage1",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			count := topology.Value[int64](ks, "count")
			sum := topology.Value[int64](ks, "sum")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				c, _ := count.Get()
				count.Set(c + 1)
				x, _ := sum.Get()
				sum.Set(x + v)
				out.Emit(v)
				return nil
			}
		}, append([]topology.Option{topology.Parallelism(par)}, extra...)...)
	stage2 := topology.Process(topology.KeyBy(stage1, func(v int64) int64 { return v % rescaleKeys2 }), "stage2",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			sum := topology.Value[int64](ks, "sum")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				x, _ := sum.Get()
				sum.Set(x + v)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(par))
	topology.Sink(stage2, "sink", sink)
	return g
}

// want returns the final states of the job over all its records: stage1's
// count and sum per key, and stage2's sum per key.
func (s rescaleShape) want() (count1, sum1, sum2 map[int64]int64) {
	count1, sum1, sum2 = map[int64]int64{}, map[int64]int64{}, map[int64]int64{}
	add := func(v int64) {
		count1[v%rescaleKeys1]++
		sum1[v%rescaleKeys1] += v
		sum2[v%rescaleKeys2] += v
	}
	for i := int64(0); i < s.n; i++ {
		add(i)
	}
	for i := int64(0); i < s.n/2; i++ {
		add(1_000_000 + i)
	}
	return count1, sum1, sum2
}

// states decodes state name of every task of operator in rp.
func states(t *testing.T, rp *snapshots.Restorable, operator, name string) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	for id, st := range rp.States {
		if st.Operator != operator {
			continue
		}
		m, err := topology.DecodeValueState[int64, int64](st, name)
		if err != nil {
			t.Fatalf("decode %s of %s: %v", name, id, err)
		}
		for k, v := range m {
			if _, dup := out[k]; dup {
				t.Fatalf("%s: key %d held by two tasks", operator, k)
			}
			out[k] = v
		}
	}
	return out
}

// phaseFaults fails, once in each phase, a task of each stage: a stage1
// task on the third batch stage1 processes, and stage2#0 as it restores
// (from the second phase on, when there is state to restore), before the
// phase has completed any checkpoint of its own.
type phaseFaults struct {
	mu       sync.Mutex
	phase    int
	restored map[int]bool
	batches  map[int]int
	injected atomic.Int64
}

func (f *phaseFaults) setPhase(p int) { f.mu.Lock(); f.phase = p; f.mu.Unlock() }

func (f *phaseFaults) faults() *actorstest.Faults {
	f.restored, f.batches = map[int]bool{}, map[int]int{}
	return &actorstest.Faults{
		Restore: func(task string, _ uint64) {
			if task != "stage2#0" {
				return
			}
			f.mu.Lock()
			fail := !f.restored[f.phase]
			f.restored[f.phase] = true
			f.mu.Unlock()
			if fail {
				f.injected.Add(1)
				panic("injected: stage2#0 fails while restoring")
			}
		},
		Process: func(task string) {
			if !strings.HasPrefix(task, "stage1#") {
				return
			}
			f.mu.Lock()
			f.batches[f.phase]++
			fail := f.batches[f.phase] == 3
			f.mu.Unlock()
			if fail {
				f.injected.Add(1)
				panic("injected: " + task + " fails on the third batch stage1 processes in the phase")
			}
		},
	}
}

// TestRescaleThroughSavepoints runs a job with two keyed stages and a union
// of two sources at parallelism 1, 4, 2 and 3 in turn, stopping each phase
// with a savepoint and starting the next from it, with failures injected in
// every phase (one on restoring the savepoint, before the phase has a
// checkpoint of its own, and one while records flow). The final state is
// exactly that of one failure-free run.
func TestRescaleThroughSavepoints(t *testing.T) {
	shape := rescaleShape{job: "rescale", n: 20_000, maxP: 32}
	store := snapshots.NewMem()
	pf := &phaseFaults{}
	faults := pf.faults()
	pars := []int{1, 4, 2, 3}
	for i, par := range pars {
		pf.setPhase(i)
		limit := shape.n * int64(i+1) / int64(len(pars))
		gate := testsrc.NewGate(limit)
		g := shape.build(par, gate, func(int64) error { return nil })
		var ev events
		opts := []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen),
			actorstest.WithFaults(faults), actors.WithCheckpointInterval(10 * time.Millisecond),
			actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 100, Window: time.Hour})}
		if i > 0 {
			opts = append(opts, actors.WithSavepoint(fmt.Sprintf("phase-%d", i-1)))
		}
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
		if i > 0 {
			sp, err := snapshots.NewCheckpoints(store, shape.job, nil).ReadSavepointManifest(context.Background(), fmt.Sprintf("phase-%d", i-1))
			if err != nil {
				t.Fatal(err)
			}
			if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != sp.CheckpointId || r[0].Savepoint != fmt.Sprintf("phase-%d", i-1) {
				t.Fatalf("phase %d started from %+v, want savepoint phase-%d (checkpoint %d)", i, r, i-1, sp.CheckpointId)
			}
		}
		if want := min(i+1, 2); ev.count(actors.EventTaskFailed) < want {
			t.Errorf("phase %d: %d task failures, want the %d injected", i, ev.count(actors.EventTaskFailed), want)
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
	// Phase 0 restores state only if a checkpoint completed before its
	// stage1 failure: one failure more, or not.
	if n := pf.injected.Load(); n < 2*int64(len(pars))-1 || n > 2*int64(len(pars)) {
		t.Errorf("%d failures injected, want %d or %d", n, 2*len(pars)-1, 2*len(pars))
	}
}

// stopWithSavepoint stops j with a savepoint called name, retrying while a
// failover aborts it, and checks that the job stopped.
func stopWithSavepoint(t *testing.T, j *actors.Job, name string) uint64 {
	t.Helper()
	for attempt := 0; ; attempt++ {
		id, err := j.StopWithSavepoint(context.Background(), name)
		if err == nil {
			if werr := j.Wait(); !errors.Is(werr, actors.ErrStopped) || !strings.Contains(werr.Error(), name) {
				t.Fatalf("Wait after StopWithSavepoint = %v, want ErrStopped naming the savepoint", werr)
			}
			return id
		}
		if attempt == 20 {
			t.Fatalf("StopWithSavepoint(%s): %v", name, err)
		}
		t.Logf("StopWithSavepoint(%s) failed, the job runs on; again: %v", name, err)
	}
}

// TestStopWithSavepointNothingAfter: once StopWithSavepoint returns, the
// sink has received exactly the records that the savepoint's state counts,
// and the sources' positions hold them all: no record after the barrier
// reached state or sink. The job ends cleanly, with ErrStopped.
func TestStopWithSavepointNothingAfter(t *testing.T) {
	shape := rescaleShape{job: "stop", n: 1 << 40, maxP: 16} // effectively unbounded
	store := snapshots.NewMem()
	gate := testsrc.NewGate(1 << 40)
	var sunk atomic.Int64
	g := shape.build(2, gate, func(int64) error { sunk.Add(1); return nil })
	var ev events
	sub := ev.subscribe()
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithListener(ev.listen), actors.WithCheckpointInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, sub, "a checkpoint", func(e actors.Event) bool { return e.Kind == actors.EventCheckpointCompleted })
	id := stopWithSavepoint(t, j, "stop")
	rp, err := snapshots.NewCheckpoints(store, shape.job, nil).LoadSavepoint(context.Background(), "stop")
	if err != nil {
		t.Fatal(err)
	}
	if rp.Manifest.CheckpointId != id || rp.Manifest.Savepoint != "stop" {
		t.Fatalf("savepoint manifest %v, want checkpoint %d named stop", rp.Manifest, id)
	}
	var counted int64
	for _, c := range states(t, rp, "stage1", "count") {
		counted += c
	}
	var produced int64
	for _, st := range rp.States {
		if st.Operator == "source-a" || st.Operator == "source-b" {
			n, err := countSplits(st.Splits)
			if err != nil {
				t.Fatal(err)
			}
			produced += n
		}
	}
	if counted == 0 || counted != sunk.Load() || counted != produced {
		t.Fatalf("the savepoint counts %d records, the sink received %d, the sources' positions hold %d: they must be equal (and not 0)",
			counted, sunk.Load(), produced)
	}
}

// countSplits returns how many records GatedSplits splits at these
// positions have produced, for splits never divided: a split at next with
// step s started at next % s.
func countSplits(splits [][]byte) (int64, error) {
	var n int64
	for _, b := range splits {
		if len(b) != 16 {
			return 0, fmt.Errorf("split of %d bytes", len(b))
		}
		next, step := int64(be64(b)), int64(be64(b[8:]))
		n += (next - next%step) / step
	}
	return n, nil
}

func be64(b []byte) uint64 {
	var x uint64
	for _, c := range b[:8] {
		x = x<<8 | uint64(c)
	}
	return x
}
