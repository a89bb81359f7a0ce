package dataflow

import (
	"context"
	"sync"
	"testing"
	"unsafe"
)

// The benchmarks below run the stages of the bench's parity job on one
// goroutine, with the runtime's defaults (batches of 256 records or 1 MiB):
// a source of 16-byte records keyed by a uint64 over 1024 keys, hashed to
// two tasks of a keyed running count that emits a fixed-size record to a
// sink of one task. Batches go back to their pool as a receiving task
// returns them, so that the figures hold no allocation the runtime does not
// make.

// parityRecord is the shape of the bench's records: a key, a time stamp and
// a padding string (empty for 16-byte records), so it is sized per record.
type parityRecord struct {
	Key uint64
	TS  int64
	Pad string
}

// parityOutput is the shape of the keyed count's output: of static size.
type parityOutput struct {
	Key, Sum uint64
	TS       int64
}

// paritySource generates records over 1024 keys, one time stamp per read.
type paritySource struct{ next uint64 }

func (s *paritySource) Open(context.Context, []byte) error { return nil }
func (s *paritySource) Offset() []byte                     { return nil }
func (s *paritySource) Close() error                       { return nil }
func (s *paritySource) Read(buf []parityRecord) (int, error) {
	for i := range buf {
		buf[i] = parityRecord{Key: s.next % 1024, TS: int64(s.next)}
		s.next++
	}
	return len(buf), nil
}

// recycler returns every batch it is sent to the batch pool, cleared, as a
// receiving task does once it has processed the batch.
type recycler[T any] struct {
	pool    *sync.Pool
	records int
}

func (r *recycler[T]) Send(_ int, batch any, _ []int64) {
	b := batch.([]T)
	r.records += len(b)
	clear(b)
	r.pool.Put(batch)
}

// parityGraph is the bench's parity job; the sink is given.
func parityGraph(sink func(parityOutput) error) *Graph {
	g := New("parity", MaxParallelism(128))
	src := FromSource(g, "source", func(int, int) Source[parityRecord] { return &paritySource{} })
	sums := Process(KeyBy(src, func(r parityRecord) uint64 { return r.Key }), "sum",
		func(ks *KeyedSetup[uint64]) ProcessFunc[uint64, parityRecord, parityOutput] {
			sum := Value[uint64](ks, "sum")
			return func(ctx *Context[uint64], r parityRecord, out *Collector[parityOutput]) error {
				v, _ := sum.Get()
				v++
				sum.Set(v)
				out.Emit(parityOutput{Key: ctx.Key(), Sum: v, TS: r.TS})
				return nil
			}
		}, Parallelism(2))
	Sink(sums, "sink", sink)
	return g
}

func parityInstance(b *testing.B, g *Graph, id string, s Sender) Instance {
	b.Helper()
	p := mustPlan(b, g)
	inst, err := p.NewInstance(mustTask(b, p, id).Index, InstanceContext{BatchSize: 256, BatchBytes: 1 << 20, Sender: s})
	if err != nil {
		b.Fatalf("NewInstance(%s): %v", id, err)
	}
	return inst
}

// BenchmarkParitySource is the parity job's source task: read 256 records,
// size each (they hold a string) and hash it to one of two tasks.
func BenchmarkParitySource(b *testing.B) {
	r := &recycler[parityRecord]{pool: poolOf[parityRecord]()}
	inst := parityInstance(b, parityGraph(discard[parityOutput]), "source#0", r)
	if err := inst.(interface {
		Open(context.Context, func()) error
	}).Open(context.Background(), func() {}); err != nil {
		b.Fatal(err)
	}
	src := inst.(interface {
		Produce(int) (int, SourceStatus, error)
	})
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		k, _, err := src.Produce(256)
		if err != nil {
			b.Fatal(err)
		}
		n += k
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkParitySum is the parity job's keyed count: one task processes
// batches of 256 records and emits a running count per record to the sink.
func BenchmarkParitySum(b *testing.B) {
	r := &recycler[parityOutput]{pool: poolOf[parityOutput]()}
	inst := parityInstance(b, parityGraph(discard[parityOutput]), "sum#0", r)
	pool := poolOf[parityRecord]()
	b.ReportAllocs()
	next, n := uint64(0), 0
	for b.Loop() {
		batch := takeBatch[parityRecord](pool, 256)
		for range 256 {
			batch = append(batch, parityRecord{Key: next % 1024, TS: int64(next)})
			next++
		}
		if err := inst.ProcessBatch(0, batch, nil); err != nil {
			b.Fatal(err)
		}
		n += 256
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkCollectorEmitSized emits records sized one by one (they hold a
// string) to two tasks by key, as the parity job's source does.
func BenchmarkCollectorEmitSized(b *testing.B) {
	p := mustPlan(b, parityGraph(discard[parityOutput]))
	r := &recycler[parityRecord]{pool: poolOf[parityRecord]()}
	c, err := newCollector[parityRecord](&InstanceContext{Task: mustTask(b, p, "source#0"), BatchSize: 256, BatchBytes: 1 << 20, Sender: r})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var k uint64
	for b.Loop() {
		c.Emit(parityRecord{Key: k % 1024, TS: int64(k)})
		k++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkCollectorEmitStatic emits records of a static size to one task,
// as the parity job's keyed count does.
func BenchmarkCollectorEmitStatic(b *testing.B) {
	p := mustPlan(b, parityGraph(discard[parityOutput]))
	r := &recycler[parityOutput]{pool: poolOf[parityOutput]()}
	c, err := newCollector[parityOutput](&InstanceContext{Task: mustTask(b, p, "sum#0"), BatchSize: 256, BatchBytes: 1 << 20, Sender: r})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var k uint64
	for b.Loop() {
		c.Emit(parityOutput{Key: k, Sum: k, TS: int64(k)})
		k++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// benchSourceEmit emits reads of 256 parity records as a source does, with
// emit.
func benchSourceEmit(b *testing.B, emit func(c *Collector[parityRecord], size func(unsafe.Pointer) int, buf []parityRecord)) {
	p := mustPlan(b, parityGraph(discard[parityOutput]))
	r := &recycler[parityRecord]{pool: poolOf[parityRecord]()}
	c, err := newCollector[parityRecord](&InstanceContext{Task: mustTask(b, p, "source#0"), BatchSize: 256, BatchBytes: 1 << 20, Sender: r})
	if err != nil {
		b.Fatal(err)
	}
	_, size := byteLimits[parityRecord](256, 1<<20)
	buf := make([]parityRecord, 256)
	src := &paritySource{}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		k, _ := src.Read(buf)
		emit(c, size, buf[:k])
		n += k
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkSourceEmitEach sizes and emits a read record by record.
func BenchmarkSourceEmitEach(b *testing.B) {
	benchSourceEmit(b, func(c *Collector[parityRecord], size func(unsafe.Pointer) int, buf []parityRecord) {
		for i := range buf {
			c.emitSized(buf[i], size(unsafe.Pointer(&buf[i])))
		}
	})
}

// BenchmarkSourceEmitAll emits a read at once (emitAll).
func BenchmarkSourceEmitAll(b *testing.B) {
	benchSourceEmit(b, func(c *Collector[parityRecord], _ func(unsafe.Pointer) int, buf []parityRecord) {
		c.emitAll(buf, nil)
	})
}
