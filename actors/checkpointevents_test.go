package actors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestCheckpointEventsCarryTaskFigures: every checkpoint and savepoint is
// announced by EventCheckpointTriggered, and its EventCheckpointCompleted
// has one TaskCheckpoint per task, ordered by task id, whose bytes add up
// to the event's and whose longest alignment and upload are the event's.
func TestCheckpointEventsCarryTaskFigures(t *testing.T) {
	const n = 5000
	gate := testsrcGate(n)
	g := topology.New("figures")
	sums := keyedSum(topology.KeyBy(gate.source(g), func(v int64) int64 { return v % 8 }), "sum", 2, nil)
	topology.Sink(sums, "sink", func(kv) error { return nil }, topology.Parallelism(2))
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	gate.g.WaitReached(t, 1000)
	chk, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	sp, err := j.Savepoint(context.Background(), "figures-sp")
	if err != nil {
		t.Fatal(err)
	}
	gate.g.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	triggered := map[uint64]actors.Event{}
	for _, e := range ev.of(actors.EventCheckpointTriggered) {
		triggered[e.Checkpoint] = e
	}
	if e := triggered[chk]; e.Kind != actors.EventCheckpointTriggered || e.Savepoint != "" || e.Final {
		t.Errorf("checkpoint %d: triggered event %+v", chk, e)
	}
	if e := triggered[sp]; e.Kind != actors.EventCheckpointTriggered || e.Savepoint != "figures-sp" {
		t.Errorf("savepoint %d: triggered event %+v, want one naming the savepoint", sp, e)
	}
	var plan []string
	for _, p := range actors.PlanOf(j).Tasks {
		plan = append(plan, p.ID)
	}
	slices.Sort(plan) // every operator has fewer than 10 tasks: string order is task-id order
	completed := ev.of(actors.EventCheckpointCompleted)
	if len(completed) != 3 || completed[0].Checkpoint != chk || completed[1].Checkpoint != sp || !completed[2].Final {
		t.Fatalf("completed: %+v, want checkpoint %d, savepoint %d and the final checkpoint", completed, chk, sp)
	}
	for _, c := range completed {
		tr, ok := triggered[c.Checkpoint]
		if !ok || tr.Time.After(c.Time) || tr.Final != c.Final || tr.Savepoint != c.Savepoint {
			t.Errorf("checkpoint %d: triggered %+v, completed at %v", c.Checkpoint, tr, c.Time)
		}
		var ids []string
		var bytes uint64
		var align, upload time.Duration
		for _, tc := range c.Tasks {
			ids = append(ids, tc.Task)
			bytes += tc.Bytes
			align, upload = max(align, tc.Alignment), max(upload, tc.Async)
			if tc.Bytes == 0 || tc.Sync <= 0 || tc.Async <= 0 {
				t.Errorf("checkpoint %d: task figures %+v, want bytes and sync and async times", c.Checkpoint, tc)
			}
		}
		if !slices.Equal(ids, plan) {
			t.Errorf("checkpoint %d: tasks %v, want %v", c.Checkpoint, ids, plan)
		}
		if bytes != c.Bytes || align != c.Alignment || upload != c.Upload || c.Bytes == 0 {
			t.Errorf("checkpoint %d: tasks add up to %d bytes, alignment %v, upload %v; the event says %d, %v, %v",
				c.Checkpoint, bytes, align, upload, c.Bytes, c.Alignment, c.Upload)
		}
	}
}

// TestCheckpointAbortSaysDeclined: a checkpoint aborted because a task
// declined it (its state failed to serialize) is reported Declined, naming
// the task; one aborted by a task failure is not.
func TestCheckpointAbortSaysDeclined(t *testing.T) {
	codec := &failingCodec{Codec: topology.DefaultCodec[int64]()}
	gate := testsrcGate(10_000)
	g := topology.New("declined-event")
	sums := topology.Process(topology.KeyBy(gate.source(g), func(v int64) int64 { return v % 2 }), "sum",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, kv] {
			total := topology.Value[int64](ks, "total", codec)
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[kv]) error {
				x, _ := total.Get()
				total.Set(x + v)
				out.Emit(kv{ctx.Key(), x + v})
				return nil
			}
		}, topology.Parallelism(2))
	topology.Sink(sums, "sink", func(kv) error { return nil })
	var failSnapshot atomic.Bool
	faults := &actorstest.Faults{Snapshot: func(task string, _ uint64) {
		if task == "source#0" && failSnapshot.CompareAndSwap(true, false) {
			panic("injected failure in the snapshot of " + task)
		}
	}}
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithListener(ev.listen), actors.WithCheckpointInterval(0), actors.WithTolerableCheckpointFailures(5), actorstest.WithFaults(faults),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 3, Window: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	gate.g.WaitReached(t, 1000)
	codec.set(true)
	if _, err := j.Checkpoint(context.Background()); err == nil {
		t.Fatal("a checkpoint of unserializable state completed")
	}
	codec.set(false)
	aborted := ev.of(actors.EventCheckpointAborted)
	if len(aborted) != 1 {
		t.Fatalf("aborted: %+v, want the declined checkpoint", aborted)
	}
	if a := aborted[0]; !a.Declined || (a.Task != "sum#0" && a.Task != "sum#1") || a.Err == nil || !strings.Contains(a.Err.Error(), "cannot encode") {
		t.Errorf("the declined checkpoint's abort: %+v (err %v), want Declined by a sum task", a, a.Err)
	}
	failSnapshot.Store(true)
	if _, err := j.Checkpoint(context.Background()); err == nil {
		t.Fatal("a checkpoint whose source failed completed")
	}
	aborted = ev.of(actors.EventCheckpointAborted)
	if len(aborted) != 2 {
		t.Fatalf("aborted: %+v, want the declined checkpoint and the one of the failure", aborted)
	}
	if a := aborted[1]; a.Declined || a.Task != "" {
		t.Errorf("the abort by a task failure: %+v, want it not declined", a)
	}
	gate.g.SetLimit(10_000)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
}

// TestTaskFailedCauses: EventTaskFailed classifies each failure: a panic,
// an error an operator returned, and a failure while restoring state.
// (A commit that fails is TestFileSinkCommitFailures's; a lost worker is
// TestClusterWorkerLeavesInProcess's.)
func TestTaskFailedCauses(t *testing.T) {
	policy := actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 5, Window: time.Hour})
	run := func(t *testing.T, g *topology.Graph, opts ...actors.Option) []actors.Event {
		t.Helper()
		var ev events
		opts = append(opts, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen), policy)
		if err := actors.Run(context.Background(), g, opts...); err != nil {
			t.Fatal(err)
		}
		return ev.of(actors.EventTaskFailed)
	}
	chain := func(name string, mid func(topology.Stream[int64]) topology.Stream[int64]) *topology.Graph {
		g := topology.New(name)
		topology.Sink(mid(topology.Generate(g, "source", 5000, func(i int64) int64 { return i })), "sink", func(int64) error { return nil })
		return g
	}
	t.Run("panic", func(t *testing.T) {
		var once atomic.Bool
		faults := &actorstest.Faults{Process: func(task string) {
			if task == "double#0" && once.CompareAndSwap(false, true) {
				panic("injected panic")
			}
		}}
		g := chain("cause-panic", func(s topology.Stream[int64]) topology.Stream[int64] {
			return topology.Map(s, "double", func(v int64) int64 { return 2 * v })
		})
		f := run(t, g, actorstest.WithFaults(faults))
		if len(f) != 1 || f[0].Cause != actors.CausePanic || f[0].Task != "double#0" {
			t.Fatalf("failures: %+v, want one panic of double#0", f)
		}
	})
	t.Run("error", func(t *testing.T) {
		var once atomic.Bool
		errInjected := errors.New("injected: the operator returns an error")
		g := chain("cause-error", func(s topology.Stream[int64]) topology.Stream[int64] {
			return topology.FlatMap(s, "check", func(v int64, out *topology.Collector[int64]) error {
				if v == 1234 && once.CompareAndSwap(false, true) {
					return errInjected
				}
				out.Emit(v)
				return nil
			})
		})
		f := run(t, g)
		if len(f) != 1 || f[0].Cause != actors.CauseError || f[0].Task != "check#0" || !errors.Is(f[0].Err, errInjected) {
			t.Fatalf("failures: %+v, want one error of check#0", f)
		}
	})
	t.Run("restore", func(t *testing.T) {
		gate := testsrcGate(5000)
		g := topology.New("cause-restore")
		topology.Sink(topology.Map(gate.source(g), "double", func(v int64) int64 { return 2 * v }), "sink", func(int64) error { return nil })
		var failProcess, failRestore atomic.Bool
		faults := &actorstest.Faults{
			Process: func(task string) {
				if task == "double#0" && failProcess.CompareAndSwap(true, false) {
					panic("injected panic")
				}
			},
			Restore: func(task string, _ uint64) {
				if task == "source#0" && failRestore.CompareAndSwap(true, false) { // the task with state
					panic("injected failure loading the state")
				}
			},
		}
		var ev events
		j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
			actors.WithListener(ev.listen), actors.WithCheckpointInterval(0), actorstest.WithFaults(faults), policy)
		if err != nil {
			t.Fatal(err)
		}
		gate.g.WaitReached(t, 1000)
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
		failRestore.Store(true)
		failProcess.Store(true)
		gate.g.SetLimit(5000)
		if err := waitJob(t, j); err != nil {
			t.Fatal(err)
		}
		f := ev.of(actors.EventTaskFailed)
		causes := make([]actors.FailureCause, len(f))
		for i, e := range f {
			causes[i] = e.Cause
		}
		if !slices.Equal(causes, []actors.FailureCause{actors.CausePanic, actors.CauseRestore}) {
			t.Fatalf("failure causes %v (%+v), want a panic, then a failure of the restore", causes, f)
		}
	})
}
