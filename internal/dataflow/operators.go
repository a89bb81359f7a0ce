package dataflow

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// inputs recycles the batches an instance has processed.
type inputs[I any] struct {
	pool  *sync.Pool
	clear bool // records of type I hold pointers
}

func newInputs[I any]() inputs[I] {
	return inputs[I]{pool: poolOf[I](), clear: holdsPointers(reflect.TypeFor[I]())}
}

// release returns a processed batch (the interface value it arrived in) to
// the pool, cleared when its records hold pointers, so that pooled batches
// keep nothing alive. Records were copied out by value, so nothing refers
// to it.
func (in inputs[I]) release(batch any) {
	if in.clear {
		clear(batch.([]I))
	}
	in.pool.Put(batch)
}

// stateless supplies the state and lifecycle methods of operators without state.
type stateless struct{}

func (stateless) Snapshot(*messages.TaskState) error { return nil }
func (stateless) Restore(*messages.TaskState) error  { return nil }
func (stateless) EndOfInput() error                  { return nil }
func (stateless) Close() error                       { return nil }

// addOperator adds an operator node fed by s whose instances are built by mk.
func addOperator[I, O any](s Stream[I], name string, kind Kind, opts []Option,
	mk func(ic *InstanceContext, out *Collector[O]) (Instance, error)) (*node, Stream[O]) {
	n := s.g.addNode(name, kind, opts, func(ic *InstanceContext) (Instance, error) {
		out, err := newCollector[O](ic)
		if err != nil {
			return nil, err
		}
		return mk(ic, out)
	})
	connect(n, s)
	return n, Stream[O]{g: s.g, parts: []part{{node: n}}}
}

func checkFn(g *Graph, name string, fn any, isNil bool) {
	if isNil {
		g.problem("operator %q: nil function %T", name, fn)
	}
}

// Map applies fn to every record.
func Map[I, O any](s Stream[I], name string, fn func(I) O, opts ...Option) Stream[O] {
	checkFn(s.g, name, fn, fn == nil)
	_, out := addOperator(s, name, KindOperator, opts, func(_ *InstanceContext, out *Collector[O]) (Instance, error) {
		return &mapInstance[I, O]{fn: fn, out: out, in: newInputs[I]()}, nil
	})
	return out
}

type mapInstance[I, O any] struct {
	stateless
	fn  func(I) O
	out *Collector[O]
	in  inputs[I]
}

func (m *mapInstance[I, O]) ProcessBatch(_ int, batch any, ts []int64) error {
	if ts == nil {
		m.out.ts = minTime
		for _, v := range batch.([]I) {
			m.out.Emit(m.fn(v))
		}
	} else {
		for i, v := range batch.([]I) {
			m.out.ts = ts[i]
			m.out.Emit(m.fn(v))
		}
	}
	m.in.release(batch)
	return nil
}

func (m *mapInstance[I, O]) Flush()        { m.out.flush() }
func (m *mapInstance[I, O]) Pending() bool { return m.out.pending() }

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], name string, keep func(T) bool, opts ...Option) Stream[T] {
	checkFn(s.g, name, keep, keep == nil)
	_, out := addOperator(s, name, KindOperator, opts, func(_ *InstanceContext, out *Collector[T]) (Instance, error) {
		return &filterInstance[T]{keep: keep, out: out, in: newInputs[T]()}, nil
	})
	return out
}

type filterInstance[T any] struct {
	stateless
	keep func(T) bool
	out  *Collector[T]
	in   inputs[T]
}

func (f *filterInstance[T]) ProcessBatch(_ int, batch any, ts []int64) error {
	if ts == nil {
		f.out.ts = minTime
		for _, v := range batch.([]T) {
			if f.keep(v) {
				f.out.Emit(v)
			}
		}
	} else {
		for i, v := range batch.([]T) {
			if f.keep(v) {
				f.out.ts = ts[i]
				f.out.Emit(v)
			}
		}
	}
	f.in.release(batch)
	return nil
}

func (f *filterInstance[T]) Flush()        { f.out.flush() }
func (f *filterInstance[T]) Pending() bool { return f.out.pending() }

// FlatMap calls fn for every record; fn emits any number of records to out.
// An error fails the task, and the job recovers from its last checkpoint.
func FlatMap[I, O any](s Stream[I], name string, fn func(in I, out *Collector[O]) error, opts ...Option) Stream[O] {
	checkFn(s.g, name, fn, fn == nil)
	_, out := addOperator(s, name, KindOperator, opts, func(_ *InstanceContext, out *Collector[O]) (Instance, error) {
		return &flatMapInstance[I, O]{fn: fn, out: out, in: newInputs[I]()}, nil
	})
	return out
}

type flatMapInstance[I, O any] struct {
	stateless
	fn  func(I, *Collector[O]) error
	out *Collector[O]
	in  inputs[I]
}

func (f *flatMapInstance[I, O]) ProcessBatch(_ int, batch any, ts []int64) error {
	f.out.ts = minTime
	for i, v := range batch.([]I) {
		if ts != nil {
			f.out.ts = ts[i]
		}
		if err := f.fn(v, f.out); err != nil {
			return err
		}
	}
	f.in.release(batch)
	return nil
}

func (f *flatMapInstance[I, O]) Flush()        { f.out.flush() }
func (f *flatMapInstance[I, O]) Pending() bool { return f.out.pending() }

// Context is what a keyed process function sees besides its record.
type Context[K Key] struct {
	setup *KeyedSetup[K]
	ts    int64 // the record's timestamp; minTime: none
	wm    int64 // the task's watermark
	sides *sideOutputs
}

// side implements SideEmitter.
func (c *Context[K]) side(tag *sideTag) (any, int64) {
	if c.sides == nil {
		return nil, c.ts
	}
	return c.sides.collector(tag), c.ts
}

// Timestamp is the event time of the record being processed, and false
// when it has none: its source has no watermark strategy (see
// WithWatermarks).
func (c *Context[K]) Timestamp() (time.Time, bool) {
	if c.ts == minTime {
		return time.Time{}, false
	}
	return time.Unix(0, c.ts).UTC(), true
}

// Watermark is the task's current watermark, and false before the first:
// records with a timestamp before it are late.
func (c *Context[K]) Watermark() (time.Time, bool) {
	if c.wm == minTime {
		return time.Time{}, false
	}
	return time.Unix(0, c.wm).UTC(), true
}

// Key is the key of the record being processed.
func (c *Context[K]) Key() K { return c.setup.cur.key }

// TaskID is the id of the task, e.g. "sum#1".
func (c *Context[K]) TaskID() string { return c.setup.task.ID }

// ProcessFunc handles one record of a keyed stream. Keyed state declared in
// setup is scoped to ctx.Key(). An error fails the task, and the job recovers
// from its last checkpoint.
type ProcessFunc[K Key, I, O any] func(ctx *Context[K], in I, out *Collector[O]) error

// Process adds a keyed stateful operator. setup runs once per task instance
// (and again after every restore, before the state is loaded): it declares
// the keyed state with Value and MapOf and returns the function applied to
// every record.
//
// setup also runs once when the job starts, before any record flows, for the
// TaskPlan of subtask 0 with a throwaway KeyedSetup, to learn the declared
// states (see Plan.DeclaredStates): it must declare the same states on every
// call and should have no other effect. A declaration the default codec
// cannot store exactly (see Value), a state declared twice, a nil process
// function or a panic fails the job at that point, naming the operator.
//
// Every snapshot records a descriptor of each declared state, and Restore
// refuses, with ErrIncompatibleState, a checkpoint whose states differ in
// kind, types or codecs from the declared ones, or that holds a state no
// longer declared. A newly declared state starts empty.
func Process[K Key, I, O any](s KeyedStream[I, K], name string, setup func(*KeyedSetup[K]) ProcessFunc[K, I, O], opts ...Option) Stream[O] {
	checkFn(s.g, name, setup, setup == nil)
	key, codec := s.key, s.codec
	n, out := addOperator(s.Stream, name, KindOperator, opts, func(ic *InstanceContext, out *Collector[O]) (Instance, error) {
		ks := newKeyedSetup(ic.Task, codec)
		ks.untracked = ic.SkipDirtyKeyGroups
		ks.useDisk(ic.DiskState, ic.Job)
		fn := setup(ks)
		ks.sealed = true
		if ks.err != nil {
			return nil, errors.Join(ks.err, ks.closeDisk())
		}
		if fn == nil {
			return nil, &stateError{msg: "setup returned a nil process function", sentinel: ErrInvalidState}
		}
		onTimer, err := timerFuncOf[K, O](ks)
		if err != nil {
			return nil, err
		}
		sides, err := newSideOutputs(ic)
		if err != nil {
			return nil, err
		}
		return &processInstance[K, I, O]{setup: ks, ctx: &Context[K]{setup: ks, ts: minTime, wm: minTime, sides: &sides}, key: key, fn: fn, onTimer: onTimer, out: out, in: newInputs[I]()}, nil
	})
	n.keyedState = true
	n.declare = func(task *TaskPlan) (descs []*messages.StateDescriptor, err error) {
		defer func() {
			if r := recover(); r != nil {
				cause, _ := r.(error)
				err = &stateError{msg: fmt.Sprintf("setup panicked: %v", r), sentinel: ErrInvalidState, cause: cause}
			}
		}()
		ks := newKeyedSetup(task, codec)
		fn := setup(ks)
		if fn == nil {
			ks.fail("setup returned a nil process function")
		}
		if ks.err != nil {
			return nil, ks.err
		}
		if _, err := timerFuncOf[K, O](ks); err != nil {
			return nil, err
		}
		return ks.descriptors(), nil
	}
	return out
}

type processInstance[K Key, I, O any] struct {
	setup   *KeyedSetup[K]
	ctx     *Context[K]
	key     func(I) K
	fn      ProcessFunc[K, I, O]
	onTimer TimerFunc[K, O] // nil: the operator has no timers
	out     *Collector[O]
	in      inputs[I]
}

// The process instance records the key groups its state writes, for
// incremental checkpoints, and restores key group by key group.
var (
	_ KeyGroupSnapshotter = (*processInstance[string, int, int])(nil)
	_ KeyGroupRestorer    = (*processInstance[string, int, int])(nil)
)

func (p *processInstance[K, I, O]) ProcessBatch(_ int, batch any, ts []int64) error {
	cur := p.setup.cur
	p.setup.tick()
	p.ctx.ts, p.out.ts = minTime, minTime
	if p.setup.untracked {
		for i, v := range batch.([]I) {
			cur.key = p.key(v)
			if ts != nil {
				p.ctx.ts, p.out.ts = ts[i], ts[i]
			}
			if err := p.fn(p.ctx, v, p.out); err != nil {
				return err
			}
		}
		p.in.release(batch)
		if err := p.setup.endBatch(); err != nil {
			return err
		}
		return p.fireLate()
	}
	for i, v := range batch.([]I) {
		cur.key = p.key(v)
		if ts != nil {
			p.ctx.ts, p.out.ts = ts[i], ts[i]
		}
		err := p.fn(p.ctx, v, p.out)
		if cur.wrote { // see markDirty
			p.setup.markWritten()
		}
		if err != nil {
			return err
		}
	}
	p.in.release(batch)
	if err := p.setup.endBatch(); err != nil {
		return err
	}
	return p.fireLate()
}

func (p *processInstance[K, I, O]) Flush() {
	p.out.flush()
	p.ctx.sides.flush()
}

func (p *processInstance[K, I, O]) Pending() bool { return p.out.pending() || p.ctx.sides.pending() }

// OnWatermark implements WatermarkListener: the event-time timers due at
// wm fire, in (time, key) order.
func (p *processInstance[K, I, O]) OnWatermark(wm int64) error {
	p.ctx.wm = max(p.ctx.wm, wm)
	if p.onTimer == nil {
		return nil
	}
	return p.fire(EventTime, p.ctx.wm)
}

// fireLate fires the event-time timers that a batch registered at or
// before the current watermark.
func (p *processInstance[K, I, O]) fireLate() error {
	if p.onTimer == nil {
		return nil
	}
	if t, ok := p.setup.timers.event.Peek(); !ok || t.Time > p.ctx.wm {
		return nil
	}
	return p.fire(EventTime, p.ctx.wm)
}

// NextProcessingTimer implements ProcessingTimers.
func (p *processInstance[K, I, O]) NextProcessingTimer() (int64, bool) {
	if p.onTimer == nil {
		return 0, false
	}
	t, ok := p.setup.timers.proc.Peek()
	return t.Time, ok
}

// FireProcessingTimers implements ProcessingTimers.
func (p *processInstance[K, I, O]) FireProcessingTimers(now int64) error {
	if p.onTimer == nil {
		return nil
	}
	return p.fire(ProcessingTime, now)
}

// fire fires the timers of domain d due at now, with each timer's key and
// state in scope. Records emitted by an event-time timer carry its time as
// their timestamp; those of a processing-time timer carry none.
func (p *processInstance[K, I, O]) fire(d TimeDomain, now int64) error {
	q := p.setup.timers.queue(d)
	cur := p.setup.cur
	p.setup.tick()
	defer func() { p.ctx.ts = minTime }()
	for {
		tm, ok := q.PopDue(now)
		if !ok {
			return p.setup.flushState()
		}
		cur.key = tm.Key
		p.setup.markGroup(tm.Group) // the timer is gone from its key group
		p.ctx.ts, p.out.ts = tm.Time, tm.Time
		if d == ProcessingTime {
			p.ctx.ts, p.out.ts = minTime, minTime
		}
		err := p.onTimer(p.ctx, Timer{Time: time.Unix(0, tm.Time).UTC(), Domain: d}, p.out)
		if cur.wrote && !p.setup.untracked {
			p.setup.markWritten()
		}
		cur.wrote = false
		if err != nil {
			return err
		}
		if d := p.setup.disk; d != nil && d.pending >= flushEvery {
			if err := p.setup.flushState(); err != nil {
				return err
			}
		}
	}
}

// timerFuncOf returns the operator's timer function, nil when its setup
// declared none, and an error when it emits another type than the
// operator's output.
func timerFuncOf[K Key, O any](ks *KeyedSetup[K]) (TimerFunc[K, O], error) {
	if ks.onTimer == nil {
		return nil, nil
	}
	fn, ok := ks.onTimer.(TimerFunc[K, O])
	if !ok {
		return nil, &stateError{msg: fmt.Sprintf("topology: operator %q: OnTimer's function is a %T, but the operator's output needs a TimerFunc[%s, %s]",
			ks.task.Operator, ks.onTimer, typeName(reflect.TypeFor[K]()), typeName(reflect.TypeFor[O]())), sentinel: ErrInvalidState}
	}
	return fn, nil
}

// Snapshot writes the entries of every declared state by key group, and the
// descriptor of every declared state.
func (p *processInstance[K, I, O]) Snapshot(st *messages.TaskState) error {
	p.snapshotWatermark(st)
	return p.setup.snapshotKeyed(st, nil)
}

// snapshotWatermark keeps the task's watermark in st.
func (p *processInstance[K, I, O]) snapshotWatermark(st *messages.TaskState) {
	if p.ctx.wm != minTime {
		st.Watermark = proto.Int64(p.ctx.wm)
	}
}

// SnapshotAsync implements AsyncSnapshotter.
func (p *processInstance[K, I, O]) SnapshotAsync(st *messages.TaskState, groups []uint64, full bool) (func() error, error) {
	if full {
		groups = nil
	} else if groups == nil {
		groups = []uint64{} // nil would mean every key group
	}
	p.snapshotWatermark(st)
	return p.setup.snapshotKeyedAsync(st, groups)
}

// SnapshotKeyGroups is Snapshot restricted to the key groups of groups.
func (p *processInstance[K, I, O]) SnapshotKeyGroups(st *messages.TaskState, groups []uint64) error {
	if groups == nil {
		groups = []uint64{} // nil would mean every key group
	}
	p.snapshotWatermark(st)
	return p.setup.snapshotKeyed(st, groups)
}

// TakeDirtyKeyGroups ORs the key groups written since the last call into
// dst and forgets them.
func (p *processInstance[K, I, O]) TakeDirtyKeyGroups(dst []uint64) { p.setup.takeDirty(dst) }

// Restore refuses a checkpoint whose state descriptors do not match the
// declared states (ErrIncompatibleState), then loads the task's key groups.
func (p *processInstance[K, I, O]) Restore(st *messages.TaskState) error {
	if st.Watermark != nil {
		p.ctx.wm = max(p.ctx.wm, st.GetWatermark())
	}
	return p.setup.restoreKeyed(st)
}

// RestoreKeyGroup loads one more key group after Restore, skipping one
// outside the task's range.
func (p *processInstance[K, I, O]) RestoreKeyGroup(g *messages.KeyGroupState) error {
	return p.setup.restoreKeyGroup(g)
}

func (p *processInstance[K, I, O]) EndOfInput() error { return nil }

// Close closes the on-disk state, if any, and removes its directory.
func (p *processInstance[K, I, O]) Close() error { return p.setup.closeDisk() }

// Sink adds a sink that calls write for every record. Records replayed after
// a recovery are written again (at-least-once output): make write idempotent,
// for example by keeping the latest value per key.
func Sink[T any](s Stream[T], name string, write func(T) error, opts ...Option) {
	checkFn(s.g, name, write, write == nil)
	each := func(batch []T) error {
		for _, v := range batch {
			if err := write(v); err != nil {
				return err
			}
		}
		return nil
	}
	n := s.g.addNode(name, KindSink, opts, func(*InstanceContext) (Instance, error) {
		return &batchSinkInstance[T]{write: each, in: newInputs[T]()}, nil
	})
	connect(n, s)
}

// SinkBatch adds a sink that calls write with the records as they arrive, a
// batch at a time: never empty, in order per input, and at most the job's
// batch size. Records replayed from an unaligned checkpoint of a job with a
// larger batch size come in batches of that size: they are written in
// parts of this job's. write must not keep the slice, which is reused once
// it returns. Output is at-least-once, as Sink's.
func SinkBatch[T any](s Stream[T], name string, write func([]T) error, opts ...Option) {
	checkFn(s.g, name, write, write == nil)
	n := s.g.addNode(name, KindSink, opts, func(ic *InstanceContext) (Instance, error) {
		return &batchSinkInstance[T]{write: write, in: newInputs[T](), max: ic.BatchSize}, nil
	})
	connect(n, s)
}

type batchSinkInstance[T any] struct {
	stateless
	write func([]T) error
	in    inputs[T]
	max   int // the job's batch size: write never gets more (0: no bound)
}

func (k *batchSinkInstance[T]) ProcessBatch(_ int, batch any, _ []int64) error {
	b := batch.([]T)
	for k.max > 0 && len(b) > k.max { // a batch of a job with a larger batch size, replayed
		if err := k.write(b[:k.max:k.max]); err != nil {
			return err
		}
		b = b[k.max:]
	}
	if err := k.write(b); err != nil {
		return err
	}
	k.in.release(batch)
	return nil
}

func (k *batchSinkInstance[T]) Flush()        {}
func (k *batchSinkInstance[T]) Pending() bool { return false }
