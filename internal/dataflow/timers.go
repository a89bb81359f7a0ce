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

// appendEntries stores the timers of each selected key group as one
// entry without a key, whose value packs the group's timers one after
// another: domain (1 byte), time (8 bytes, big-endian), the key's length
// (uvarint) and the key as the key codec encodes it. One entry per key
// group rather than per timer keeps a snapshot of a million timers to a
// few allocations and copies.
func (ts *timerState[K]) appendEntries(b *snapshotBuilder) error {
	var only groupSet
	if b.only != nil {
		only = b.only
	}
	counts := make([]int32, ts.setup.maxP)
	queues := [...]*timers.Queue[K]{&ts.event, &ts.proc}
	for _, q := range queues {
		for i := range q.Len() {
			if g := q.At(i).Group; only == nil || only.has(g) {
				counts[g]++
			}
		}
	}
	bufs := make([][]byte, ts.setup.maxP)
	var key []byte
	for d, q := range queues {
		domain := byte(EventTime)
		if d == 1 {
			domain = byte(ProcessingTime)
		}
		for i := range q.Len() {
			tm := q.At(i)
			if only != nil && !only.has(tm.Group) {
				continue
			}
			buf := bufs[tm.Group]
			if buf == nil {
				buf = make([]byte, 0, int(counts[tm.Group])*(timerHeadSize+1+8))
			}
			key = ts.setup.codec.append(key[:0], tm.Key)
			buf = append(buf, domain)
			buf = binary.BigEndian.AppendUint64(buf, uint64(tm.Time))
			buf = binary.AppendUvarint(buf, uint64(len(key)))
			bufs[tm.Group] = append(buf, key...)
		}
	}
	name := ts.desc.GetName()
	for g, buf := range bufs {
		if buf != nil {
			ns := b.named(g, name)
			ns.Entries = append(ns.Entries, &messages.StateEntry{Value: buf})
		}
	}
	return nil
}

// timerHeadSize is the bytes of a stored timer before its key's length:
// its domain and time.
const timerHeadSize = 9

func (ts *timerState[K]) restoreEntry(_ int, e *messages.StateEntry) error {
	if len(e.GetKey()) != 0 || len(e.GetMapKey()) != 0 {
		return fmt.Errorf("a timer entry with a key: timers are stored packed, one entry per key group")
	}
	v := e.GetValue()
	for len(v) > 0 {
		if len(v) < timerHeadSize+1 {
			return fmt.Errorf("a stored timer of %d bytes, too short", len(v))
		}
		d := TimeDomain(v[0])
		if d != EventTime && d != ProcessingTime {
			return fmt.Errorf("a stored timer of domain %d: want 1 or 2", v[0])
		}
		t := int64(binary.BigEndian.Uint64(v[1:timerHeadSize]))
		n, w := binary.Uvarint(v[timerHeadSize:])
		if w <= 0 || n > uint64(len(v)-timerHeadSize-w) {
			return fmt.Errorf("a stored timer whose key length is corrupt")
		}
		v = v[timerHeadSize+w:]
		k, err := ts.setup.codec.decode(v[:n])
		if err != nil {
			return err
		}
		v = v[n:]
		ts.queue(d).Add(ts.setup.keyGroup(k), k, t)
	}
	return nil
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

// PendingTimers counts the timers stored in a task's state, by domain: the
// timers that were pending when the snapshot was taken.
func PendingTimers(st *messages.TaskState) (event, processing int, err error) {
	for _, g := range st.GetKeyGroups() {
		for _, ns := range g.GetStates() {
			if ns.GetName() != timerStateName {
				continue
			}
			for _, e := range ns.GetEntries() {
				v := e.GetValue()
				for len(v) > 0 {
					if len(v) < timerHeadSize+1 {
						return 0, 0, fmt.Errorf("key group %d: a stored timer of %d bytes, too short", g.GetKeyGroup(), len(v))
					}
					switch TimeDomain(v[0]) {
					case EventTime:
						event++
					case ProcessingTime:
						processing++
					default:
						return 0, 0, fmt.Errorf("key group %d: a stored timer of domain %d", g.GetKeyGroup(), v[0])
					}
					n, w := binary.Uvarint(v[timerHeadSize:])
					if w <= 0 || n > uint64(len(v)-timerHeadSize-w) {
						return 0, 0, fmt.Errorf("key group %d: a stored timer whose key length is corrupt", g.GetKeyGroup())
					}
					v = v[timerHeadSize+w+int(n):]
				}
			}
		}
	}
	return event, processing, nil
}
