package engine

import (
	"slices"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// The sending side of the alignment timeout (WithAlignmentTimeout). An
// aligned checkpoint's barrier leaves a task behind the batches its
// outputs queue for lack of credit; downstream, its wait there counts for
// nothing until it arrives. When the timeout has passed since the
// checkpoint was triggered (timeoutLeft) and the barrier still waits in
// an output queue, the task switches that checkpoint to unaligned on its
// outputs: the barrier goes out at once, ahead of the batches it was
// queued behind, and those batches, which stay queued and are sent as
// credit allows, are stored with the task's state as channel state
// (output channel state, replayed ahead of new output on restore). The
// receiver, aligned or not, sees them after the barrier: they are not in
// its snapshot, and exactly once the restore replays them.
//
// A task's upload of such a checkpoint waits until the barrier has left
// every output, by credit or by the switch, to know its channel state.

// outSwitch is an aligned checkpoint whose barrier waits in output queues.
type outSwitch struct {
	id uint64
	// waiting counts the outputs whose queue still holds the barrier.
	waiting int
	items   []*messages.InFlight
	out     chan []*messages.InFlight // the channel state, once known (buffered)
	gone    chan struct{}             // closed when the checkpoint is given up
	timer   *time.Timer
}

// outTimeoutMsg says that the barrier of checkpoint id has waited the
// alignment timeout in an output queue.
type outTimeoutMsg struct{ epoch, id uint64 }

// watchOutBarrier starts the timeout of checkpoint id's barrier, just
// queued by snapshot, on the outputs where it waits behind batches; nil
// when it left at once. A checkpoint still watched is older, so given up
// (one checkpoint is pending at a time: a newer one means the coordinator
// aborted it); its barrier leaves by credit.
func (t *task) watchOutBarrier(id uint64) *outSwitch {
	d := t.sh.cfg.alignTimeout
	if d <= 0 {
		return nil
	}
	t.abortOutWait(id - 1)
	n := 0
	for i := range t.outs {
		if barrierAt(t.outs[i].queue, id) >= 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	w := &outSwitch{id: id, waiting: n, out: make(chan []*messages.InFlight, 1), gone: make(chan struct{})}
	root, self, msg := t.root, t.self, &outTimeoutMsg{epoch: t.epoch, id: id}
	w.timer = time.AfterFunc(t.timeoutLeft(t.barrierTS), func() { root.Send(self, msg) })
	t.outWait = w
	return w
}

// barrierAt is the position of checkpoint id's barrier in q, or -1.
func barrierAt(q []outItem, id uint64) int {
	for k := range q {
		if b := q[k].barrier; b != nil && b.CheckpointId == id {
			return k
		}
	}
	return -1
}

// barrierLeft notes that checkpoint id's barrier left an output by credit.
func (t *task) barrierLeft(id uint64) {
	w := t.outWait
	if w == nil || w.id != id {
		return
	}
	if w.waiting--; w.waiting == 0 {
		t.endOutWait()
	}
}

// endOutWait hands the watched checkpoint's channel state to its upload.
func (t *task) endOutWait() {
	w := t.outWait
	w.timer.Stop()
	w.out <- w.items
	t.outWait = nil
}

func (t *task) onOutTimeout(m *outTimeoutMsg) {
	if m.epoch != t.epoch || t.outWait == nil || t.outWait.id != m.id {
		return
	}
	t.switchOutputs()
}

// switchOutputs sends the watched checkpoint's barrier ahead of the
// batches it waits behind, on every output, and records those as its
// channel state.
func (t *task) switchOutputs() {
	w := t.outWait
	for i := range t.outs {
		o := &t.outs[i]
		k := barrierAt(o.queue, w.id)
		if k < 0 {
			continue
		}
		w.items = t.recordOutput(i, o.queue[:k], w.items)
		b := o.queue[k]
		o.queue = slices.Delete(o.queue, k, k+1)
		t.sendItem(o, b)
		if len(o.queue) == 0 { // nothing was ahead of it: cannot happen, as a barrier leaves once first
			t.outDrained(o)
		}
	}
	t.endOutWait()
}

// abortOutWait gives up the watched checkpoint if it is id or older (an
// abort, or the end of the incarnation): its upload ends, and the barrier
// leaves by credit.
func (t *task) abortOutWait(id uint64) {
	if w := t.outWait; w != nil && w.id <= id {
		w.timer.Stop()
		close(w.gone)
		t.outWait = nil
	}
}
