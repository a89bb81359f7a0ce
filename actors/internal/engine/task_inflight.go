package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/snapflow/snapflow/actors/align"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/watermark"
	"github.com/snapflow/snapflow/messages"
)

// Unaligned checkpoints (CheckpointMode Unaligned): a task snapshots at the
// first barrier of a checkpoint (align.NewUnaligned), sends the barrier
// downstream ahead of its queued output, and records as the checkpoint's
// channel state (TaskState.in_flight) what the barrier overtook:
//   - on its outputs, the batches and watermarks queued for lack of credit;
//   - on its inputs, what had arrived but was not processed at the
//     snapshot, and what arrives on each input before that input's
//     barrier (align.Action.InFlight).
//
// Recorded items are still sent and processed as usual: the record is an
// encoded copy, by the channel's codec. The upload of the task's state
// waits for the input side to be complete (align.Persisted) and stores
// both together. A restored task queues its recorded output ahead of any
// new output and processes its recorded input ahead of any new input.

// inFlight is the channel state of the unaligned checkpoint a task is
// persisting, until its barrier has arrived on every input.
type inFlight struct {
	id    uint64
	items []*messages.InFlight
	// out takes the input side once complete (buffered: the upload may
	// have given up); gone is closed when the checkpoint is given up.
	out  chan []*messages.InFlight
	gone chan struct{}
}

// stepUnaligned carries out, as they come, the actions of an unaligned
// Aligner that must not wait behind the actions queued for output credit:
// a Snapshot (ahead of what is queued, which it records), Persisted and
// Abort; it records the InFlight data. It leaves the other actions in
// t.acts, in order, for enqueue.
func (t *task) stepUnaligned() {
	kept := t.acts[:0]
	for _, a := range t.acts {
		switch {
		case a.Kind == align.Snapshot && a.Unaligned:
			// Everything given before the snapshot precedes the barrier on
			// its input: queue it first, so that it is recorded.
			t.ready = append(t.ready, kept...)
			kept = kept[:0]
			t.snapshotUnaligned(a.Checkpoint)
		case a.Kind == align.Persisted:
			if p := t.persist; p != nil && p.id == a.Checkpoint {
				p.out <- p.items
				t.persist = nil
			}
		case a.Kind == align.Abort && a.Unaligned:
			t.giveUpInFlight(a.Checkpoint)
			t.decline(a.Checkpoint, "aborted while its channel state was recorded: a newer checkpoint's barrier arrived, or it was given up")
		default:
			if a.InFlight && t.persist != nil {
				t.recordInput(t.persist, a)
			}
			kept = append(kept, a)
		}
	}
	clear(t.acts[len(kept):])
	t.acts = kept
}

// snapshotUnaligned takes the task's part of unaligned checkpoint id at
// once: it records what is queued and not processed as channel state, and
// snapshots.
func (t *task) snapshotUnaligned(id uint64) {
	t.dropQueuedSnapshots(id)
	p := t.recordReady(id, t.ready[t.head:])
	t.giveUpInFlight(id - 1)
	t.persist = p
	t.stopAlignTimeout(id)
	t.useBarrier(id)
	t.snapshot(id, 0)
}

// recordReady begins the channel state of checkpoint id with the input of
// acts, queued and not processed yet.
func (t *task) recordReady(id uint64, acts []align.Action[*batchMsg]) *inFlight {
	p := &inFlight{id: id, out: make(chan []*messages.InFlight, 1), gone: make(chan struct{})}
	for _, a := range acts {
		if a.Kind == align.Process {
			t.recordInput(p, a)
		}
	}
	return p
}

// dropQueuedSnapshots turns the snapshots of checkpoints older than id
// that still wait in the task's queue (aligned, behind input) into
// declines: checkpoint id is snapshotted ahead of them, and as one
// checkpoint is pending at a time, the coordinator has given them up.
func (t *task) dropQueuedSnapshots(id uint64) {
	for i := t.head; i < len(t.ready); i++ {
		if a := &t.ready[i]; a.Kind == align.Snapshot && a.Checkpoint < id {
			a.Kind = align.Abort
		}
	}
}

// giveUpInFlight ends the recording of a checkpoint <= id.
func (t *task) giveUpInFlight(id uint64) {
	if p := t.persist; p != nil && p.id <= id {
		close(p.gone)
		t.persist = nil
	}
}

// recordInput records the data of a Process action as channel state of p.
func (t *task) recordInput(p *inFlight, a align.Action[*batchMsg]) {
	m := a.Data
	switch m.mark {
	case markEnd: // the input's end: its sender ends it again after a restore
		return
	case markWatermark:
		it := &messages.InFlight{Channel: uint32(a.Input), IsWatermark: true, Watermark: m.wm.Watermark, Idle: m.wm.Idle}
		t.sh.plan.LabelInFlight(t.plan.Inputs[a.Input], it)
		p.items = append(p.items, it)
		return
	}
	it := &messages.InFlight{Channel: uint32(a.Input)}
	t.sh.plan.LabelInFlight(t.plan.Inputs[a.Input], it)
	m.data = t.recordBatch(t.sh.plan.ChannelCodec(t.plan.Inputs[a.Input]), m.data, m.ts, it)
	p.items = append(p.items, it)
}

// recordBatch encodes batch and its timestamps into it, and returns the
// batch to go on with (the codec takes the one it encodes).
func (t *task) recordBatch(codec dataflow.BatchCodec, batch any, ts []int64, it *messages.InFlight) any {
	rb := &messages.RecordBatch{}
	if err := codec.Encode(batch, rb); err != nil {
		t.fail(fmt.Errorf("record a batch as channel state: %w", err))
	}
	again, err := codec.Decode(rb)
	if err != nil {
		t.fail(fmt.Errorf("record a batch as channel state: %w", err))
	}
	it.Data, it.Ends = rb.Data, rb.Ends
	if ts != nil {
		it.Timestamps = dataflow.EncodeTimestamps(ts)
	}
	return again
}

// overtake sends barrier b on every output ahead of what is queued there,
// and returns what it overtook as channel state.
func (t *task) overtake(b *messages.Barrier) []*messages.InFlight {
	var items []*messages.InFlight
	for i := range t.outs {
		o := &t.outs[i]
		items = t.recordOutput(i, o.queue, items)
		t.sendItem(o, outItem{barrier: b})
	}
	return items
}

// recordOutput appends to items, as channel state of output i, the
// batches and watermarks of q (queued there), which stay queued.
func (t *task) recordOutput(i int, q []outItem, items []*messages.InFlight) []*messages.InFlight {
	for k := range q {
		it := &q[k]
		switch {
		case it.batch != nil:
			rec := &messages.InFlight{Output: true, Channel: uint32(i)}
			t.sh.plan.LabelInFlight(t.plan.Outputs[i], rec)
			it.batch = t.recordBatch(t.sh.plan.ChannelCodec(t.plan.Outputs[i]), it.batch, it.ts, rec)
			items = append(items, rec)
		case it.wm != nil:
			rec := &messages.InFlight{Output: true, Channel: uint32(i), IsWatermark: true, Watermark: it.wm.Watermark, Idle: it.wm.Idle}
			t.sh.plan.LabelInFlight(t.plan.Outputs[i], rec)
			items = append(items, rec)
		}
	}
	return items
}

// inFlightBytes is the size of channel state items.
func inFlightBytes(items []*messages.InFlight) uint64 {
	var n uint64
	for _, it := range items {
		n += uint64(len(it.Data) + 4*len(it.Ends) + 8*len(it.Timestamps))
		if it.IsWatermark {
			n += 9
		}
	}
	return n
}

// replayInFlight queues the channel state the task was restored with: its
// recorded output ahead of any new output, its recorded input ahead of any
// new input. It runs when the task starts running, before anything else
// reaches its queues.
func (t *task) replayInFlight(items []*messages.InFlight) {
	t.log.Info("replaying the channel state of an unaligned checkpoint", "items", len(items), "bytes", inFlightBytes(items))
	for _, it := range items {
		ch := int(it.Channel)
		if it.Output {
			if ch >= len(t.outs) {
				t.failAs(CauseRestore, fmt.Errorf("channel state names output %d of %d", ch, len(t.outs)))
			}
			q := outItem{}
			if it.IsWatermark {
				q.wm = &watermark.Status{Watermark: it.Watermark, Idle: it.Idle}
			} else {
				q.batch, q.ts = t.decodeInFlight(t.sh.plan.ChannelCodec(t.plan.Outputs[ch]), it)
			}
			t.queueOut(&t.outs[ch], q)
			continue
		}
		if ch >= len(t.ins) {
			t.failAs(CauseRestore, fmt.Errorf("channel state names input %d of %d", ch, len(t.ins)))
		}
		m := &batchMsg{epoch: t.epoch, input: int32(ch), replayed: true}
		if it.IsWatermark {
			m.mark, m.wm = markWatermark, watermark.Status{Watermark: it.Watermark, Idle: it.Idle}
		} else {
			m.data, m.ts = t.decodeInFlight(t.sh.plan.ChannelCodec(t.plan.Inputs[ch]), it)
		}
		t.ready = append(t.ready, align.Action[*batchMsg]{Kind: align.Process, Input: ch, Data: m})
	}
}

func (t *task) decodeInFlight(codec dataflow.BatchCodec, it *messages.InFlight) (any, []int64) {
	data, err := codec.Decode(&messages.RecordBatch{Data: it.Data, Ends: it.Ends})
	if err != nil {
		t.failAs(CauseRestore, fmt.Errorf("decode the channel state: %w", err))
	}
	var ts []int64
	if len(it.Timestamps) > 0 {
		if ts, err = dataflow.DecodeTimestamps(it.Timestamps, len(it.Ends)); err != nil {
			t.failAs(CauseRestore, fmt.Errorf("decode the channel state: %w", err))
		}
	}
	return data, ts
}

// armAlignTimeout starts the alignment timeout of checkpoint id, whose
// first barrier just arrived (WithAlignmentTimeout).
func (t *task) armAlignTimeout(id uint64) {
	d := t.sh.cfg.alignTimeout
	if d <= 0 {
		return
	}
	root, self, msg := t.root, t.self, &alignTimeoutMsg{epoch: t.epoch, id: id}
	if t.alignTimer != nil {
		t.alignTimer.Stop()
	}
	var ts int64
	for _, b := range t.barriers {
		if b.id == id {
			ts = b.ts
		}
	}
	t.alignTimerID = id
	t.alignTimer = time.AfterFunc(t.timeoutLeft(ts), func() { root.Send(self, msg) })
}

// timeoutLeft is what remains of the alignment timeout for a checkpoint
// triggered at ts (its barriers' time, from the coordinator's clock): the
// timeout counts from the trigger, as Flink's does from the checkpoint's
// start, so that a checkpoint late at one task does not wait the timeout
// again at each task after it. It is at most the timeout, so that a
// clock behind the coordinator's waits no longer than that, and 0 once
// passed (0 for ts: the timeout in full). A clock ahead of the
// coordinator's by the timeout or more switches every checkpoint at once:
// exact still, at the cost of storing channel state.
func (t *task) timeoutLeft(ts int64) time.Duration {
	d := t.sh.cfg.alignTimeout
	if ts == 0 {
		return d
	}
	return min(max(d-time.Since(time.Unix(0, ts)), 0), d)
}

// stopAlignTimeout stops the alignment timeout once checkpoint id is
// snapshotted.
func (t *task) stopAlignTimeout(id uint64) {
	if t.alignTimer != nil && t.alignTimerID <= id {
		t.alignTimer.Stop()
	}
}

// onAlignTimeout switches the alignment of a checkpoint that has waited
// the alignment timeout to unaligned, unless it is a savepoint or the
// final checkpoint, which always align.
func (t *task) onAlignTimeout(m *alignTimeoutMsg) {
	if m.epoch != t.epoch || t.aligner == nil {
		return
	}
	for _, b := range t.barriers {
		if b.id == m.id && (b.savepoint != "" || b.aligned) {
			return
		}
	}
	if id, ok := t.aligner.Aligning(); !ok || id != m.id {
		t.switchQueued(m.id)
		return
	}
	t.acts = t.aligner.Timeout(m.id, t.acts[:0])
	t.noteAlignment()
	t.enqueue()
}

// switchQueued switches checkpoint id to unaligned when its alignment is
// over but its snapshot still waits in the task's queue, behind input
// that arrived before the last barrier and is not processed yet: the
// barrier's wait in the queue counts towards the timeout, as in Flink.
// The task snapshots at once, records that input as the checkpoint's
// channel state (every barrier has arrived, so it is complete), and sends
// the barrier ahead of its queued output.
func (t *task) switchQueued(id uint64) {
	k := -1
	for i := t.head; i < len(t.ready); i++ {
		if a := t.ready[i]; a.Kind == align.Snapshot && a.Checkpoint == id {
			k = i
			break
		}
	}
	if k < 0 {
		return // taken already, or given up
	}
	t.dropQueuedSnapshots(id)
	var aligned time.Duration
	if t.alignID == id && !t.alignStart.IsZero() {
		aligned = time.Since(t.alignStart)
	}
	p := t.recordReady(id, t.ready[t.head:k])
	t.ready = slices.Delete(t.ready, k, k+1)
	t.giveUpInFlight(id - 1)
	t.persist = p
	t.stopAlignTimeout(id)
	t.useBarrier(id)
	t.snapshot(id, aligned)
	if t.persist == p {
		p.out <- p.items
		t.persist = nil
	}
}
