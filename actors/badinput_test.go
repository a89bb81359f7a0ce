package actors_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/leaktest"
	"go.uber.org/goleak"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

func TestStartRejectsInvalidTopology(t *testing.T) {
	g := topology.New("bad")
	src := topology.Sequence(g, "source", 1, 10)
	topology.Map(src, "dangling", func(v int64) int64 { return v })
	_, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()))
	if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), `"dangling"`) {
		t.Fatalf("Start: %v, want a validation error naming the dangling operator", err)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	g := topology.New("opts")
	topology.Sink(topology.Sequence(g, "source", 1, 10), "sink", func(int64) error { return nil })
	for name, opt := range map[string]actors.Option{
		"batch size": actors.WithBatchSize(0),
		"credits":    actors.WithCredits(-1),
		"linger":     actors.WithLinger(0),
		"retained":   actors.WithRetainedCheckpoints(0),
		"interval":   actors.WithCheckpointInterval(-1),
	} {
		if _, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), opt); err == nil {
			t.Errorf("%s: Start accepted a bad value", name)
		}
	}
}

// TestStartFailsOnUnwritableStore: a store directory that can no longer be
// written makes Start fail with an error that names it.
func TestStartFailsOnUnwritableStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Tests run as root, for whom permissions do not stop writes: replace
	// the directory by a regular file instead.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	g := topology.New("unwritable")
	topology.Sink(topology.Sequence(g, "source", 1, 10), "sink", func(int64) error { return nil })
	_, err = actors.Start(context.Background(), g, actors.WithStore(store))
	if err == nil || !strings.Contains(err.Error(), "not usable") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Start: %v, want a clear error naming %s", err, dir)
	}
}

// TestTopologyChangeIsRefused: a checkpoint of one topology is not restored
// into another unless the user allows it, and the refusal names what
// changed (the sum's parallelism).
func TestTopologyChangeIsRefused(t *testing.T) {
	store := snapshots.NewMem()
	gate := testsrc.NewGate(50)
	build := func(p int) *topology.Graph {
		g := topology.New("evolving")
		src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: 100, Gate: gate} })
		topology.Sink(keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % 3 }), "sum", p, nil), "sink", func(kv) error { return nil })
		return g
	}
	j, err := actors.Start(context.Background(), build(1), actors.WithStore(store), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 50)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	_, err = actors.Start(context.Background(), build(2), actors.WithStore(store))
	if err == nil || !strings.Contains(err.Error(), "different topology") {
		t.Fatalf("Start with another topology: %v", err)
	}
	if want := `from the checkpoint to this job: operator "sum": parallelism from 1 to 2`; !strings.Contains(err.Error(), want) {
		t.Errorf("Start with another topology: %v\nwant it to name what changed: %s", err, want)
	}
}

// TestCancelLeavesNothingBehind cancels a running job's context: Wait
// reports ErrStopped and no goroutine of the job survives.
func TestCancelLeavesNothingBehind(t *testing.T) {
	defer leaktest.Check(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := topology.New("cancel")
	src := topology.Generate(g, "source", -1, func(i int64) int64 { return i })
	topology.Sink(keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % 4 }), "sum", 2, nil), "sink", func(kv) error { return nil })
	var ev events
	c := ev.subscribe()
	j, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithListener(ev.listen), actors.WithCheckpointInterval(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, c, "a checkpoint", func(e actors.Event) bool { return e.Kind == actors.EventCheckpointCompleted })
	cancel()
	if err := waitJob(t, j); !errors.Is(err, actors.ErrStopped) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait: %v, want ErrStopped caused by context.Canceled", err)
	}
}

// TestIdleSourceDoesNotSpin: a source with no data is not polled until it
// wakes its task.
func TestIdleSourceDoesNotSpin(t *testing.T) {
	gate := testsrc.NewGate(100)
	var reads atomic.Int64
	g := topology.New("idle")
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &countingSource{Gated: testsrc.Gated{N: 1000, Gate: gate}, reads: &reads}
	})
	topology.Sink(src, "sink", func(int64) error { return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 100)
	before := reads.Load()
	// Two checkpoint round trips through the idle source's mailbox.
	for range 2 {
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if after := reads.Load(); after != before {
		t.Fatalf("the idle source was read %d more times", after-before)
	}
	gate.SetLimit(1000)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
}

type countingSource struct {
	testsrc.Gated
	reads *atomic.Int64
}

func (s *countingSource) Read(buf []int64) (int, error) {
	s.reads.Add(1)
	return s.Gated.Read(buf)
}

// TestProtoactorLogsGoToTheUserLogger: protoactor-go's own log lines reach the
// logger given with WithLogger.
func TestProtoactorLogsGoToTheUserLogger(t *testing.T) {
	var logs syncBuilder
	g := topology.New("logs")
	topology.Sink(topology.Sequence(g, "source", 1, 10), "sink", func(int64) error { return nil })
	if err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(textLogger(&logs))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "component=protoactor") || !strings.Contains(logs.String(), "actor system started") {
		t.Fatalf("protoactor-go's log did not reach the user's logger:\n%s", logs.String())
	}
}

// TestLingerSendsPartlyFilledBatches: records that fill no batch still
// reach the sink while the job runs. The source flushes when it goes idle,
// and the operator after it, whose batch is partly filled, flushes when its
// linger time is up: nothing else would send it.
func TestLingerSendsPartlyFilledBatches(t *testing.T) {
	const first, total = 10, 1000
	gate := testsrc.NewGate(first)
	g := topology.New("linger")
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &testsrc.Gated{N: total, Gate: gate}
	})
	got := make(chan int64, total)
	doubled := topology.Map(src, "double", func(v int64) int64 { return 2 * v })
	topology.Sink(doubled, "sink", func(v int64) error { got <- v; return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0),
		actors.WithBatchSize(4096), actors.WithLinger(2*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.NewTimer(2 * time.Minute)
	defer deadline.Stop()
	sum := int64(0)
	for i := range first {
		select {
		case v := <-got:
			sum += v
		case <-deadline.C:
			t.Fatalf("%d of the first %d records reached the sink: the partly filled batches were not sent", i, first)
		}
	}
	if want := int64(first * (first + 1)); sum != want { // 2 * (1 + ... + first)
		t.Errorf("the first %d records sum to %d at the sink, want %d", first, sum, want)
	}
	gate.SetLimit(total)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	close(got)
	for v := range got {
		sum += v
	}
	if want := int64(total * (total + 1)); sum != want {
		t.Errorf("the sink's records sum to %d, want %d", sum, want)
	}
}
