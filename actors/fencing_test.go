package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/chaos"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// semanticsJob is source -> checker "check" (p=1) -> sink, with n records
// over 16 keys; fail panics the checker once at each listed record index
// (seq*16+key).
func semanticsJob(name string, n int64, v *chaos.Violations) (*topology.Graph, *chaos.Sink) {
	g := topology.New(name)
	src := chaos.Generate(g, "source", 0, 16, n, 0)
	sink := chaos.NewSink(v)
	topology.Sink(chaos.Check(src, "check", 1, nil, v), "sink", sink.Write)
	return g, sink
}

func checkSemantics(t *testing.T, store snapshots.Store, job string, n int64, sink *chaos.Sink, v *chaos.Violations) {
	t.Helper()
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
	want := chaos.Expected(0, 16, n)
	if d := chaos.Diff(sink.Max(), want); d != "" {
		t.Fatalf("sink: %s", d)
	}
	rp, err := snapshots.NewCheckpoints(store, job, nil).LoadLatest(context.Background())
	if err != nil || rp == nil {
		t.Fatalf("final checkpoint: %v", err)
	}
	got, err := topology.DecodeValueState[int64, int64](rp.States["check#0"], "last")
	if err != nil {
		t.Fatal(err)
	}
	if d := chaos.Diff(got, want); d != "" {
		t.Fatalf("final state: %s", d)
	}
}

// TestQueuedMessagesAreFenced: batches queued in a slow task's mailbox when
// the job restores belong to the old epoch and never reach its new state.
func TestQueuedMessagesAreFenced(t *testing.T) {
	const n = 50_000
	var v chaos.Violations
	g, sink := semanticsJob("fenced", n, &v)
	block := make(chan struct{})
	blocked := make(chan struct{})
	var once, failOnce sync.Once
	var processed int
	faults := &actorstest.Faults{
		Process: func(task string) {
			if task != "check#0" {
				return
			}
			processed++ // only check#0's actor goroutine touches it
			if processed == 20 {
				once.Do(func() { close(blocked); <-block })
			}
		},
		// Once check#0 is stuck, the source fails at its next snapshot: the
		// whole job restores while check#0's mailbox holds batches of the
		// old epoch.
		Snapshot: func(task string, _ uint64) {
			if task == "source#0" {
				select {
				case <-blocked:
					failOnce.Do(func() { panic("the source fails while check#0 is stuck") })
				default:
				}
			}
		},
	}
	store := snapshots.NewMem()
	var ev events
	restoring := ev.subscribe()
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actorstest.WithFaults(faults), actors.WithListener(ev.listen), actors.WithCheckpointInterval(5*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-blocked
	waitFor(t, restoring, "a restore", func(e actors.Event) bool { return e.Kind == actors.EventRestoring })
	close(block)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if j.Stats().StaleMessages == 0 {
		t.Fatal("no stale message was dropped: the test did not queue any")
	}
	t.Logf("%d stale messages dropped", j.Stats().StaleMessages)
	checkSemantics(t, store, "fenced", n, sink, &v)
}

// TestSequenceGapRecovers drops one batch between two tasks: the receiver
// detects the gap, fails, and the job recovers exactly.
func TestSequenceGapRecovers(t *testing.T) {
	for _, fault := range []actorstest.BatchFault{actorstest.Drop, actorstest.Duplicate} {
		t.Run(map[actorstest.BatchFault]string{actorstest.Drop: "drop", actorstest.Duplicate: "duplicate"}[fault], func(t *testing.T) {
			const n = 40_000
			var v chaos.Violations
			g, sink := semanticsJob("gap", n, &v)
			var once sync.Once
			faults := &actorstest.Faults{Batch: func(from, to string, seq uint64) actorstest.BatchFault {
				f := actorstest.Deliver
				if from == "source#0" && seq == 30 {
					once.Do(func() { f = fault })
				}
				return f
			}}
			store := snapshots.NewMem()
			var ev events
			j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
				actorstest.WithFaults(faults), actors.WithListener(ev.listen), actors.WithCheckpointInterval(5*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			f := ev.of(actors.EventTaskFailed)
			if len(f) != 1 || !strings.Contains(f[0].Err.Error(), "sequence gap") || f[0].Task != "check#0" {
				t.Fatalf("failures %+v, want one sequence gap in check#0", f)
			}
			checkSemantics(t, store, "gap", n, sink, &v)
		})
	}
}

// TestUnknownMessagesAreDropped sends a task messages it does not know: they
// are logged and dropped, and the job is unaffected.
func TestUnknownMessagesAreDropped(t *testing.T) {
	const n = 20_000
	var v chaos.Violations
	g, sink := semanticsJob("unknown", n, &v)
	gate := make(chan struct{})
	var once sync.Once
	faults := &actorstest.Faults{Process: func(task string) {
		if task == "check#0" {
			once.Do(func() { <-gate })
		}
	}}
	var logs syncBuilder
	store := snapshots.NewMem()
	var ev events
	running := ev.subscribe()
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(textLogger(&logs)),
		actorstest.WithFaults(faults), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, running, "the job to run", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
	actors.SendToTask(j, "check#0", "a string")
	actors.SendToTask(j, "check#0", &messages.RecordBatch{Epoch: 1, Data: []byte("undecodable"), Ends: []uint32{99}})
	actors.SendToTask(j, "check#0", struct{ X int }{7})
	close(gate)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(logs.String(), "dropping a message of unknown type"); got != 2 {
		t.Fatalf("%d unknown messages logged, want 2:\n%s", got, logs.String())
	}
	if got := strings.Count(logs.String(), "dropping an encoded batch on an input from this process"); got != 1 {
		t.Fatalf("%d encoded batches dropped, want 1:\n%s", got, logs.String())
	}
	checkSemantics(t, store, "unknown", n, sink, &v)
}

// failingCodec fails to encode while failing is set.
type failingCodec struct {
	topology.Codec[int64]
	mu      sync.Mutex
	failing bool
}

func (c *failingCodec) set(f bool) { c.mu.Lock(); c.failing = f; c.mu.Unlock() }

func (c *failingCodec) Append(dst []byte, v int64) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing {
		return dst, errors.New("cannot encode this value")
	}
	return c.Codec.Append(dst, v)
}

// TestUnserializableStateIsDeclined: state that fails to serialize declines
// the checkpoint; within the tolerable failures the job goes on, and later
// checkpoints complete.
func TestUnserializableStateIsDeclined(t *testing.T) {
	const n = 30_000
	codec := &failingCodec{Codec: topology.DefaultCodec[int64]()}
	gate := testsrcGate(n)
	g := topology.New("declined")
	src := gate.source(g)
	sums := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 2 }), "sum",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, kv] {
			total := topology.Value[int64](ks, "total", codec)
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[kv]) error {
				t, _ := total.Get()
				total.Set(t + v)
				out.Emit(kv{ctx.Key(), t + v})
				return nil
			}
		}, topology.Parallelism(2))
	out := newLatest()
	topology.Sink(sums, "sink", out.put)
	store := snapshots.NewMem()
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen),
		actors.WithCheckpointInterval(0), actors.WithTolerableCheckpointFailures(5))
	if err != nil {
		t.Fatal(err)
	}
	gate.g.WaitReached(t, 1000)
	codec.set(true)
	for range 3 {
		if _, err := j.Checkpoint(context.Background()); err == nil || !strings.Contains(err.Error(), "cannot encode") {
			t.Fatalf("checkpoint with unserializable state: %v", err)
		}
	}
	codec.set(false)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatalf("checkpoint after the state is serializable again: %v", err)
	}
	gate.g.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if ev.count(actors.EventRestoring) != 0 {
		t.Fatal("the job restored although the failures were tolerable")
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "declined", "sum"), map[int64]int64{0: paritySum(n, 0), 1: paritySum(n, 1)})
}

// TestTopologyChangeAllowed: WithAllowTopologyChange restores a checkpoint
// of a different fingerprint when the tasks still match.
func TestTopologyChangeAllowed(t *testing.T) {
	store := snapshots.NewMem()
	build := func(rebalance bool, limit int64) (*topology.Graph, *gatedParity) {
		gp := testsrcGate(limit)
		g := topology.New("evolve")
		src := gp.source(g)
		if rebalance {
			src = topology.Rebalance(src)
		}
		doubled := topology.Map(src, "double", func(v int64) int64 { return 2 * v })
		topology.Sink(keyedSum(topology.KeyBy(doubled, func(v int64) int64 { return v % 4 }), "sum", 1, nil), "sink", func(kv) error { return nil })
		return g, gp
	}
	g1, gp1 := build(false, 10_000)
	j, err := actors.Start(context.Background(), g1, actors.WithStore(store), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gp1.g.SetLimit(500)
	gp1.g.WaitReached(t, 500)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	g2, _ := build(true, 10_000)
	if _, err := actors.Start(context.Background(), g2, actors.WithStore(store)); err == nil || !strings.Contains(err.Error(), "different topology") {
		t.Fatalf("Start without allowing the change: %v", err)
	}
	g3, gp3 := build(true, 10_000)
	gp3.g.SetLimit(10_000)
	var ev events
	j3, err := actors.Start(context.Background(), g3, actors.WithStore(store), actors.WithAllowTopologyChange(), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{MaxFailures: 1}))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j3); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint == 0 {
		t.Fatalf("did not resume from the checkpoint: %+v", r)
	}
	want := map[int64]int64{}
	for v := int64(1); v <= 10_000; v++ {
		want[2*v%4] += 2 * v
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "evolve", "sum"), want)
}
