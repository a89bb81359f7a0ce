package topology

import (
	"slices"
	"testing"
)

// collectorFor plans g and returns a collector of task id's output with the
// given batch size, writing to a fake sender.
func collectorFor[T any](t *testing.T, g *Graph, id string, batchSize int) (*Plan, *TaskPlan, *Collector[T], *fakeSender) {
	t.Helper()
	p := mustPlan(t, g)
	task := mustTask(t, p, id)
	f := &fakeSender{}
	c, err := newCollector[T](&InstanceContext{Task: task, BatchSize: batchSize, Sender: f})
	if err != nil {
		t.Fatalf("newCollector: %v", err)
	}
	return p, task, c, f
}

func seq(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i)
	}
	return out
}

func TestCollectorForward(t *testing.T) {
	g := New("job")
	Sink(Forward(Sequence(g, "src", 1, 2, Parallelism(2))), "sink", discard[int64], Parallelism(2))
	p, task, c, f := collectorFor[int64](t, g, "src#1", 4)
	for _, v := range seq(10) {
		c.Emit(v)
	}
	c.flush()
	got := recordsByTask[int64](t, p, task, f)
	if len(got) != 1 || !slices.Equal(got["sink#1"], seq(10)) {
		t.Errorf("forward from src#1 delivered %v, want all of 0..9 to sink#1", got)
	}
}

func TestCollectorRebalance(t *testing.T) {
	g := New("job")
	Sink(Rebalance(Sequence(g, "src", 1, 2)), "sink", discard[int64], Parallelism(3))
	const batch = 4
	p, task, c, f := collectorFor[int64](t, g, "src#0", batch)
	for _, v := range seq(14) {
		c.Emit(v)
	}
	if len(f.sends) != 3 {
		t.Fatalf("%d batches sent before the flush, want 3", len(f.sends))
	}
	for _, s := range f.sends {
		if n := len(s.batch.([]int64)); n != batch {
			t.Errorf("batch of %d records before the flush, want %d", n, batch)
		}
	}
	c.flush()
	if len(f.sends) != 4 || len(f.sends[3].batch.([]int64)) != 2 {
		t.Errorf("flush sent %d batches, want one partial batch of 2", len(f.sends)-3)
	}
	got := recordsByTask[int64](t, p, task, f)
	if len(got) != 3 {
		t.Errorf("rebalance reached %d tasks, want 3: %v", len(got), got)
	}
	all := append(append(append([]int64(nil), got["sink#0"]...), got["sink#1"]...), got["sink#2"]...)
	slices.Sort(all)
	if !slices.Equal(all, seq(14)) {
		t.Errorf("rebalance delivered %v, want each of 0..13 once", all)
	}
}

func TestCollectorBroadcast(t *testing.T) {
	g := New("job")
	Sink(Broadcast(Sequence(g, "src", 1, 2)), "sink", discard[int64], Parallelism(3))
	p, task, c, f := collectorFor[int64](t, g, "src#0", 3)
	for _, v := range seq(7) {
		c.Emit(v)
	}
	c.flush()
	got := recordsByTask[int64](t, p, task, f)
	for _, id := range []string{"sink#0", "sink#1", "sink#2"} {
		if !slices.Equal(got[id], seq(7)) {
			t.Errorf("broadcast delivered %v to %s, want 0..6", got[id], id)
		}
	}
	// Each target owns its batch: changing one must not change another.
	f.sends[0].batch.([]int64)[0] = 99
	if f.sends[1].batch.([]int64)[0] != 0 {
		t.Error("broadcast batches share memory")
	}
}

func TestCollectorHash(t *testing.T) {
	const maxP = 32
	g := New("job", MaxParallelism(maxP))
	s := Sequence(g, "src", 1, 2)
	key := func(v int64) int64 { return v % 50 }
	Sink(KeyBy(s, key).Stream, "sink", discard[int64], Parallelism(3))
	p, task, c, f := collectorFor[int64](t, g, "src#0", 5)
	for _, v := range seq(1000) {
		c.Emit(v)
	}
	c.flush()
	got := recordsByTask[int64](t, p, task, f)
	if len(got) != 3 {
		t.Errorf("hash reached %d tasks, want 3", len(got))
	}
	n := 0
	where := map[int64]string{}
	for id, vs := range got {
		to := mustTask(t, p, id)
		for _, v := range vs {
			n++
			k := key(v)
			kg := int(HashUint64(uint64(k)) % maxP)
			if kg < to.KeyGroupStart || kg >= to.KeyGroupEnd {
				t.Fatalf("record %d (key %d, key group %d) went to %s, which owns [%d,%d)",
					v, k, kg, id, to.KeyGroupStart, to.KeyGroupEnd)
			}
			if prev, ok := where[k]; ok && prev != id {
				t.Fatalf("key %d went to %s and %s", k, prev, id)
			}
			where[k] = id
		}
	}
	if n != 1000 {
		t.Errorf("hash delivered %d records, want 1000", n)
	}
}

func TestCollectorBatching(t *testing.T) {
	g := New("job")
	Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
	_, _, c, f := collectorFor[int64](t, g, "src#0", 3)
	c.Emit(1)
	c.Emit(2)
	if len(f.sends) != 0 {
		t.Fatalf("sent %d batches before one was full", len(f.sends))
	}
	c.Emit(3)
	if len(f.sends) != 1 || !slices.Equal(f.sends[0].batch.([]int64), []int64{1, 2, 3}) {
		t.Fatalf("a full batch was not sent at once: %v", f.sends)
	}
	c.flush()
	if len(f.sends) != 1 {
		t.Fatalf("flush of empty buffers sent %d batches", len(f.sends)-1)
	}
	c.Emit(4)
	c.flush()
	if len(f.sends) != 2 || !slices.Equal(f.sends[1].batch.([]int64), []int64{4}) {
		t.Fatalf("flush did not send the partial batch: %v", f.sends)
	}
	c.flush()
	if len(f.sends) != 2 {
		t.Fatal("a second flush sent again")
	}
}

func TestCollectorBatchSizeAtLeastOne(t *testing.T) {
	g := New("job")
	Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
	_, _, c, f := collectorFor[int64](t, g, "src#0", 0)
	c.Emit(7)
	if len(f.sends) != 1 {
		t.Errorf("batch size 0 sent %d batches for one record, want 1", len(f.sends))
	}
}

func TestCollectorTwoConsumers(t *testing.T) {
	g := New("job")
	s := Sequence(g, "src", 1, 2)
	Sink(s, "one", discard[int64])
	Sink(Broadcast(s), "two", discard[int64], Parallelism(2))
	p, task, c, f := collectorFor[int64](t, g, "src#0", 2)
	for _, v := range seq(5) {
		c.Emit(v)
	}
	c.flush()
	got := recordsByTask[int64](t, p, task, f)
	for _, id := range []string{"one#0", "two#0", "two#1"} {
		if !slices.Equal(got[id], seq(5)) {
			t.Errorf("%s got %v, want 0..4", id, got[id])
		}
	}
}

func TestCollectorKeyGroupTypeMismatch(t *testing.T) {
	g := New("job")
	Sink(KeyBy(Sequence(g, "src", 1, 2), id64).Stream, "sink", discard[int64])
	p := mustPlan(t, g)
	task := mustTask(t, p, "src#0")
	if _, err := newCollector[string](&InstanceContext{Task: task, Sender: noopSender{}}); err == nil {
		t.Error("a collector of strings accepted a key group function of int64")
	}
}

func TestCollectorEmitAllocs(t *testing.T) {
	const perRun = 100
	for _, tt := range []struct {
		name  string
		build func(Stream[int64])
	}{
		{"forward", func(s Stream[int64]) { Sink(s, "sink", discard[int64]) }},
		{"rebalance", func(s Stream[int64]) { Sink(Rebalance(s), "sink", discard[int64], Parallelism(3)) }},
		{"broadcast", func(s Stream[int64]) { Sink(Broadcast(s), "sink", discard[int64], Parallelism(3)) }},
		{"hash", func(s Stream[int64]) { Sink(KeyBy(s, id64).Stream, "sink", discard[int64], Parallelism(3)) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := New("job")
			tt.build(Sequence(g, "src", 1, 2))
			task := mustTask(t, mustPlan(t, g), "src#0")
			emit := func(c *Collector[int64]) func() {
				var v int64
				return func() {
					for range perRun {
						c.Emit(v)
						v++
					}
				}
			}
			// Batches never fill: nothing may be allocated. AllocsPerRun's
			// warm-up run creates the buffers.
			c, err := newCollector[int64](&InstanceContext{Task: task, BatchSize: 1 << 20, Sender: noopSender{}})
			if err != nil {
				t.Fatal(err)
			}
			if a := testing.AllocsPerRun(100, emit(c)); a != 0 {
				t.Errorf("Emit allocates %.1f times per %d records with no full batch, want 0", a, perRun)
			}
			// Batches of 10 fill: at most a new buffer and the boxing of the
			// batch for Send per full batch.
			c, err = newCollector[int64](&InstanceContext{Task: task, BatchSize: 10, Sender: noopSender{}})
			if err != nil {
				t.Fatal(err)
			}
			full := float64(perRun / 10)
			if tt.name == "broadcast" {
				full *= 3
			}
			if a := testing.AllocsPerRun(100, emit(c)); a > 2*full+3 {
				t.Errorf("Emit allocates %.1f times per %d records, with %v full batches", a, perRun, full)
			}
		})
	}
}
