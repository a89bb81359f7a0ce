package baseline

import "github.com/asynkron/protoactor-go/actor"

// output is the sending side of a channel: the batch being filled, the
// credits left, and the full batches waiting for credit. Batches come back
// with the credits and are reused.
type output[T any] struct {
	pid     *actor.PID
	ch      int // this channel's index among the receiver's inputs
	size    int
	credits int
	cur     *batchMsg[T]
	free    []*batchMsg[T]
	queue   []*batchMsg[T]
	end     *endMsg // sent once queue is empty
	ended   bool
}

func newOutput[T any](pid *actor.PID, ch, size, credits int) output[T] {
	o := output[T]{pid: pid, ch: ch, size: size, credits: credits}
	o.cur = o.take()
	return o
}

// add appends item to the current batch and sends the batch when it is full.
func (o *output[T]) add(ctx actor.Context, item T) {
	o.cur.items = append(o.cur.items, item)
	if len(o.cur.items) == o.size {
		o.push(ctx)
	}
}

func (o *output[T]) take() *batchMsg[T] {
	if n := len(o.free); n > 0 {
		b := o.free[n-1]
		o.free = o.free[:n-1]
		return b
	}
	return &batchMsg[T]{ch: o.ch, items: make([]T, 0, o.size)}
}

// push sends the current batch, or queues it until credit comes back.
func (o *output[T]) push(ctx actor.Context) {
	b := o.cur
	o.cur = o.take()
	if len(o.queue) == 0 && o.credits > 0 {
		o.credits--
		ctx.Send(o.pid, b)
		return
	}
	o.queue = append(o.queue, b)
}

// dirty reports whether a partly filled batch waits for the linger.
func (o *output[T]) dirty() bool { return len(o.cur.items) > 0 }

// flush sends (or queues) the partly filled batch.
func (o *output[T]) flush(ctx actor.Context) {
	if o.dirty() {
		o.push(ctx)
	}
}

// backlogged reports whether full batches wait for credit.
func (o *output[T]) backlogged() bool { return len(o.queue) > 0 }

// onCredit takes the credits and batches of m back and sends what they allow.
func (o *output[T]) onCredit(ctx actor.Context, m *creditMsg[T]) {
	o.credits += len(m.batches)
	for _, b := range m.batches {
		b.items = b.items[:0]
		o.free = append(o.free, b)
	}
	n := 0
	for n < len(o.queue) && o.credits > 0 {
		o.credits--
		ctx.Send(o.pid, o.queue[n])
		o.queue[n] = nil
		n++
	}
	o.queue = o.queue[:copy(o.queue, o.queue[n:])]
	o.sendEnd(ctx)
}

// finish flushes the channel and ends it behind every queued batch.
func (o *output[T]) finish(ctx actor.Context, end *endMsg) {
	o.flush(ctx)
	o.end = end
	o.sendEnd(ctx)
}

func (o *output[T]) sendEnd(ctx actor.Context) {
	if o.end != nil && !o.ended && len(o.queue) == 0 {
		o.ended = true
		ctx.Send(o.pid, o.end)
	}
}

// input is the receiving side of a channel: it returns the credits (and the
// batches) of consumed batches to the sender, a quarter of the window at a
// time (at least one), as snapflow's tasks do: returned every half window,
// the source ran out of credit while the workers held batches already
// processed.
type input[T any] struct {
	pid      *actor.PID // the sender
	ch       int        // the sender's index of this channel among its outputs
	window   int
	consumed []*batchMsg[T]
}

func newInput[T any](pid *actor.PID, ch, credits int) input[T] {
	return input[T]{pid: pid, ch: ch, window: credits}
}

// consume marks b as processed: the sender may reuse it.
func (in *input[T]) consume(ctx actor.Context, b *batchMsg[T]) {
	in.consumed = append(in.consumed, b)
	if len(in.consumed) >= max(1, in.window/4) {
		ctx.Send(in.pid, &creditMsg[T]{ch: in.ch, batches: in.consumed})
		in.consumed = make([]*batchMsg[T], 0, in.window)
	}
}
