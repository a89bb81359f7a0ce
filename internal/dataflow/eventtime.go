package dataflow

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/watermark"
)

// minTime is the timestamp of a record without one (from a source without
// a watermark strategy), and the watermark before any: every record is on
// time against it.
const minTime = math.MinInt64

// WatermarkStrategy tells a source how to stamp its records with event time
// and how far behind the highest timestamp it has read its watermark
// stays. See WithWatermarks.
type WatermarkStrategy[T any] struct {
	// Timestamp returns a record's event time. It is called once per
	// record, in the source's task, and must not block.
	Timestamp func(T) time.Time
	// OutOfOrderness is how far a record may be behind the highest
	// timestamp read before it and still be on time: the watermark is that
	// highest timestamp less OutOfOrderness (less one nanosecond).
	OutOfOrderness time.Duration
	// IdleTimeout, when positive, marks the source task (or, for a
	// SplitReader, a split) idle once its read attempts have found nothing
	// for that long, so that it holds no other input's event time back; it
	// becomes active again with its next record. Zero: never idle.
	//
	// It is counted in read attempts, not on the wall clock: each attempt
	// that finds nothing counts for the time since the one before, but for
	// at most a quarter of IdleTimeout, and a source waiting for records
	// attempts a read every quarter. A pause of the whole process (a long
	// GC pause, CPU starvation, a SIGSTOP) therefore never makes a source
	// idle by itself: it reads again first, and it is idle only after at
	// least four attempts that found nothing. A checkpoint keeps the count,
	// so an idle source is idle again at once after a restore.
	IdleTimeout time.Duration
}

// WithWatermarks gives a source a watermark strategy: its records carry
// event timestamps from strategy.Timestamp, and it sends watermarks
// downstream, which operators combine (the minimum over their inputs) and
// forward. Keyed process functions then see each record's timestamp and
// the current watermark, and event-time timers fire as the watermark
// passes them. It applies to sources only, and T must be the source's
// record type; Validate refuses it otherwise.
func WithWatermarks[T any](strategy WatermarkStrategy[T]) Option {
	return func(o *nodeOptions) { o.watermarks = strategy }
}

// checkWatermarks refuses a source's watermark strategy that is not for
// its record type T, or that is incomplete.
func checkWatermarks[T any](g *Graph, n *node) {
	if n.watermarks == nil {
		return
	}
	ws, ok := n.watermarks.(WatermarkStrategy[T])
	switch {
	case !ok:
		g.problem("operator %q: its watermark strategy is a %s, but the source emits %s", n.name, typeNameOf(n.watermarks), typeNameOf(*new(T)))
	case ws.Timestamp == nil:
		g.problem("operator %q: the watermark strategy has no Timestamp function", n.name)
	case ws.OutOfOrderness < 0:
		g.problem("operator %q: the watermark strategy's OutOfOrderness %v is negative", n.name, ws.OutOfOrderness)
	case ws.IdleTimeout < 0:
		g.problem("operator %q: the watermark strategy's IdleTimeout %v is negative", n.name, ws.IdleTimeout)
	}
}

func typeNameOf(v any) string { return fmt.Sprintf("%T", v) }

// stampPool recycles timestamp slices.
var stampPool sync.Pool

// appendStamp appends ts to a batch's timestamps, taking a slice for size
// timestamps from the pool when the batch has none. It is inlined: a call
// per record costs nothing but the append.
func appendStamp(s []int64, ts int64, size int) []int64 {
	if s == nil {
		s = takeStamps(size)
	}
	return append(s, ts)
}

// takeStamps returns an empty timestamp slice for size timestamps.
func takeStamps(size int) []int64 {
	if v, ok := stampPool.Get().([]int64); ok && cap(v) >= size {
		return v[:0]
	}
	return make([]int64, 0, size)
}

// SplitTimestamps cuts a batch's timestamps after the first n, as
// BatchCodec.Split cuts its records: head is a slice of its own from the
// pool, and tail is ts with the rest moved to its start, so that both go
// back to the pool with their whole capacity.
func SplitTimestamps(ts []int64, n int) (head, tail []int64) {
	head = append(takeStamps(cap(ts)), ts[:n]...)
	k := copy(ts, ts[n:])
	return head, ts[:k]
}

// ReleaseTimestamps returns a batch's timestamps to the pool once the
// batch is processed (or encoded for another node). ts may be nil.
func ReleaseTimestamps(ts []int64) {
	if ts != nil {
		stampPool.Put(ts[:0]) //nolint:staticcheck // a slice header per batch
	}
}

// WatermarkSource is implemented by the instances of sources with a
// watermark strategy: the runtime asks for the task's watermark after
// every read and when the source may have become idle.
type WatermarkSource interface {
	// SourceWatermark is the task's watermark status after its last read
	// attempt.
	SourceWatermark() watermark.Status
	// IdleCheck is how long the source task, waiting for records, waits
	// before it attempts a read again so that it can become idle (see
	// WatermarkStrategy.IdleTimeout), and false when it need not.
	IdleCheck() (time.Duration, bool)
}

// sourceClock stamps a source's records and derives its watermark.
type sourceClock[T any] struct {
	stamp func(T) time.Time
	gen   *watermark.Generator
	ts    []int64 // the timestamps of the records of the current read
	out   watermark.Status
	// splits keeps a watermark per split for a SplitReader (nil
	// otherwise: gen is the task's).
	splits *splitClocks
}

func newSourceClock[T any](ws WatermarkStrategy[T], size int) *sourceClock[T] {
	gen, err := watermark.NewGenerator(ws.OutOfOrderness, ws.IdleTimeout)
	if err != nil { // Validate refused these
		panic(err)
	}
	return &sourceClock[T]{stamp: ws.Timestamp, gen: gen, ts: make([]int64, size), out: watermark.Status{Watermark: minTime}}
}

// stampAll stamps the records of a read and returns their timestamps.
func (c *sourceClock[T]) stampAll(recs []T, now int64) []int64 {
	ts := c.ts[:len(recs)]
	for i := range recs {
		t := c.stamp(recs[i]).UnixNano()
		ts[i] = t
		c.gen.Observe(t)
	}
	c.gen.Read(len(recs), now)
	return ts
}

// stampSplit stamps the records of a read from one split (see SplitReader)
// and returns their timestamps.
func (c *sourceClock[T]) stampSplit(recs []T, r SplitRead, now int64) ([]int64, error) {
	ts := c.ts[:len(recs)]
	hi := int64(minTime)
	for i := range recs {
		t := c.stamp(recs[i]).UnixNano()
		ts[i] = t
		hi = max(hi, t)
	}
	return ts, c.splits.read(r, hi, now)
}

// status is the source's watermark status; it never goes back.
func (c *sourceClock[T]) status() watermark.Status {
	st := watermark.Status{Watermark: c.gen.Watermark(), Idle: c.gen.Idle()}
	if c.splits != nil {
		if s, ok := c.splits.status(); ok {
			st = s
		}
	}
	c.out = watermark.Status{Watermark: max(c.out.Watermark, st.Watermark), Idle: st.Idle}
	return c.out
}

// idleCheck is how long the source, waiting for records, waits before it
// attempts a read again (see WatermarkSource.IdleCheck).
func (c *sourceClock[T]) idleCheck() (time.Duration, bool) {
	if c.splits != nil && c.splits.comb != nil {
		return c.splits.period()
	}
	return c.gen.Idleness().Period()
}

// WatermarkListener is implemented by instances that act on event time
// (keyed process functions, whose event-time timers fire): the runtime
// calls OnWatermark, between batches, each time the task's watermark
// rises, and with watermark.Max once every input has ended.
type WatermarkListener interface {
	OnWatermark(wm int64) error
}

// EncodeTimestamps encodes a batch's timestamps for another node: each as
// the difference from the one before it (see messages.RecordBatch).
func EncodeTimestamps(ts []int64) []int64 {
	out := make([]int64, len(ts))
	prev := int64(0)
	for i, t := range ts {
		out[i] = t - prev
		prev = t
	}
	return out
}

// DecodeTimestamps decodes the timestamps of a batch of n records from
// another node into a slice from the pool.
func DecodeTimestamps(deltas []int64, n int) ([]int64, error) {
	if len(deltas) != n {
		return nil, fmt.Errorf("%w: %d timestamps for %d records", ErrCorruptBatch, len(deltas), n)
	}
	ts := takeStamps(n)
	prev := int64(0)
	for _, d := range deltas {
		prev += d
		ts = append(ts, prev)
	}
	return ts, nil
}
