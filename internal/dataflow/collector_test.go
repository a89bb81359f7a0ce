package dataflow

import (
	"slices"
	"strings"
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
	if c.pending() {
		t.Fatal("a new Collector has a partly filled batch")
	}
	c.Emit(1)
	c.Emit(2)
	if len(f.sends) != 0 {
		t.Fatalf("sent %d batches before one was full", len(f.sends))
	}
	if !c.pending() {
		t.Fatal("a batch of 2 of 3 records is not pending")
	}
	c.Emit(3)
	if len(f.sends) != 1 || !slices.Equal(f.sends[0].batch.([]int64), []int64{1, 2, 3}) {
		t.Fatalf("a full batch was not sent at once: %v", f.sends)
	}
	if c.pending() {
		t.Fatal("pending after the only batch left full: the linger timer would fire for nothing")
	}
	c.flush()
	if len(f.sends) != 1 {
		t.Fatalf("flush of empty buffers sent %d batches", len(f.sends)-1)
	}
	c.Emit(4)
	if !c.pending() {
		t.Fatal("a batch of 1 of 3 records is not pending")
	}
	c.flush()
	if c.pending() {
		t.Fatal("pending after flush")
	}
	if len(f.sends) != 2 || !slices.Equal(f.sends[1].batch.([]int64), []int64{4}) {
		t.Fatalf("flush did not send the partial batch: %v", f.sends)
	}
	c.flush()
	if len(f.sends) != 2 {
		t.Fatal("a second flush sent again")
	}
}

// TestCollectorSingleTarget: a Collector with one route to one target
// appends in Emit itself (single); its batches are those of the general
// path: full ones sent at once, in order, the rest at the flush. Collectors
// with more targets, timestamps or sized records take the general path.
func TestCollectorSingleTarget(t *testing.T) {
	g := New("job")
	Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
	_, _, c, f := collectorFor[int64](t, g, "src#0", 4)
	if c.single == nil {
		t.Fatal("one route to one target: Emit does not append directly")
	}
	for _, v := range seq(11) {
		c.Emit(v)
	}
	c.flush()
	var got [][]int64
	for _, s := range f.sends {
		got = append(got, s.batch.([]int64))
	}
	want := [][]int64{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10}}
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v, want %v", got, want)
	}

	g = New("job")
	Sink(Rebalance(Sequence(g, "src", 1, 2)), "sink", discard[int64], Parallelism(3))
	if _, _, c, _ := collectorFor[int64](t, g, "src#0", 4); c.single != nil {
		t.Error("three targets: Emit appends directly")
	}
	g = New("job")
	Sink(FromSlice(g, "src", []string{"a"}), "sink", discard[string])
	p := mustPlan(t, g)
	sc, err := newCollector[string](&InstanceContext{Task: mustTask(t, p, "src#0"), BatchSize: 4, BatchBytes: 1 << 10, Sender: &fakeSender{}})
	if err != nil {
		t.Fatal(err)
	}
	if sc.single != nil {
		t.Error("records sized one by one (strings under a byte bound): Emit appends directly")
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

// byteCollector is collectorFor with a byte bound.
func byteCollector[T any](t *testing.T, g *Graph, id string, batchSize, batchBytes int) (*Collector[T], *fakeSender) {
	t.Helper()
	f := &fakeSender{}
	c, err := newCollector[T](&InstanceContext{Task: mustTask(t, mustPlan(t, g), id), BatchSize: batchSize, BatchBytes: batchBytes, Sender: f})
	if err != nil {
		t.Fatalf("newCollector: %v", err)
	}
	return c, f
}

// batchLens returns the number of records of every batch sent, in order.
func batchLens[T any](t *testing.T, f *fakeSender) []int {
	t.Helper()
	var out []int
	for _, s := range f.sends {
		b, ok := s.batch.([]T)
		if !ok {
			t.Fatalf("batch of type %T, want []%T", s.batch, *new(T))
		}
		out = append(out, len(b))
	}
	return out
}

func repeat(n, count int) []int {
	out := make([]int, count)
	for i := range out {
		out[i] = n
	}
	return out
}

// TestCollectorBatchBytesLargeRecords checks that records of 1 MiB go in
// batches of one with a bound of 1 MiB, whatever the batch size, and that
// medium records fill a batch until the one that reaches the bound.
func TestCollectorBatchBytesLargeRecords(t *testing.T) {
	const mib = 1 << 20
	build := func() *Graph {
		g := New("job")
		Sink(Generate(g, "src", 1, func(int64) string { return "" }), "sink", discard[string])
		return g
	}
	buildBytes := func() *Graph {
		g := New("job")
		Sink(Generate(g, "src", 1, func(int64) []byte { return nil }), "sink", discard[[]byte])
		return g
	}

	cb, fb := byteCollector[[]byte](t, buildBytes(), "src#0", 256, mib)
	for range 5 {
		cb.Emit(make([]byte, mib))
	}
	if got := batchLens[[]byte](t, fb); !slices.Equal(got, repeat(1, 5)) {
		t.Errorf("1 MiB []byte records: batches of %v, want five of 1", got)
	}

	cs, fs := byteCollector[string](t, build(), "src#0", 256, mib)
	big := strings.Repeat("x", mib)
	for range 5 {
		cs.Emit(big)
	}
	if got := batchLens[string](t, fs); !slices.Equal(got, repeat(1, 5)) {
		t.Errorf("1 MiB strings: batches of %v, want five of 1", got)
	}

	// 400 KiB: two stay below 1 MiB, the third reaches it.
	cm, fm := byteCollector[string](t, build(), "src#0", 256, mib)
	medium := strings.Repeat("y", 400<<10)
	for range 7 {
		cm.Emit(medium)
	}
	cm.flush()
	if got := batchLens[string](t, fm); !slices.Equal(got, []int{3, 3, 1}) {
		t.Errorf("400 KiB strings: batches of %v, want 3, 3 and a flushed 1", got)
	}
	if got := records[string](t, fm); len(got) != 7 || got[6] != medium {
		t.Errorf("sent %d records, want the 7 emitted", len(got))
	}
}

// TestCollectorBatchBytesSmallRecords checks that the byte bound leaves small
// records in full batches, fixed-size or not, and turns a large fixed size
// into fewer records per batch.
func TestCollectorBatchBytesSmallRecords(t *testing.T) {
	const mib = 1 << 20
	g := New("job")
	Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
	c, f := byteCollector[int64](t, g, "src#0", 256, mib)
	for v := range int64(1024) {
		c.Emit(v)
	}
	if got := batchLens[int64](t, f); !slices.Equal(got, repeat(256, 4)) {
		t.Errorf("int64 records: batches of %v, want four of 256", got)
	}

	gs := New("job")
	Sink(Generate(gs, "src", 1, func(int64) withString { return withString{} }), "sink", discard[withString])
	cs, fs := byteCollector[withString](t, gs, "src#0", 256, mib)
	for i := range 512 {
		cs.Emit(withString{ID: int64(i), Payload: "small"})
	}
	if got := batchLens[withString](t, fs); !slices.Equal(got, repeat(256, 2)) {
		t.Errorf("small structs with a string: batches of %v, want two of 256", got)
	}

	type block [64 << 10]byte
	ga := New("job")
	Sink(Generate(ga, "src", 1, func(int64) block { return block{} }), "sink", discard[block])
	ca, fa := byteCollector[block](t, ga, "src#0", 256, mib)
	for range 32 {
		ca.Emit(block{})
	}
	if got := batchLens[block](t, fa); !slices.Equal(got, repeat(16, 2)) {
		t.Errorf("64 KiB arrays: batches of %v, want two of 16 (1 MiB each)", got)
	}
}

// TestCollectorBatchBytesStructWithString checks that a struct is sized by
// the string it holds.
func TestCollectorBatchBytesStructWithString(t *testing.T) {
	g := New("job")
	Sink(Generate(g, "src", 1, func(int64) withString { return withString{} }), "sink", discard[withString])
	c, f := byteCollector[withString](t, g, "src#0", 256, 1<<20)
	payload := strings.Repeat("z", 300<<10)
	for i := range 8 {
		c.Emit(withString{ID: int64(i), Payload: payload})
	}
	// 3 x (24 + 300 KiB) < 1 MiB <= 4 x (24 + 300 KiB)
	if got := batchLens[withString](t, f); !slices.Equal(got, []int{4, 4}) {
		t.Errorf("structs with a 300 KiB string: batches of %v, want two of 4", got)
	}
}

// TestCollectorBatchBytesPerTarget checks that each target's batch counts
// its own bytes, and that a flush starts the count again.
func TestCollectorBatchBytesPerTarget(t *testing.T) {
	g := New("job")
	Sink(Broadcast(Generate(g, "src", 1, func(int64) string { return "" })), "sink", discard[string], Parallelism(2))
	p := mustPlan(t, g)
	task := mustTask(t, p, "src#0")
	f := &fakeSender{}
	c, err := newCollector[string](&InstanceContext{Task: task, BatchSize: 256, BatchBytes: 1 << 20, Sender: f})
	if err != nil {
		t.Fatal(err)
	}
	medium := strings.Repeat("y", 400<<10)
	c.Emit(medium)
	c.Emit(medium)
	c.flush()
	if got := batchLens[string](t, f); !slices.Equal(got, []int{2, 2}) {
		t.Fatalf("broadcast of two 400 KiB strings, flushed: batches of %v, want 2 per target", got)
	}
	f.reset()
	c.Emit(medium)
	c.Emit(medium)
	if len(f.sends) != 0 {
		t.Errorf("after a flush, two 400 KiB strings sent %d batches: the byte count was not reset", len(f.sends))
	}
	c.Emit(medium)
	if got := batchLens[string](t, f); !slices.Equal(got, []int{3, 3}) {
		t.Errorf("third 400 KiB string: batches of %v, want 3 per target", got)
	}
}

// TestCollectorBatchBytesAllocs checks that bounding batches in bytes
// allocates nothing per record, for fixed and variable sizes.
func TestCollectorBatchBytesAllocs(t *testing.T) {
	g := New("job")
	Sink(KeyBy(Generate(g, "src", 1, func(int64) withString { return withString{} }), func(v withString) int64 { return v.ID }).Stream,
		"sink", discard[withString], Parallelism(3))
	task := mustTask(t, mustPlan(t, g), "src#0")
	c, err := newCollector[withString](&InstanceContext{Task: task, BatchSize: 1 << 20, BatchBytes: 1 << 40, Sender: noopSender{}})
	if err != nil {
		t.Fatal(err)
	}
	var i int64
	if a := testing.AllocsPerRun(100, func() {
		for range 100 {
			c.Emit(withString{ID: i, Payload: "payload"})
			i++
		}
	}); a != 0 {
		t.Errorf("Emit of sized records allocates %.1f times per 100 records with no full batch, want 0", a)
	}

	gi := New("job")
	Sink(KeyBy(Sequence(gi, "src", 1, 2), id64).Stream, "sink", discard[int64], Parallelism(3))
	ci, err := newCollector[int64](&InstanceContext{Task: mustTask(t, mustPlan(t, gi), "src#0"), BatchSize: 1 << 20, BatchBytes: 1 << 40, Sender: noopSender{}})
	if err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(100, func() {
		for range 100 {
			ci.Emit(i)
			i++
		}
	}); a != 0 {
		t.Errorf("Emit of int64 records with a byte bound allocates %.1f times per 100 records with no full batch, want 0", a)
	}
}
