package dataflow

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCollectorEmitHash emits int64 records keyed by themselves to
// four tasks in batches of 256 records or 1 MiB, the runtime's defaults.
func BenchmarkCollectorEmitHash(b *testing.B) {
	g := New("bench")
	Sink(KeyBy(Sequence(g, "src", 1, 2), id64).Stream, "sink", discard[int64], Parallelism(4))
	p := mustPlan(b, g)
	c, err := newCollector[int64](&InstanceContext{Task: mustTask(b, p, "src#0"), BatchSize: 256, BatchBytes: 1 << 20, Sender: noopSender{}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var v int64
	for b.Loop() {
		c.Emit(v)
		v++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkCollectorEmitStrings emits structs holding a string of 100 bytes,
// keyed by their id, to four tasks in batches of 256 records or 1 MiB: each
// record is sized.
func BenchmarkCollectorEmitStrings(b *testing.B) {
	g := New("bench")
	s := Generate(g, "src", 1, func(int64) withString { return withString{} })
	Sink(KeyBy(s, func(v withString) int64 { return v.ID }).Stream, "sink", discard[withString], Parallelism(4))
	p := mustPlan(b, g)
	c, err := newCollector[withString](&InstanceContext{Task: mustTask(b, p, "src#0"), BatchSize: 256, BatchBytes: 1 << 20, Sender: noopSender{}})
	if err != nil {
		b.Fatal(err)
	}
	payload := strings.Repeat("p", 100)
	b.ReportAllocs()
	var v int64
	for b.Loop() {
		c.Emit(withString{ID: v, Payload: payload})
		v++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkProcessBatch runs batches of 256 events of 1000 string keys
// through a Process task keeping a sum per key and emitting it.
func BenchmarkProcessBatch(b *testing.B) {
	const batch = 256
	g := New("bench")
	byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
	sums := Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
		sum := Value[int64](s, "sum")
		return func(_ *Context[string], e event, out *Collector[int64]) error {
			v, _ := sum.Get()
			sum.Set(v + e.N)
			out.Emit(v + e.N)
			return nil
		}
	})
	Sink(sums, "sink", discard[int64])
	p := mustPlan(b, g)
	inst := mustInstance(b, p, "agg#0", batch, noopSender{})
	batches := make([][]event, 64)
	for i := range batches {
		batches[i] = make([]event, batch)
		for j := range batches[i] {
			n := i*batch + j
			batches[i][j] = event{User: fmt.Sprintf("user-%d", n%1000), N: int64(n)}
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if err := inst.ProcessBatch(0, batches[i%len(batches)], nil); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "records/s")
}
