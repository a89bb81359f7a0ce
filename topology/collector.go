package topology

import "sync"

// Collector emits records of type T to every consumer of an operator's output
// stream, batching them per downstream channel. Operators receive one; it is
// not safe for concurrent use.
type Collector[T any] struct {
	routes    []route[T]
	sender    Sender
	batchSize int
	pool      *sync.Pool
}

// route is one outgoing edge: its partitioning and a buffer per target task.
type route[T any] struct {
	partition Partition
	first     int // index of the first target in the task's outputs
	keyGroup  func(T) int
	maxP      int
	next      int // rebalance: the target currently being filled
	bufs      [][]T
}

func newCollector[T any](ic *InstanceContext) (*Collector[T], error) {
	c := &Collector[T]{sender: ic.Sender, batchSize: max(1, ic.BatchSize), pool: poolOf[T]()}
	for _, o := range ic.Task.Routes {
		r := route[T]{partition: o.Partition, first: o.First, maxP: o.MaxParallelism, bufs: make([][]T, o.Targets)}
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

// add appends v to target t's buffer and sends the buffer when full; it
// reports whether it sent.
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

// flush sends every non-empty buffer.
func (c *Collector[T]) flush() {
	for i := range c.routes {
		r := &c.routes[i]
		for t, b := range r.bufs {
			if len(b) > 0 {
				c.sender.Send(r.first+t, b)
				r.bufs[t] = nil
			}
		}
	}
}
