package dataflow

import (
	"fmt"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// benchProfile is a JSON-encoded state value.
type benchProfile struct {
	Name  string
	Tags  []string
	Score float64
}

// benchStates fills one task's int64 value state, map state and JSON value
// state with keys entries each, and returns the task's instance.
func benchStates(b *testing.B, keys int) Instance {
	b.Helper()
	g := New("bench")
	byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
	out := Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
		sum := Value[int64](s, "sum")
		parity := MapOf[string, int64](s, "parity")
		prof := Value[benchProfile](s, "profile")
		return func(ctx *Context[string], e event, _ *Collector[int64]) error {
			sum.Set(e.N)
			parity.Put("even", e.N)
			prof.Set(benchProfile{Name: ctx.Key(), Tags: []string{"a", "b"}, Score: float64(e.N)})
			return nil
		}
	})
	Sink(out, "sink", discard[int64])
	p := mustPlan(b, g)
	inst := mustInstance(b, p, "agg#0", 256, noopSender{})
	batch := make([]event, keys)
	for i := range batch {
		batch[i] = event{User: fmt.Sprintf("user-%d", i), N: int64(i)}
	}
	if err := inst.ProcessBatch(0, batch, nil); err != nil {
		b.Fatal(err)
	}
	return inst
}

// BenchmarkSnapshotKeyedState snapshots 10,000 keys of three states.
func BenchmarkSnapshotKeyedState(b *testing.B) {
	const keys = 10000
	inst := benchStates(b, keys)
	b.ReportAllocs()
	for b.Loop() {
		var st messages.TaskState
		if err := inst.Snapshot(&st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*keys)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkRestoreKeyedState restores 10,000 keys of three states into a
// fresh instance.
func BenchmarkRestoreKeyedState(b *testing.B) {
	const keys = 10000
	inst := benchStates(b, keys)
	var st messages.TaskState
	if err := inst.Snapshot(&st); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fresh := benchStates(b, 0)
		b.StartTimer()
		if err := fresh.Restore(&st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*keys)/b.Elapsed().Seconds(), "keys/s")
}

// benchKeyedBatches returns batches of 256 events over keys distinct users.
func benchKeyedBatches(keys int) [][]event {
	const batch = 256
	out := make([][]event, 64)
	for i := range out {
		out[i] = make([]event, batch)
		for j := range out[i] {
			n := i*batch + j
			out[i][j] = event{User: fmt.Sprintf("user-%d", n*7919%keys), N: int64(n)}
		}
	}
	return out
}

// runKeyedBatches feeds copies of batches to inst (ProcessBatch clears and
// pools the batches it is given) and reports ns and records per second,
// and the benchmark goroutine's CPU ns per record where it can be measured.
func runKeyedBatches(b *testing.B, inst Instance, batches [][]event) {
	b.Helper()
	pool := poolOf[event]()
	b.ReportAllocs()
	cpu := threadCPU(b)
	i := 0
	for b.Loop() {
		src := batches[i%len(batches)]
		v := pool.Get()
		if v == nil || cap(v.([]event)) < len(src) {
			v = make([]event, len(src))
		}
		copy(v.([]event)[:len(src)], src)
		if err := inst.ProcessBatch(0, v, nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	records := float64(b.N * len(batches[0]))
	if nanos, ok := cpu(); ok {
		b.ReportMetric(float64(nanos)/records, "cpu-ns/record")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
	b.ReportMetric(records/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkProcessValueState runs batches of 256 events over 4096 keys
// through a Process task whose function does, per record: "getset" a
// ValueState[int64] Get and Set (string and int64 keys), "getset-skip" the
// same in a task created with InstanceContext.SkipDirtyKeyGroups; "read" a Get only
// (a record that writes no state, once every key has a value); "slice" a Get of a []int64 value mutated
// in place (a value reachable through a reference).
func BenchmarkProcessValueState(b *testing.B) {
	const keys = 4096
	batches := benchKeyedBatches(keys)
	build := func(b *testing.B, g *Graph) Instance {
		p := mustPlan(b, g)
		return mustInstance(b, p, "agg#0", 256, noopSender{})
	}
	getsetString := func() *Graph {
		g := New("bench")
		byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
		Sink(Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
			sum := Value[int64](s, "sum")
			return func(_ *Context[string], e event, _ *Collector[int64]) error {
				v, _ := sum.Get()
				sum.Set(v + e.N)
				return nil
			}
		}), "sink", discard[int64])
		return g
	}
	getsetInt := func() *Graph {
		g := New("bench")
		byN := KeyBy(FromSlice(g, "src", []event{}), func(e event) int64 { return e.N % keys })
		Sink(Process(byN, "agg", func(s *KeyedSetup[int64]) ProcessFunc[int64, event, int64] {
			sum := Value[int64](s, "sum")
			return func(_ *Context[int64], e event, _ *Collector[int64]) error {
				v, _ := sum.Get()
				sum.Set(v + e.N)
				return nil
			}
		}), "sink", discard[int64])
		return g
	}
	untracked := func(b *testing.B, g *Graph) Instance {
		p := mustPlan(b, g)
		inst, err := p.NewInstance(mustTask(b, p, "agg#0").Index, InstanceContext{BatchSize: 256, Sender: noopSender{}, SkipDirtyKeyGroups: true})
		if err != nil {
			b.Fatal(err)
		}
		return inst
	}
	b.Run("getset/string", func(b *testing.B) { runKeyedBatches(b, build(b, getsetString()), batches) })
	b.Run("getset/int64", func(b *testing.B) { runKeyedBatches(b, build(b, getsetInt()), batches) })
	b.Run("getset-skip/string", func(b *testing.B) { runKeyedBatches(b, untracked(b, getsetString()), batches) })
	b.Run("getset-skip/int64", func(b *testing.B) { runKeyedBatches(b, untracked(b, getsetInt()), batches) })
	b.Run("read/string", func(b *testing.B) {
		g := New("bench")
		byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
		var seen int64
		Sink(Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
			sum := Value[int64](s, "sum")
			return func(_ *Context[string], e event, _ *Collector[int64]) error {
				v, ok := sum.Get()
				if !ok { // the first pass over the keys writes, the rest only read
					sum.Set(1)
				}
				seen += v
				return nil
			}
		}), "sink", discard[int64])
		runKeyedBatches(b, build(b, g), batches)
	})
	b.Run("slice/string", func(b *testing.B) {
		g := New("bench")
		byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
		Sink(Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
			hist := Value[[]int64](s, "hist")
			return func(_ *Context[string], e event, _ *Collector[int64]) error {
				h, ok := hist.Get()
				if !ok {
					hist.Set(make([]int64, 4))
					return nil
				}
				h[e.N&3]++
				return nil
			}
		}), "sink", discard[int64])
		runKeyedBatches(b, build(b, g), batches)
	})
}

// BenchmarkSnapshotKeyGroups snapshots a task holding 1M string keys of a
// ValueState[int64] over 1024 key groups: "full" is Snapshot; "1pct" is
// SnapshotKeyGroups of 10 key groups (about 1% of the keys); "none" of no
// key group, the cost of finding every key's key group. ns/key is per key
// of the task, selected or not; cpu-ns/key counts the benchmark
// goroutine's CPU time only, without the garbage collector's.
func BenchmarkSnapshotKeyGroups(b *testing.B) {
	const keys, maxP = 1 << 20, 1024
	g := New("bench", MaxParallelism(maxP))
	byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
	var sum *ValueState[string, int64]
	Sink(Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
		sum = Value[int64](s, "sum")
		return func(*Context[string], event, *Collector[int64]) error { return nil }
	}), "sink", discard[int64])
	inst := mustInstance(b, mustPlan(b, g), "agg#0", 256, noopSender{})
	for i := range keys {
		sum.m.set(fmt.Sprintf("user-%d", i), int64(i))
	}
	ks := inst.(KeyGroupSnapshotter)
	some := make([]uint64, KeyGroupWords(maxP))
	for kg := 0; kg < maxP; kg += maxP / 10 {
		some[kg/64] |= 1 << (kg % 64)
	}
	for _, c := range []struct {
		name string
		snap func(*messages.TaskState) error
	}{
		{"full", inst.Snapshot},
		{"1pct", func(st *messages.TaskState) error { return ks.SnapshotKeyGroups(st, some) }},
		{"none", func(st *messages.TaskState) error { return ks.SnapshotKeyGroups(st, []uint64{}) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			entries := 0
			cpu := threadCPU(b)
			for b.Loop() {
				var st messages.TaskState
				if err := c.snap(&st); err != nil {
					b.Fatal(err)
				}
				entries = 0
				for _, kg := range st.KeyGroups {
					entries += len(kg.States[0].Entries)
				}
			}
			if nanos, ok := cpu(); ok {
				b.ReportMetric(float64(nanos)/float64(b.N*keys), "cpu-ns/key")
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*keys), "ns/key")
			b.ReportMetric(float64(entries), "entries")
			b.ReportMetric(0, "ns/op")
		})
	}
}
