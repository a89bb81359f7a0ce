package actors_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestChannelStateReplayOrder: after a restore from an unaligned
// checkpoint, every channel delivers its records in the order it carried
// them, each exactly once, whether they were stored as its sender's
// output (queued there for lack of credit) or as its receiver's input
// (arrived and not processed, or arrived before that input's barrier).
//
// The job: source (2 splits) -> mark (keyed, 2 tasks; tags each record
// with its task) -> relabel (1 task, the 2 inputs) -> check (keyed by the
// record's path: split and mark task). Records of one path cross the
// same channels in order, so check must see each path's values strictly
// increasing. check holds its first batch until the first barrier reaches
// it, so every queue before it is full when checkpoint 1 is taken: the
// marks' output queues, relabel's input and output. A batch queued at a
// mark is then behind relabel's first barrier, from the other mark. Then
// check fails once, and the job restores from checkpoint 1, replaying all
// of it.
func TestChannelStateReplayOrder(t *testing.T) {
	const n = 60_000
	gate := testsrc.NewGate(n / 2)
	g := topology.New("order")
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i + 1 }, gate, topology.Parallelism(2))
	mark := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 64 }), "mark",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			times := topology.MapOf[int64, int64](ks, "times")
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				c, _ := times.Get(v)
				times.Put(v, c+1)
				out.Emit(v*2 + int64(ctx.TaskID()[len(ctx.TaskID())-1]-'0'))
				return nil
			}
		}, topology.Parallelism(2))
	relabel := topology.Map(mark, "relabel", func(x int64) int64 { return x }, topology.Parallelism(1))
	var failNext atomic.Bool
	path := func(x int64) int64 { return ((x/2-1)%2)*2 + x%2 } // split, mark task
	checked := topology.Process(topology.KeyBy(relabel, path), "check",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			last := topology.Value[int64](ks, "last")
			bad := topology.Value[int64](ks, "bad")
			times := topology.MapOf[int64, int64](ks, "times")
			buf := make([]byte, 64)
			return func(ctx *topology.Context[int64], x int64, out *topology.Collector[int64]) error {
				if failNext.CompareAndSwap(true, false) {
					panic("injected failure in check")
				}
				for range 40 { // a slow stage
					buf[0]++
					_ = crc32.ChecksumIEEE(buf)
				}
				v := x / 2
				if l, _ := last.Get(); v <= l {
					b, _ := bad.Get()
					bad.Set(b + 1)
				}
				last.Set(v)
				c, _ := times.Get(v)
				times.Put(v, c+1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(1))
	topology.Sink(checked, "sink", func(int64) error { return nil })

	store := snapshots.NewMem()
	var ev events
	replays := &countLog{msg: "replaying the channel state of an unaligned checkpoint"}
	first := map[string]uint64{}
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(slog.New(teeHandler{replays, testLogger(t).Handler()})),
		actors.WithCheckpointMode(actors.CheckpointUnaligned), actors.WithCheckpointInterval(0), holdUntilBarrier("check#0"),
		actors.WithListener(ev.listen), actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && e.Checkpoint == 1 {
				for _, tc := range e.Tasks {
					first[tc.Task] = tc.InFlight
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	// check holds its first batch: once relabel and both marks queue
	// output for lack of credit, every channel before check is full.
	deadline := time.Now().Add(time.Minute)
	for !queuing(j, "mark#0", "mark#1", "relabel#0") {
		if time.Now().After(deadline) {
			t.Fatal("the tasks before check never ran out of credit")
		}
		time.Sleep(time.Millisecond) // polls a condition; no push signal exists
	}
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	failNext.Store(true)
	gate.SetLimit(n) // records enough to reach check after the failure is armed
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	var parts []string
	for _, task := range []string{"mark#0", "mark#1", "relabel#0", "check#0"} {
		parts = append(parts, fmt.Sprintf("%s %d B", task, first[task]))
	}
	t.Logf("checkpoint %d in flight: %s; %d restores, %d tasks replayed channel state", id, strings.Join(parts, ", "),
		ev.count(actors.EventRestoring), replays.n.Load())
	if id != 1 || first["mark#0"] == 0 || first["mark#1"] == 0 || first["relabel#0"] == 0 || first["check#0"] == 0 {
		t.Fatalf("checkpoint %d: want checkpoint 1 with records in flight at both marks (queued output), relabel and check", id)
	}
	if ev.count(actors.EventRestoring) == 0 || replays.n.Load() < 4 {
		t.Fatal("no restore replayed the channel state of every task that stored some")
	}
	rp, err := snapshots.NewCheckpoints(store, "order", nil).LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("load the final checkpoint: %v", err)
	}
	for _, st := range rp.States {
		if st.Operator != "check" {
			continue
		}
		bad, err := topology.DecodeValueState[int64, int64](st, "bad")
		if err != nil {
			t.Fatal(err)
		}
		for p, b := range bad {
			if b != 0 {
				t.Errorf("path %d (split %d, mark#%d): %d records arrived out of order", p, p/2, p%2, b)
			}
		}
	}
	for _, op := range []string{"mark", "check"} {
		got := countsOf(t, store, "order", op)
		for v := int64(1); v <= n; v++ {
			if got[v] != 1 {
				t.Fatalf("%s counted value %d %d times, want exactly once", op, v, got[v])
			}
		}
	}
}
