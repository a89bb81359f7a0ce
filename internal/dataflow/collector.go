package dataflow

import (
	"math"
	"sync"
	"unsafe"
)

// Collector emits records of type T to every consumer of an operator's output
// stream, batching them per downstream channel. A batch is sent once it holds
// the batch size in records or, with a byte bound (InstanceContext.
// BatchBytes), once its estimated bytes reach the bound; the record that
// reaches it may overshoot it. Operators receive one; it is not safe for
// concurrent use.
type Collector[T any] struct {
	routes []route[T]
	sender Sender
	// batchSize is the record limit of a batch. For a T of static size it
	// is also the byte bound, turned into records: such records are never
	// sized one by one.
	batchSize int
	// sizer estimates the bytes of a record when they vary per record and
	// batches are bounded in bytes; it is nil otherwise.
	sizer *sizer
	// byteBound is the byte bound of a batch: batchBytes when records are
	// sized, otherwise never reached.
	byteBound int
	pool      *sync.Pool
	// timed: the output carries event timestamps, and every record emitted
	// is stamped with ts, which the operator sets before it emits (the
	// input record's timestamp, or a timer's time).
	timed bool
	ts    int64
	// single is the batch of the only target, when the Collector has one
	// route to one target, records of static size and no timestamps: Emit
	// appends to it directly. nil otherwise.
	single *outBatch[T]
	// kgs holds the key groups of a batch emitAll routes by hash.
	kgs []uint32
}

// route is one outgoing edge: its partitioning and a batch being filled per
// target task.
type route[T any] struct {
	partition Partition
	first     int // index of the first target in the task's outputs
	keyGroup  func(T) int
	keyGroups func(vs []T, dst []uint32) // keyGroup of a batch, in one call
	scale     uint64                     // hash: a key group's target is kg*scale>>32 (see targetScale)
	next      int                        // rebalance: the target currently being filled
	// outs holds a batch per target. They are written per record: on cache
	// lines of their own (see isolated).
	outs []outBatch[T]
}

// outBatch is the batch being filled for one target, nil when none is, and
// its estimated bytes when the Collector sizes records.
type outBatch[T any] struct {
	recs  []T
	ts    []int64 // the records' timestamps, when the Collector is timed
	bytes int
}

// targetScale returns the factor that maps the key groups of a hash edge to
// its targets without a division: for every key group kg < maxP,
// kg*scale>>32 equals kg*targets/maxP (TaskForKeyGroup). scale is
// targets*2^32/maxP rounded up, and the product is exact while kg*maxP <
// 2^32, which MaxParallelismLimit guarantees.
func targetScale(targets, maxP int) uint64 {
	return (uint64(targets)<<32 + uint64(maxP) - 1) / uint64(maxP)
}

func newCollector[T any](ic *InstanceContext) (*Collector[T], error) {
	return newSideCollector[T](ic, 0)
}

// newSideCollector returns the Collector of the task's output side: 0 for
// its main output, k for its k-th side output.
func newSideCollector[T any](ic *InstanceContext, side int) (*Collector[T], error) {
	n := 0
	for _, o := range ic.Task.Routes {
		if o.Side == side {
			n++
		}
	}
	// Read per record, and its routes written per batch: on cache lines of
	// their own (see isolated).
	c := isolated[Collector[T]]()
	*c = Collector[T]{sender: ic.Sender, pool: poolOf[T](), routes: isolatedSlice[route[T]](n),
		timed: ic.Task.Timed, ts: minTime}
	c.batchSize, c.sizer = batchLimits[T](ic.BatchSize, ic.BatchBytes)
	c.byteBound = math.MaxInt
	if c.sizer != nil {
		c.byteBound = ic.BatchBytes
	}
	i := 0
	for _, o := range ic.Task.Routes {
		if o.Side != side {
			continue
		}
		r := route[T]{partition: o.Partition, first: o.First, outs: isolatedSlice[outBatch[T]](o.Targets)}
		if o.Partition == PartitionHash {
			kg, ok := o.keyGroup.(keyGrouper[T])
			if !ok {
				return nil, errorf("task %s: key group function of type %T does not match the stream", ic.Task.ID, o.keyGroup)
			}
			if o.MaxParallelism < 1 || o.MaxParallelism > MaxParallelismLimit {
				return nil, errorf("task %s: route to %s: max parallelism %d is outside 1..%d", ic.Task.ID, o.To, o.MaxParallelism, MaxParallelismLimit)
			}
			r.keyGroup, r.keyGroups, r.scale = kg.of, kg.all, targetScale(o.Targets, o.MaxParallelism)
		}
		c.routes[i] = r
		i++
	}
	if n == 1 && len(c.routes[0].outs) == 1 && c.routes[0].partition != PartitionBroadcast && c.sizer == nil && !c.timed {
		c.single = &c.routes[0].outs[0]
	}
	return c, nil
}

// target returns the target of v on a hash route.
func (r *route[T]) target(v *T) int { return r.targetOf(uint32(r.keyGroup(*v))) }

// targetOf returns the target of key group kg on a hash route.
func (r *route[T]) targetOf(kg uint32) int { return int(uint64(kg) * r.scale >> 32) }

// Emit sends v downstream. It allocates nothing except when a batch is full.
func (c *Collector[T]) Emit(v T) {
	// The usual output of one target, records of static size and no
	// timestamps: a record that neither starts nor fills its batch is
	// appended here, without emit's checks and call.
	if o := c.single; o != nil {
		if n := len(o.recs); n > 0 && n+1 < c.batchSize {
			o.recs = append(o.recs, v)
			return
		}
	}
	c.emit(&v, -1)
}

// emitSized is Emit of a record whose estimated size the caller knows.
func (c *Collector[T]) emitSized(v T, size int) { c.emit(&v, size) }

// emit appends the record at v to its batch on every route. size is its
// estimated size or, when negative, not known yet: the record is then sized
// once, in the first batch it is appended to, so that v does not escape.
func (c *Collector[T]) emit(v *T, size int) {
	if len(c.routes) == 1 && c.routes[0].partition != PartitionBroadcast {
		// The usual output: one route, one target per record. This is
		// add, inlined: the record is copied once, and nothing is called
		// but the key group function.
		r := &c.routes[0]
		t := r.next // rebalance; 0 for forward
		if r.partition == PartitionHash {
			t = r.target(v)
		}
		o := &r.outs[t]
		if o.recs == nil {
			o.recs = takeBatch[T](c.pool, c.batchSize)
		}
		o.recs = append(o.recs, *v)
		if c.timed {
			o.ts = appendStamp(o.ts, c.ts, c.batchSize)
		}
		if c.sizer != nil {
			if size < 0 {
				size = c.sizer.recordSize(unsafe.Pointer(&o.recs[len(o.recs)-1]))
			}
			o.bytes += size
		}
		if len(o.recs) >= c.batchSize || o.bytes >= c.byteBound {
			c.send(r, t)
			if r.partition == PartitionRebalance {
				r.advance()
			}
		}
		return
	}
	for i := range c.routes {
		r := &c.routes[i]
		switch r.partition {
		case PartitionHash:
			size, _ = c.add(r, r.target(v), v, size)
		case PartitionForward:
			size, _ = c.add(r, 0, v, size)
		case PartitionRebalance:
			var sent bool
			if size, sent = c.add(r, r.next, v, size); sent {
				r.advance()
			}
		case PartitionBroadcast:
			for t := range r.outs {
				size, _ = c.add(r, t, v, size)
			}
		}
	}
}

// emitAll emits the records of vs in order, as Emit of each would, and
// returns their estimated bytes (0 when records are not sized). A source
// emits what it reads with it: on the usual output, one route to one
// target per record, the loop runs here, with no call per record; on a hash
// route, the key groups of all of vs are computed first, in one call. ts,
// when the Collector is timed, holds the records' timestamps.
func (c *Collector[T]) emitAll(vs []T, ts []int64) (bytes int) {
	if len(c.routes) != 1 || c.routes[0].partition == PartitionBroadcast {
		for i := range vs {
			if c.timed {
				c.ts = ts[i]
			}
			size := -1
			if c.sizer != nil {
				size = c.sizer.recordSize(unsafe.Pointer(&vs[i]))
				bytes += size
			}
			c.emit(&vs[i], size)
		}
		return bytes
	}
	r := &c.routes[0]
	if r.partition == PartitionHash {
		return c.emitAllHashed(r, vs, ts)
	}
	for i := range vs {
		v := &vs[i]
		t := r.next // rebalance; 0 for forward
		o := &r.outs[t]
		if o.recs == nil {
			o.recs = takeBatch[T](c.pool, c.batchSize)
		}
		o.recs = append(o.recs, *v)
		if c.timed {
			o.ts = appendStamp(o.ts, ts[i], c.batchSize)
		}
		if c.sizer != nil {
			size := c.sizer.recordSize(unsafe.Pointer(v))
			bytes += size
			o.bytes += size
		}
		if len(o.recs) >= c.batchSize || o.bytes >= c.byteBound {
			c.send(r, t)
			if r.partition == PartitionRebalance {
				r.advance()
			}
		}
	}
	return bytes
}

// emitAllHashed is emitAll on the usual output of a hash route: the key
// groups of the whole of vs are computed first, in one call, and then each
// record is appended to its target's batch.
func (c *Collector[T]) emitAllHashed(r *route[T], vs []T, ts []int64) (bytes int) {
	if cap(c.kgs) < len(vs) {
		c.kgs = make([]uint32, len(vs))
	}
	kgs := c.kgs[:len(vs)]
	r.keyGroups(vs, kgs)
	timed, sizer, limit, bound := c.timed, c.sizer, c.batchSize, c.byteBound
	for i := range vs {
		v := &vs[i]
		t := r.targetOf(kgs[i])
		o := &r.outs[t]
		if o.recs == nil {
			o.recs = takeBatch[T](c.pool, limit)
		}
		o.recs = append(o.recs, *v)
		if timed {
			o.ts = appendStamp(o.ts, ts[i], limit)
		}
		if sizer != nil {
			size := sizer.recordSize(unsafe.Pointer(v))
			bytes += size
			o.bytes += size
		}
		if len(o.recs) >= limit || o.bytes >= bound {
			c.send(r, t)
		}
	}
	return bytes
}

// add appends the record at v to target t's batch and sends the batch once
// it holds batchSize records or, when records are sized, once its bytes
// reach batchBytes. It returns the record's size, computed when size is
// negative and records are sized, and whether it sent.
func (c *Collector[T]) add(r *route[T], t int, v *T, size int) (int, bool) {
	o := &r.outs[t]
	if o.recs == nil {
		o.recs = takeBatch[T](c.pool, c.batchSize)
	}
	o.recs = append(o.recs, *v)
	if c.timed {
		o.ts = appendStamp(o.ts, c.ts, c.batchSize)
	}
	if c.sizer != nil {
		if size < 0 {
			size = c.sizer.recordSize(unsafe.Pointer(&o.recs[len(o.recs)-1]))
		}
		o.bytes += size
	}
	if len(o.recs) < c.batchSize && o.bytes < c.byteBound {
		return size, false
	}
	c.send(r, t)
	return size, true
}

// advance moves a rebalance route to its next target.
func (r *route[T]) advance() {
	r.next++
	if r.next == len(r.outs) {
		r.next = 0
	}
}

// send sends target t's batch and starts a new one.
func (c *Collector[T]) send(r *route[T], t int) {
	o := &r.outs[t]
	b, ts := o.recs, o.ts
	o.recs, o.ts, o.bytes = nil, nil, 0
	c.sender.Send(r.first+t, b, ts)
}

// pending reports whether a batch is partly filled: whether flush would
// send one.
func (c *Collector[T]) pending() bool {
	for i := range c.routes {
		for t := range c.routes[i].outs {
			if len(c.routes[i].outs[t].recs) > 0 {
				return true
			}
		}
	}
	return false
}

// flush sends every non-empty batch.
func (c *Collector[T]) flush() {
	for i := range c.routes {
		r := &c.routes[i]
		for t := range r.outs {
			if len(r.outs[t].recs) > 0 {
				c.send(r, t)
			}
		}
	}
}
