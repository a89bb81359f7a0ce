package engine

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/align"
	"github.com/snapflow/snapflow/actors/linkwatch"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/watermark"
	"github.com/snapflow/snapflow/messages"
)

// Send implements dataflow.Sender: it sends a full batch on output out, or
// queues it until the receiver grants credit.
func (t *task) Send(out int, batch any, ts []int64) {
	o := &t.outs[out]
	if o.counted {
		t.ctr.out.Add(uint64(batchLen(batch)))
	}
	if len(o.queue) == 0 && o.hasCredit() {
		t.sendBatch(o, batch, ts)
		return
	}
	t.queueOut(o, outItem{batch: batch, ts: ts})
}

// queueOut queues it on o until credit allows it; the first item queued
// while no output waits begins backpressure.
func (t *task) queueOut(o *outChannel, it outItem) {
	if len(o.queue) == 0 {
		if t.backlogged == 0 { // backpressure begins
			t.blockedSince = monoNow()
			t.ctr.startBlocked(t.blockedSince)
		}
		t.backlogged++
	}
	if it.batch != nil {
		t.ctr.queued.Add(1)
	}
	o.queue = append(o.queue, it)
}

// sendControl sends a barrier, an end of input or a watermark on every
// output, behind any queued batches. A watermark queued behind another
// replaces it.
func (t *task) sendControl(it outItem) {
	for i := range t.outs {
		o := &t.outs[i]
		if n := len(o.queue); n > 0 {
			if it.wm != nil && o.queue[n-1].wm != nil {
				o.queue[n-1] = it
				continue
			}
			o.queue = append(o.queue, it)
			continue
		}
		t.sendItem(o, it)
	}
}

func (t *task) sendItem(o *outChannel, it outItem) {
	switch {
	case it.barrier != nil:
		if o.watch != nil {
			o.watch.SentBarrier(it.barrier.CheckpointId)
		}
		t.root.Send(o.pid, &messages.Barrier{Epoch: it.barrier.Epoch, Channel: uint32(o.input),
			CheckpointId: it.barrier.CheckpointId, TimestampUnixNano: it.barrier.TimestampUnixNano, LastSeq: o.seq, Savepoint: it.barrier.Savepoint, BaseCheckpointId: it.barrier.BaseCheckpointId,
			Aligned: it.barrier.Aligned, Stop: it.barrier.Stop})
	case it.end:
		if o.watch != nil {
			o.watch.SentEnd()
		}
		t.root.Send(o.pid, &messages.EndOfInput{Epoch: t.epoch, Channel: uint32(o.input), LastSeq: o.seq})
	case it.wm != nil:
		if o.remote {
			t.sendRemoteWatermark(o, *it.wm)
		} else {
			t.root.Send(o.pid, &batchMsg{epoch: t.epoch, input: o.input, mark: markWatermark, wm: *it.wm})
		}
	default:
		t.sendBatch(o, it.batch, it.ts)
	}
}

// sendRemoteWatermark sends a watermark status to another node with the
// channel's next watermark seq, which the link watch follows: a lost last
// watermark or idle status would stall event time downstream unseen.
func (t *task) sendRemoteWatermark(o *outChannel, st watermark.Status) {
	o.wmSeq++
	if o.watch != nil {
		o.watch.SentWatermark(o.wmSeq)
	}
	if f := t.sh.cfg.faults; f != nil && f.RemoteWatermark != nil && f.RemoteWatermark(t.plan.ID, o.to, o.wmSeq) == Drop {
		return
	}
	t.root.Send(o.pid, &messages.Watermark{Epoch: t.epoch, Channel: uint32(o.input), Watermark: st.Watermark, Idle: st.Idle, Seq: o.wmSeq})
}

// sendBatch spends a credit of o and sends batch with the next seq, and
// with ts, its records' timestamps on a timed channel.
func (t *task) sendBatch(o *outChannel, batch any, ts []int64) {
	o.seq++
	var m any
	if o.remote {
		if o.watch != nil {
			o.watch.SentBatch(o.seq)
		}
		rb := &messages.RecordBatch{Epoch: t.epoch, Channel: uint32(o.input), Seq: o.seq}
		if err := o.codec.Encode(batch, rb); err != nil {
			t.fail(fmt.Errorf("encode a batch for %s: %w", o.to, err))
		}
		if ts != nil {
			rb.Timestamps = dataflow.EncodeTimestamps(ts)
			dataflow.ReleaseTimestamps(ts)
		}
		if n := len(rb.Data); n > maxWireBatch {
			t.fail(fmt.Errorf("a batch for %s encodes to %d bytes, over the %d that may cross nodes: records must encode to at most %d bytes",
				o.to, n, maxWireBatch, MaxWireRecord))
		}
		wireBatches.Add(1)
		wireRecords.Add(uint64(len(rb.Ends)))
		wireBytes.Add(uint64(len(rb.Data) + 4*len(rb.Ends)))
		m = rb
	} else {
		m = &batchMsg{epoch: t.epoch, input: o.input, seq: o.seq, data: batch, ts: ts}
	}
	if f := t.sh.cfg.faults; f != nil && (f.Batch != nil || (o.remote && f.RemoteBatch != nil)) {
		hook := f.Batch
		if o.remote && f.RemoteBatch != nil {
			hook = f.RemoteBatch
		}
		switch hook(t.plan.ID, o.to, o.seq) {
		case Drop:
			return
		case Duplicate:
			t.root.Send(o.pid, m)
		}
	}
	t.root.Send(o.pid, m)
}

// fenced reports whether a message of epoch must be dropped, counting those
// of older epochs.
func (t *task) fenced(epoch uint64) bool {
	if epoch == t.epoch {
		return false
	}
	if epoch < t.epoch {
		t.sh.stale.Add(1)
	}
	return true
}

func (t *task) onCredit(m *messages.Credit) {
	if t.fenced(m.Epoch) || int(m.Channel) >= len(t.outs) {
		return
	}
	o := &t.outs[m.Channel]
	o.granted = max(o.granted, m.Granted) // cumulative: a late or repeated grant is no more
	if m.Report && o.watch != nil {
		o.watch.Heard(time.Now(), linkwatch.Report{Seq: m.ArrivedSeq, Barrier: m.ArrivedBarrier, Ended: m.ArrivedEnd, Watermark: m.ArrivedWatermark})
	}
	t.sendQueued(o)
}

// sendQueued sends what o's credit allows of its queue; once the queue is
// empty and no other output waits, the task goes on.
func (t *task) sendQueued(o *outChannel) {
	if len(o.queue) == 0 {
		return
	}
	n := 0
	for n < len(o.queue) && (o.queue[n].batch == nil || o.hasCredit()) {
		it := o.queue[n]
		o.queue[n] = outItem{}
		if it.batch != nil {
			t.ctr.queued.Add(-1)
		}
		n++
		t.sendItem(o, it)
		if it.barrier != nil && t.outWait != nil {
			t.barrierLeft(it.barrier.CheckpointId)
		}
	}
	o.queue = o.queue[n:]
	if len(o.queue) > 0 {
		return
	}
	t.outDrained(o)
}

// outDrained notes that o's queue is empty: once no other output waits,
// the task goes on.
func (t *task) outDrained(o *outChannel) {
	o.queue = nil
	t.backlogged--
	if t.backlogged == 0 {
		t.ctr.endBlocked(t.blockedSince)
		t.drain()
		t.schedulePoll()
		t.checkFinished()
	}
}

// onRecordBatch decodes a batch from another process.
func (t *task) onRecordBatch(m *messages.RecordBatch) {
	if t.fenced(m.Epoch) || int(m.Channel) >= len(t.ins) {
		return
	}
	in := &t.ins[m.Channel]
	if in.codec == nil { // nobody sends one: its sender runs here
		t.log.Warn("dropping an encoded batch on an input from this process", "input", m.Channel, "from", t.inputName(int(m.Channel)))
		return
	}
	data, err := in.codec.Decode(m)
	if err != nil {
		t.fail(fmt.Errorf("decode batch %d on input %d from %s: %w", m.Seq, m.Channel, t.inputName(int(m.Channel)), err))
	}
	var ts []int64
	if len(m.Timestamps) > 0 {
		if ts, err = dataflow.DecodeTimestamps(m.Timestamps, len(m.Ends)); err != nil {
			t.fail(fmt.Errorf("decode batch %d on input %d from %s: %w", m.Seq, m.Channel, t.inputName(int(m.Channel)), err))
		}
	}
	t.onBatch(&batchMsg{epoch: m.Epoch, input: int32(m.Channel), seq: m.Seq, data: data, ts: ts})
}

func (t *task) onBatch(m *batchMsg) {
	if m.mark != markNone {
		t.onWatermark(m)
		return
	}
	if t.fenced(m.epoch) || int(m.input) >= len(t.ins) {
		return // fenced: sent before the last restore
	}
	in := &t.ins[m.input]
	if m.seq != in.seq+1 {
		t.failAs(CauseOther, fmt.Errorf("sequence gap on input %d from %s: got batch %d, want %d", m.input, t.inputName(int(m.input)), m.seq, in.seq+1))
	}
	in.seq = m.seq
	t.acts = t.aligner.Step(align.Event[*batchMsg]{Kind: align.Data, Input: int(m.input), Data: m}, t.acts[:0])
	t.enqueue()
}

func (t *task) onBarrier(m *messages.Barrier) {
	if t.fenced(m.Epoch) || int(m.Channel) >= len(t.ins) {
		return
	}
	if in := &t.ins[m.Channel]; m.LastSeq != in.seq {
		t.failAs(CauseOther, fmt.Errorf("sequence gap before barrier %d on input %d from %s: last batch %d, received up to %d",
			m.CheckpointId, m.Channel, t.inputName(int(m.Channel)), m.LastSeq, in.seq))
	}
	t.noteBarrier(m)
	t.acts = t.aligner.Step(align.Event[*batchMsg]{Kind: align.Barrier, Input: int(m.Channel), Checkpoint: m.CheckpointId, Aligned: m.Savepoint != "" || m.Aligned}, t.acts[:0])
	t.noteAlignment()
	if t.sh.cfg.alignTimeout > 0 && m.CheckpointId > t.alignTimerID {
		// No alignment began (one input, or the last barrier came at
		// once), but the snapshot may wait behind the queued input: the
		// timeout covers that wait too (switchQueued).
		t.armAlignTimeout(m.CheckpointId)
	}
	t.enqueue()
}

// noteAlignment starts the clock (and the timeout) of an alignment that
// began: at a barrier, or at one released from a buffer when an end, an
// abort or a timeout ended the alignment before it.
func (t *task) noteAlignment() {
	if id, ok := t.aligner.Aligning(); ok && id != t.alignID {
		t.alignID, t.alignStart = id, time.Now()
		t.armAlignTimeout(id)
	}
}

// barrierInfo is what the barriers of one checkpoint say.
type barrierInfo struct {
	id, base  uint64
	ts        int64
	savepoint string
	aligned   bool
	stop      bool // a stop-with-savepoint's
}

// maxBarriers bounds the checkpoints a task remembers barriers of: the
// oldest are forgotten (they are aborted by then).
const maxBarriers = 64

// noteBarrier records what barrier m says of its checkpoint, on its
// first arrival. A barrier of a checkpoint already snapshotted is stale
// (the aligner ignores it) and is not recorded: it must not push out a
// pending checkpoint's entry.
func (t *task) noteBarrier(m *messages.Barrier) {
	if m.CheckpointId <= t.aligner.LastSnapshot() {
		return
	}
	for _, b := range t.barriers {
		if b.id == m.CheckpointId {
			return
		}
	}
	if len(t.barriers) == maxBarriers {
		t.barriers = append(t.barriers[:0], t.barriers[1:]...)
	}
	t.barriers = append(t.barriers, barrierInfo{id: m.CheckpointId, base: m.BaseCheckpointId, ts: m.TimestampUnixNano, savepoint: m.Savepoint, aligned: m.Aligned, stop: m.Stop})
}

// useBarrier sets the fields snapshot reads from what checkpoint id's
// barriers said, and forgets it and the older ones. A source's trigger
// has set them already.
func (t *task) useBarrier(id uint64) {
	n := 0
	for _, b := range t.barriers {
		if b.id == id {
			t.barrierTS, t.savepointName, t.savepointID, t.barrierBase, t.barrierAligned = b.ts, b.savepoint, b.id, b.base, b.aligned
			if b.stop && b.savepoint != "" && id > t.abortedAt {
				t.stopAt = id
			}
		}
		if b.id > id {
			t.barriers[n] = b
			n++
		}
	}
	t.barriers = t.barriers[:n]
}

func (t *task) onEnd(m *messages.EndOfInput) {
	if t.fenced(m.Epoch) || int(m.Channel) >= len(t.ins) {
		return
	}
	in := &t.ins[m.Channel]
	if m.LastSeq != in.seq {
		t.failAs(CauseOther, fmt.Errorf("sequence gap at the end of input %d from %s: last batch %d, received up to %d", m.Channel, t.inputName(int(m.Channel)), m.LastSeq, in.seq))
	}
	if t.et.in != nil { // the input's end counts in event time behind its last batch
		t.acts = t.aligner.Step(align.Event[*batchMsg]{Kind: align.Data, Input: int(m.Channel), Data: &batchMsg{epoch: m.Epoch, input: int32(m.Channel), mark: markEnd}}, t.acts[:0])
		t.ready = append(t.ready, t.acts...)
		clear(t.acts)
	}
	t.acts = t.aligner.Step(align.Event[*batchMsg]{Kind: align.End, Input: int(m.Channel)}, t.acts[:0])
	t.noteAlignment()
	t.enqueue()
}

func (t *task) onAbort(m *messages.AbortCheckpoint) {
	if m.Epoch == t.epoch {
		t.abortOutWait(m.CheckpointId)
		t.stopAlignTimeout(m.CheckpointId)
	}
	if m.Epoch != t.epoch || t.aligner == nil {
		return
	}
	t.acts = t.aligner.AbortCheckpoint(m.CheckpointId, t.acts[:0])
	t.noteAlignment()
	t.enqueue()
}

func (t *task) inputName(i int) string {
	ch := t.sh.plan.Channels[t.plan.Inputs[i]]
	return t.sh.plan.Tasks[ch.From].ID
}

// enqueue queues the aligner's actions and runs what output credit allows.
func (t *task) enqueue() {
	if t.sh.cfg.unaligned || t.sh.cfg.alignTimeout > 0 {
		t.stepUnaligned()
	}
	t.ready = append(t.ready, t.acts...)
	clear(t.acts)
	t.drain()
}

// drain runs queued actions while no output waits for credit, and no
// barrier or alignment timeout waits in the mailbox (task_priority.go).
func (t *task) drain() {
	for t.head < len(t.ready) && t.backlogged == 0 && !t.prio.waiting() {
		a := t.ready[t.head]
		t.ready[t.head] = align.Action[*batchMsg]{}
		t.head++
		t.execute(a)
	}
	if t.head == len(t.ready) {
		t.ready, t.head = t.ready[:0], 0
	}
	t.armLinger()
	if t.proc != nil {
		t.armProcTimer()
	}
}

func (t *task) execute(a align.Action[*batchMsg]) {
	switch a.Kind {
	case align.Process:
		if a.Data.mark != markNone {
			t.onMark(a.Input, a.Data)
			return
		}
		if f := t.sh.cfg.faults; f != nil && f.Process != nil {
			f.Process(t.plan.ID)
		}
		t.dirty = true
		if !t.processBatch(a, batchLen(a.Data.data)) || a.Data.replayed {
			// The rest of the batch is queued again (task_pieces.go), or it
			// is channel state, whose credit was spent before the restore.
			return
		}
		in := &t.ins[a.Input]
		in.consumed++
		in.done++
		if in.consumed >= creditReturn(in.window) {
			g := in.grant()
			if in.arrival != nil {
				in.arrival.granted.Store(g)
			}
			t.root.Send(in.pid, &messages.Credit{Epoch: t.epoch, Channel: in.output, Granted: g})
			in.consumed = 0
		}
	case align.Snapshot:
		var aligned time.Duration
		if a.Checkpoint == t.alignID && !t.alignStart.IsZero() {
			aligned = time.Since(t.alignStart)
		}
		t.stopAlignTimeout(a.Checkpoint)
		t.useBarrier(a.Checkpoint)
		t.snapshot(a.Checkpoint, aligned)
	case align.Abort:
		t.decline(a.Checkpoint, "aborted during alignment: a newer checkpoint's barrier arrived, or one completed first")
	case align.AllEnded:
		t.endOutputs()
	}
}

// onPoll lets a source produce while its outputs have credit.
func (t *task) onPoll() {
	t.polling = false
	for i := 0; i < pollBatches && t.backlogged == 0 && !t.idle && !t.exhausted && !t.paused && t.running; i++ {
		if t.ctx.Err() != nil {
			return // the incarnation is ending: a failover or a stop
		}
		t.reading.begin()
		n, status, err := t.src.Produce(t.sh.cfg.batchSize)
		t.reading.end()
		if err != nil {
			if t.ctx.Err() != nil {
				return // interrupted by the end of the incarnation
			}
			t.fail(fmt.Errorf("source read: %w", err))
		}
		if n > 0 {
			t.dirty = true
		}
		t.et.sourceRead()
		switch status {
		case 0, dataflow.SourceMore:
		case dataflow.SourceIdle:
			t.idle = true
			t.flush()
			t.et.armIdle(t)
		case dataflow.SourceDone:
			t.exhausted = true
			t.et.exhausted()
			t.flush()
			t.root.Send(t.sh.jobPID, &messages.TaskExhausted{Epoch: t.epoch, Task: uint32(t.idx), WorkerId: t.sh.worker})
		}
	}
	t.armLinger()
	t.schedulePoll()
}

func (t *task) schedulePoll() {
	if t.src == nil || t.polling || t.idle || t.exhausted || t.paused || !t.running || t.backlogged > 0 {
		return
	}
	t.polling = true
	t.root.Send(t.self, thePoll)
}

func (t *task) flush() {
	t.inst.Flush()
	t.dirty = false
	t.et.send(t)
}

// armLinger makes sure a partly filled batch is sent within the linger
// time. A task whose output batches all left full (a sink has none) arms
// nothing: a timer that fires for nothing still wakes the task.
func (t *task) armLinger() {
	if t.lingerArmed || t.inst == nil || !(t.et.pending || t.dirty && t.inst.Pending()) {
		return
	}
	t.lingerArmed = true
	if t.lingerTimer == nil {
		root, self, msg := t.root, t.self, &lingerMsg{epoch: t.epoch}
		t.lingerTimer = time.AfterFunc(t.sh.cfg.linger, func() { root.Send(self, msg) })
		return
	}
	t.lingerTimer.Reset(t.sh.cfg.linger)
}

func (t *task) onLinger(m *lingerMsg) {
	if m.epoch != t.epoch {
		return
	}
	t.lingerArmed = false
	if (t.dirty || t.et.pending) && t.inst != nil {
		t.flush()
	}
}

// endOutputs ends the task: every input has ended (or the final checkpoint of
// an exhausted source is complete).
func (t *task) endOutputs() {
	if l, ok := t.inst.(dataflow.WatermarkListener); ok { // event time ends: every event-time timer fires
		if err := l.OnWatermark(watermark.Max); err != nil {
			t.fail(err)
		}
	}
	if err := t.inst.EndOfInput(); err != nil {
		t.fail(err)
	}
	t.flush()
	t.sendControl(outItem{end: true})
	t.ending = true
	t.checkFinished()
}

func (t *task) checkFinished() {
	if t.ending && !t.finished && t.backlogged == 0 {
		t.finished = true
		m := &messages.TaskFinished{Epoch: t.epoch, Task: uint32(t.idx)}
		if t.sh.worker != "" { // its counters are final: the coordinator needs them
			m.WorkerId, m.Counters = t.sh.worker, t.ctr.report(t.idx)
		}
		t.root.Send(t.sh.jobPID, m)
	}
}
