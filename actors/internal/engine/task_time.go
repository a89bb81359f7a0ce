package engine

import (
	"time"

	"github.com/snapflow/snapflow/actors/align"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/watermark"
)

// eventTime is a task's event time: the watermarks of its inputs (or of
// its source), what its instance has been told, and what it has sent
// downstream. Watermarks travel like barriers, on the ordered path of the
// batches, but are coalesced: a task sends its watermark when it flushes
// its batches (at the linger time, a barrier or an idle source), never per
// record, and a watermark waiting for credit behind batches is replaced by
// a newer one.
type eventTime struct {
	in   *watermark.Combiner        // the inputs' watermarks; nil for a source
	src  dataflow.WatermarkSource   // a source's with a watermark strategy; nil otherwise
	inst dataflow.WatermarkListener // the instance, when it acts on watermarks (timers)
	// told is the watermark the instance was last given.
	told int64
	// next is the task's watermark status; sent is what went downstream;
	// pending says they differ.
	next, sent watermark.Status
	pending    bool
	idleTimer  *time.Timer
}

// idleTick makes a source task that waits for records attempt a read.
type idleTick struct{ epoch uint64 }

// newEventTime returns the event time of a task. Every task has one: a
// source without a watermark strategy still ends event time (it sends the
// final watermark, Max, once exhausted, so that downstream event-time
// timers fire before the final checkpoint), and costs nothing before.
func newEventTime(p *dataflow.TaskPlan, inst dataflow.Instance) *eventTime {
	et := &eventTime{told: watermark.Min, next: watermark.Status{Watermark: watermark.Min}, sent: watermark.Status{Watermark: watermark.Min}}
	et.inst, _ = inst.(dataflow.WatermarkListener)
	if src, ok := inst.(dataflow.WatermarkSource); ok && len(p.Inputs) == 0 && p.Timed {
		et.src = src
	} else if len(p.Inputs) > 0 {
		et.in = watermark.NewCombiner(len(p.Inputs))
	}
	return et
}

// exhausted ends a source task's event time: the final watermark goes out
// with its last batches, before the final checkpoint's barrier, so that
// what event-time timers emit downstream is in that checkpoint.
func (et *eventTime) exhausted() {
	et.next = watermark.Status{Watermark: watermark.Max}
	et.pending = et.next != et.sent
}

// onWatermark takes a watermark from an input: in order with the input's
// batches, held back with them while the input is blocked for alignment.
func (t *task) onWatermark(m *batchMsg) {
	if t.fenced(m.epoch) || int(m.input) >= len(t.ins) || t.et.in == nil {
		return
	}
	t.acts = t.aligner.Step(align.Event[*batchMsg]{Kind: align.Data, Input: int(m.input), Data: m}, t.acts[:0])
	t.enqueue()
}

// onMark applies a watermark or an end of input, in the input's order.
func (t *task) onMark(input int, m *batchMsg) {
	et := t.et
	if et.in == nil {
		return
	}
	var st watermark.Status
	var changed bool
	switch {
	case m.mark == markEnd:
		st, changed = et.in.End(input)
	case m.wm.Idle: // its watermark counts too
		st, changed = et.in.IdleAt(input, m.wm.Watermark)
	default:
		st, changed = et.in.Advance(input, m.wm.Watermark)
	}
	if changed {
		t.advance(st)
	}
}

// advance makes st the task's watermark status: the instance acts on a
// higher watermark first (its event-time timers fire, and what they emit
// goes out before the watermark), then the status waits for the next
// flush.
func (t *task) advance(st watermark.Status) {
	et := t.et
	if et.inst != nil && st.Watermark > et.told {
		et.told = st.Watermark
		if err := et.inst.OnWatermark(st.Watermark); err != nil {
			t.fail(err)
		}
		t.dirty = true
	}
	if st != et.next {
		et.next = st
		et.pending = et.next != et.sent
	}
}

// sourceRead updates a source task's watermark after a read attempt.
func (et *eventTime) sourceRead() {
	if et.src == nil {
		return
	}
	if st := et.src.SourceWatermark(); st != et.next {
		et.next = st
		et.pending = et.next != et.sent
	}
}

// armIdle makes a source task that waits for records attempt a read again
// after the source's check period, so that it can become idle: idleness is
// counted in read attempts (watermark.Idleness), never on the wall clock
// alone, so that a stall of the process does not make a source idle.
func (et *eventTime) armIdle(t *task) {
	if et.src == nil {
		return
	}
	d, ok := et.src.IdleCheck()
	if !ok {
		return
	}
	if et.idleTimer != nil {
		et.idleTimer.Stop()
	}
	root, self, m := t.root, t.self, &idleTick{epoch: t.epoch}
	et.idleTimer = time.AfterFunc(d, func() { root.Send(self, m) })
}

// onIdleTick makes a source task that waits for records attempt a read:
// one that finds nothing counts towards its idleness (and the status goes
// out at once when it becomes idle), one that finds records makes it
// active.
//
// A source that has taken a stop-with-savepoint's snapshot reads nothing
// more: an idle status after the barrier could advance the watermark
// downstream and fire event-time timers the savepoint holds as pending,
// which would fire again after the resume. releaseStop checks again if the
// stop fails.
func (t *task) onIdleTick(m *idleTick) {
	if m.epoch != t.epoch || !t.idle || t.stopAt != 0 {
		return
	}
	t.idle = false
	t.onPoll()
}

// send sends the task's watermark status downstream if it changed since
// the last one sent; the task has just flushed its batches.
func (et *eventTime) send(t *task) {
	if !et.pending {
		return
	}
	st := et.next
	et.sent, et.pending = st, false
	if len(t.outs) > 0 {
		t.sendControl(outItem{wm: &st})
	}
}

// stop stops the idle timer at the end of an incarnation.
func (et *eventTime) stop() {
	if et != nil && et.idleTimer != nil { // nil: the task failed before it started
		et.idleTimer.Stop()
	}
}

// procClock fires a task's processing-time timers from the task's own
// clock: a timer armed for the earliest one sends the task a procTick,
// and the timers fire in the actor, between batches.
type procClock struct {
	timers  dataflow.ProcessingTimers
	armed   bool
	armedAt int64 // the time the armed tick is for
	timer   *time.Timer
}

// procTick tells a task that its earliest processing-time timer is due.
type procTick struct{ epoch uint64 }

// armProcTimer arms the task's clock for its earliest processing-time
// timer, unless an earlier tick is armed.
func (t *task) armProcTimer() {
	pc := t.proc
	if pc == nil || !t.running || t.stopAt != 0 {
		return
	}
	next, ok := pc.timers.NextProcessingTimer()
	if !ok || pc.armed && pc.armedAt <= next {
		return
	}
	if pc.timer != nil {
		pc.timer.Stop()
	}
	pc.armed, pc.armedAt = true, next
	root, self, m := t.root, t.self, &procTick{epoch: t.epoch}
	pc.timer = time.AfterFunc(max(time.Until(time.Unix(0, next)), 0), func() { root.Send(self, m) })
}

// onProcTick fires the processing-time timers that are due.
func (t *task) onProcTick(m *procTick) {
	pc := t.proc
	if m.epoch != t.epoch || pc == nil {
		return
	}
	pc.armed = false
	if t.finished || t.ending || t.stopAt != 0 {
		return // held after a stop-with-savepoint's snapshot (releaseStop)
	}
	if err := pc.timers.FireProcessingTimers(time.Now().UnixNano()); err != nil {
		t.fail(err)
	}
	t.dirty = true
	t.armLinger()
	t.armProcTimer()
}

func (pc *procClock) stop() {
	if pc != nil && pc.timer != nil {
		pc.timer.Stop()
	}
}
