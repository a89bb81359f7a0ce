package dataflow

import (
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/snapflow/snapflow/internal/timers"
	"github.com/snapflow/snapflow/messages"
)

// TimeDomain is the clock a timer follows.
type TimeDomain uint8

const (
	// EventTime timers fire when the task's watermark reaches their time.
	EventTime TimeDomain = iota + 1
	// ProcessingTime timers fire when the task's wall clock reaches their
	// time.
	ProcessingTime
)

// String returns the domain's name, for logs.
func (d TimeDomain) String() string {
	switch d {
	case EventTime:
		return "event time"
	case ProcessingTime:
		return "processing time"
	}
	return fmt.Sprintf("TimeDomain(%d)", uint8(d))
}

// Timer is a timer that fired: when it was due, and on which clock.
type Timer struct {
	Time   time.Time
	Domain TimeDomain
}

// TimerFunc handles a timer of ctx.Key() that fired. The key's state is in
// scope, as for a record; records it emits carry the timer's time as their
// timestamp. An error fails the task, as from a ProcessFunc.
type TimerFunc[K Key, O any] func(ctx *Context[K], timer Timer, out *Collector[O]) error

// reservedPrefix starts the names of the states the runtime declares for
// an operator (its timers); user states may not use it.
const reservedPrefix = "snapflow:"

// timerStateName names the timers in snapshots.
const timerStateName = reservedPrefix + "timers"

// kindTimers is the descriptor kind of an operator's timers.
const kindTimers = "timers"

// OnTimer declares fn as the handler of the timers that the operator's
// process function registers (Context.RegisterEventTimer and the like). An
// operator's timers are keyed state: stored by key group in every
// checkpoint and savepoint, tracked by incremental checkpoints,
// redistributed when rescaling, and described in the checkpoint (a
// restore into an operator that declares no OnTimer is refused). O must be
// the operator's output type; Process refuses the job otherwise.
func OnTimer[K Key, O any](s *KeyedSetup[K], fn TimerFunc[K, O]) {
	if fn == nil {
		s.fail("OnTimer: nil timer function")
		return
	}
	if s.onTimer != nil {
		s.fail("OnTimer declared twice")
		return
	}
	s.onTimer = fn
	s.timers = &timerState[K]{setup: s, desc: &messages.StateDescriptor{Name: timerStateName, Kind: kindTimers, KeyType: s.keyType}}
	s.register(s.timers)
}

// timerState is an operator's pending timers, one queue per time domain.
type timerState[K Key] struct {
	setup       *KeyedSetup[K]
	desc        *messages.StateDescriptor
	event, proc timers.Queue[K]
}

func (ts *timerState[K]) queue(d TimeDomain) *timers.Queue[K] {
	if d == ProcessingTime {
		return &ts.proc
	}
	return &ts.event
}

// add registers a timer of the current key.
func (ts *timerState[K]) add(d TimeDomain, t time.Time) {
	k := ts.setup.cur.key
	if ts.queue(d).Add(ts.setup.keyGroup(k), k, t.UnixNano()) {
		ts.setup.markDirty()
	}
}

// delete deletes a timer of the current key.
func (ts *timerState[K]) delete(d TimeDomain, t time.Time) {
	if ts.queue(d).Delete(ts.setup.cur.key, t.UnixNano()) {
		ts.setup.markDirty()
	}
}

// Len is the number of pending timers, in both domains.
func (ts *timerState[K]) Len() int { return ts.event.Len() + ts.proc.Len() }

func (ts *timerState[K]) descriptor() *messages.StateDescriptor { return ts.desc }

// timerKeySize is the size of an encoded timer: its domain and its time.
const timerKeySize = 9

// appendEntries stores each timer as an entry of its key whose map key is
// its domain and time (big-endian, so that stored timers sort by time), and
// whose value is empty.
func (ts *timerState[K]) appendEntries(b *snapshotBuilder) error {
	n := b.estimate(ts.Len())
	slab := newEntrySlab(n)
	keys := make([]byte, 0, 8*n)
	times := make([]byte, 0, timerKeySize*n)
	add := func(d TimeDomain) func(timers.Timer[K]) {
		return func(tm timers.Timer[K]) {
			e := slab.take()
			start := len(keys)
			keys = ts.setup.codec.append(keys, tm.Key)
			e.Key = keys[start:len(keys):len(keys)]
			start = len(times)
			times = append(times, byte(d))
			times = binary.BigEndian.AppendUint64(times, uint64(tm.Time))
			e.MapKey = times[start:len(times):len(times)]
			ns := b.named(tm.Group, ts.desc.GetName())
			ns.Entries = append(ns.Entries, e)
		}
	}
	var only []uint64
	if b.only != nil {
		only = b.only
	}
	ts.event.Each(only, add(EventTime))
	ts.proc.Each(only, add(ProcessingTime))
	return nil
}

func (ts *timerState[K]) restoreEntry(e *messages.StateEntry) error {
	k, err := ts.setup.codec.decode(e.Key)
	if err != nil {
		return err
	}
	mk := e.GetMapKey()
	if len(mk) != timerKeySize || (TimeDomain(mk[0]) != EventTime && TimeDomain(mk[0]) != ProcessingTime) {
		return fmt.Errorf("a timer of %d bytes (domain %d): want %d bytes, domain 1 or 2", len(mk), firstByte(mk), timerKeySize)
	}
	ts.queue(TimeDomain(mk[0])).Add(ts.setup.keyGroup(k), k, int64(binary.BigEndian.Uint64(mk[1:])))
	return nil
}

func firstByte(b []byte) int {
	if len(b) == 0 {
		return -1
	}
	return int(b[0])
}

// reservedName reports whether a state name is the runtime's.
func reservedName(name string) bool { return strings.HasPrefix(name, reservedPrefix) }

// RegisterEventTimer registers a timer of the current key that fires when
// the task's watermark reaches t. There is at most one timer per key, time
// domain and time: registering it again changes nothing. A time at or
// before the current watermark fires once the current batch is processed.
// It panics when the operator's setup declared no OnTimer.
func (c *Context[K]) RegisterEventTimer(t time.Time) {
	c.timers("RegisterEventTimer").add(EventTime, t)
}

// DeleteEventTimer deletes the current key's event-time timer at t, if
// there is one.
func (c *Context[K]) DeleteEventTimer(t time.Time) { c.timers("DeleteEventTimer").delete(EventTime, t) }

// RegisterProcessingTimer registers a timer of the current key that fires
// when the task's wall clock reaches t (a timer already due fires at
// once). Timers that became due while the job was down fire right after it
// is restored. It panics when the operator's setup declared no OnTimer.
func (c *Context[K]) RegisterProcessingTimer(t time.Time) {
	c.timers("RegisterProcessingTimer").add(ProcessingTime, t)
}

// DeleteProcessingTimer deletes the current key's processing-time timer at
// t, if there is one.
func (c *Context[K]) DeleteProcessingTimer(t time.Time) {
	c.timers("DeleteProcessingTimer").delete(ProcessingTime, t)
}

func (c *Context[K]) timers(call string) *timerState[K] {
	ts := c.setup.timers
	if ts == nil {
		panic(fmt.Sprintf("topology: operator %q: %s, but its setup declared no OnTimer to handle timers", c.setup.task.Operator, call))
	}
	return ts
}

// ProcessingTimers is implemented by instances with processing-time
// timers: the runtime arms a clock for the next one and calls
// FireProcessingTimers, between batches, once it is due.
type ProcessingTimers interface {
	// NextProcessingTimer is the time (ns since the Unix epoch) of the
	// earliest pending processing-time timer, and false when there is none.
	NextProcessingTimer() (int64, bool)
	// FireProcessingTimers fires the processing-time timers due at now.
	FireProcessingTimers(now int64) error
}
