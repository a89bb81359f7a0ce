package topology

import (
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
	// size estimates the bytes of the record at a pointer when they vary
	// per record and batches are bounded in bytes; it is nil otherwise.
	size       func(unsafe.Pointer) int
	batchBytes int
	pool       *sync.Pool
}

// route is one outgoing edge: its partitioning and a buffer per target task.
type route[T any] struct {
	partition Partition
	first     int // index of the first target in the task's outputs
	keyGroup  func(T) int
	maxP      int
	next      int // rebalance: the target currently being filled
	bufs      [][]T
	bytes     []int // estimated bytes per buffer, when the Collector sizes records
}

func newCollector[T any](ic *InstanceContext) (*Collector[T], error) {
	c := &Collector[T]{sender: ic.Sender, batchBytes: ic.BatchBytes, pool: poolOf[T]()}
	c.batchSize, c.size = byteLimits[T](ic.BatchSize, ic.BatchBytes)
	for _, o := range ic.Task.Routes {
		// Written per record: on cache lines of their own (see isolated).
		r := route[T]{partition: o.Partition, first: o.First, maxP: o.MaxParallelism, bufs: isolatedSlice[[]T](o.Targets)}
		if c.size != nil {
			r.bytes = isolatedSlice[int](o.Targets)
		}
		if o.Partition == PartitionHash {
			kg, ok := o.keyGroup.(func(T) int)
			if !ok {
				return nil, errorf("task %s: key group function of type %T does not match the stream", ic.Task.ID, o.keyGroup)
			}
			r.keyGroup = kg
		}
		c.routes = append(c.routes, r)
	}
	return c, nil
}

// Emit sends v downstream. It allocates nothing except when a batch is full.
func (c *Collector[T]) Emit(v T) {
	if c.size != nil {
		c.emitSized(v, -1)
		return
	}
	for i := range c.routes {
		r := &c.routes[i]
		switch r.partition {
		case PartitionForward:
			c.add(r, 0, v)
		case PartitionRebalance:
			if c.add(r, r.next, v) {
				r.next++
				if r.next == len(r.bufs) {
					r.next = 0
				}
			}
		case PartitionBroadcast:
			for t := range r.bufs {
				c.add(r, t, v)
			}
		case PartitionHash:
			c.add(r, r.keyGroup(v)*len(r.bufs)/r.maxP, v)
		}
	}
}

// add appends v to target t's buffer and sends the buffer when it holds
// batchSize records; it reports whether it sent.
func (c *Collector[T]) add(r *route[T], t int, v T) bool {
	b := r.bufs[t]
	if b == nil {
		b = takeBatch[T](c.pool, c.batchSize)
	}
	b = append(b, v)
	if len(b) >= c.batchSize {
		c.sender.Send(r.first+t, b)
		r.bufs[t] = nil
		return true
	}
	r.bufs[t] = b
	return false
}

// emitSized is Emit for records sized one by one. size is v's estimated
// size or, when negative, not known yet: v is then sized once, in the first
// buffer it is appended to.
func (c *Collector[T]) emitSized(v T, size int) {
	for i := range c.routes {
		r := &c.routes[i]
		switch r.partition {
		case PartitionForward:
			c.addSized(r, 0, v, &size)
		case PartitionRebalance:
			if c.addSized(r, r.next, v, &size) {
				r.next++
				if r.next == len(r.bufs) {
					r.next = 0
				}
			}
		case PartitionBroadcast:
			for t := range r.bufs {
				c.addSized(r, t, v, &size)
			}
		case PartitionHash:
			c.addSized(r, r.keyGroup(v)*len(r.bufs)/r.maxP, v, &size)
		}
	}
}

// addSized is add for records sized one by one: it also sends the buffer
// once its estimated bytes reach batchBytes. The record is sized in place,
// in the buffer, so that v does not escape.
func (c *Collector[T]) addSized(r *route[T], t int, v T, size *int) bool {
	b := r.bufs[t]
	if b == nil {
		b = takeBatch[T](c.pool, c.batchSize)
	}
	b = append(b, v)
	if *size < 0 {
		*size = c.size(unsafe.Pointer(&b[len(b)-1]))
	}
	r.bytes[t] += *size
	if len(b) >= c.batchSize || r.bytes[t] >= c.batchBytes {
		c.sender.Send(r.first+t, b)
		r.bufs[t] = nil
		r.bytes[t] = 0
		return true
	}
	r.bufs[t] = b
	return false
}

// flush sends every non-empty buffer.
func (c *Collector[T]) flush() {
	for i := range c.routes {
		r := &c.routes[i]
		for t, b := range r.bufs {
			if len(b) > 0 {
				c.sender.Send(r.first+t, b)
				r.bufs[t] = nil
				if r.bytes != nil {
					r.bytes[t] = 0
				}
			}
		}
	}
}
