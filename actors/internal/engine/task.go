package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/actors/align"
	"github.com/snapflow/snapflow/actors/linkwatch"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/pieces"
	"github.com/snapflow/snapflow/internal/watermark"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/incremental"
)

// pollBatches bounds the batches a source produces per poll message, so that
// triggers and credits are handled between polls.
const pollBatches = 16

// task is the actor of one task. A new value is made for every incarnation:
// protoactor-go re-creates it through its producer on restart.
type task struct {
	sh   *shared
	idx  int
	plan *dataflow.TaskPlan
	log  *slog.Logger
	ctr  *taskCounters // this task's counters, in sh

	self  *actor.PID
	root  *actor.RootContext
	epoch uint64
	// ctx ends with the incarnation (a failover, a stop or a failure of the
	// job); a source gets it in Open.
	ctx context.Context

	inst dataflow.Instance
	src  dataflow.SourceInstance

	outs       []outChannel
	ins        []inChannel
	backlogged int // outputs with queued items (waiting for credit)
	// blockedSince is when backlogged last became positive (monoNow), the
	// start of the backpressure interval that is open while it stays so.
	blockedSince int64
	// restoring is set while the task loads its state: a failure then is
	// a restore failure.
	restoring bool

	aligner *align.Aligner[*batchMsg]
	acts    []align.Action[*batchMsg]
	ready   []align.Action[*batchMsg] // actions waiting for output credit
	head    int

	running   bool
	paused    bool       // a source during a synchronous checkpoint or a stop-with-savepoint
	reading   *readWatch // a source task's watch on its reads
	polling   bool
	idle      bool
	exhausted bool
	ending    bool
	finished  bool

	dirty       bool // records emitted since the last flush
	lingerArmed bool
	lingerTimer *time.Timer

	alignID    uint64
	alignStart time.Time
	barrierTS  int64
	// barrierBase is the base the last barrier (or trigger) named for
	// incremental snapshots.
	barrierBase uint64
	// barrierAligned: the last barrier (or trigger) asked for an aligned
	// checkpoint whatever the mode (the final one).
	barrierAligned bool
	// incr decides what an incremental snapshot uploads; nil when
	// checkpoints are full or the operator keeps no keyed state.
	incr *incremental.Tracker
	// disk records where the files of the task's database are stored,
	// when it keeps state on disk and checkpoints are incremental.
	disk *diskBook
	// adopted is the disk checkpoint whose files became the task's
	// database at its restore, if any.
	adopted  *messages.DiskCheckpoint
	keyed    keyGroupSnapshotter
	dirtyBuf []uint64
	// savepointName names the savepoint that checkpoint savepointID is, as
	// the last barrier (or trigger) received said, "" for a checkpoint: the
	// snapshot of that id, and of no other, is stored there.
	savepointName string
	savepointID   uint64
	// barriers are what the barriers of the checkpoints not yet
	// snapshotted said (at least once, several may be pending); snapshot
	// takes the fields above from its checkpoint's.
	barriers []barrierInfo
	// persist is the channel state of the unaligned checkpoint being
	// recorded (see task_inflight.go); replay is the channel state the
	// task was restored with, until it runs.
	persist *inFlight
	replay  []*messages.InFlight
	// outWait is the aligned checkpoint whose barrier waits in output
	// queues (see task_outswitch.go).
	outWait *outSwitch
	// alignTimer fires the alignment timeout (WithAlignmentTimeout).
	alignTimer *time.Timer
	// alignTimerID is the checkpoint alignTimer was last armed for.
	alignTimerID uint64
	// prio counts the barriers and alignment timeouts waiting in the
	// mailbox, nil in the modes where they do not overtake it (see
	// task_priority.go).
	prio *priorityMail
	// dispatch runs the task's mailbox (dispatch.go).
	dispatch *taskDispatcher
	// pieces sizes the pieces a task whose records are slow processes its
	// batches in, where barriers overtake (see task_pieces.go).
	pieces pieces.Estimator
	// stopAt is the checkpoint of a stop-with-savepoint this task has
	// snapshotted: a source stays paused when that savepoint completes (the
	// job stops), and no task fires a processing-time timer from the
	// snapshot until the savepoint fails or is aborted (releaseStop), so
	// that nothing it emits after the barrier is emitted again by the job
	// that resumes from the savepoint.
	stopAt uint64
	// abortedAt is the newest checkpoint aborted in this epoch.
	abortedAt uint64

	// The link watch of channels that cross nodes (see link.go): watching
	// is set when an output is remote.
	watching    bool
	linkTimer   *time.Timer
	stopReports func()

	// et is the task's event time (see task_time.go), set when the task
	// starts.
	et *eventTime
	// proc fires the instance's processing-time timers; nil when it has
	// none.
	proc *procClock
}

type outChannel struct {
	pid     *actor.PID
	to      string // receiver task id
	input   int32  // receiver's input index
	granted uint64 // the receiver's cumulative credit: batches up to this seq may be sent
	seq     uint64
	queue   []outItem
	// remote is set when the receiver runs in another process: batches
	// are encoded by codec into RecordBatches, and watch judges the link.
	remote bool
	codec  dataflow.BatchCodec
	watch  *linkwatch.Sender
	// wmSeq numbers the watermarks sent to another node (messages.Watermark.seq).
	wmSeq uint64
	// counted says that the batches sent here count toward the task's
	// records out (see dataflow.TaskPlan.CountedOutputs): once per record.
	counted bool
}

// hasCredit reports whether o may send a batch now.
func (o *outChannel) hasCredit() bool { return o.granted > o.seq }

// outItem is a batch, a barrier or an end of input waiting behind batches
// that have no credit yet.
type outItem struct {
	batch   any
	ts      []int64
	barrier *messages.Barrier
	end     bool
	wm      *watermark.Status
}

type inChannel struct {
	pid      *actor.PID
	output   uint32 // sender's output index
	seq      uint64
	consumed int    // batches processed since credit was last returned
	done     uint64 // batches processed in all
	window   int    // the credits granted to the sender
	codec    dataflow.BatchCodec
	// arrival is what the mailbox saw arrive on an input from another
	// node (nil: in this process, or no link watch).
	arrival *arrival
}

// creditReturn is how many batches a task processes on an input before it
// returns their credit: a quarter of the window (at least 1). Credit is a
// cumulative grant, so how often it is sent changes nothing but how soon a
// sender learns of it. Returned every half window, the parity job's source
// ran out of credit while its consumers held batches already processed: a
// quarter window gave it 16% more records/s (the medians of 8 runs of each,
// alternated, on two cores; bench/results/credit-return-quarter.txt), for
// twice as many credit messages.
func creditReturn(window int) int { return max(1, window/4) }

// grant returns the input's cumulative credit.
func (in *inChannel) grant() uint64 { return in.done + uint64(in.window) }

func newTask(sh *shared, idx int) *task {
	p := sh.plan.Tasks[idx]
	return &task{sh: sh, idx: idx, plan: p, log: sh.log.With("task", p.ID), ctr: &sh.counters[idx]}
}

// Receive handles one message. A panic becomes a *TaskError that
// protoactor-go escalates to the job actor.
func (t *task) Receive(ctx actor.Context) {
	defer t.recoverFailure()
	prio := t.prio.received(ctx.Message())
	switch m := ctx.Message().(type) {
	case *batchMsg:
		t.onBatch(m)
	case *messages.RecordBatch:
		t.onRecordBatch(m)
	case *messages.Credit:
		t.onCredit(m)
	case *messages.Barrier:
		t.onBarrier(m)
	case *messages.EndOfInput:
		t.onEnd(m)
	case *messages.Watermark:
		t.onWatermark(&batchMsg{epoch: m.Epoch, input: int32(m.Channel), mark: markWatermark, wm: watermark.Status{Watermark: m.Watermark, Idle: m.Idle}})
	case *idleTick:
		t.onIdleTick(m)
	case *procTick:
		t.onProcTick(m)
	case *pollMsg:
		t.onPoll()
	case *lingerMsg:
		t.onLinger(m)
	case *alignTimeoutMsg:
		t.onAlignTimeout(m)
	case *outTimeoutMsg:
		t.onOutTimeout(m)
	case *linkTick:
		t.onLinkTick(m)
	case *uploadedMsg:
		if m.epoch == t.epoch && t.incr != nil {
			t.incr.Uploaded(m.id, m.handle)
			if d := m.handle.GetDisk(); d != nil {
				t.disk.uploaded(m.db, m.id, d.GetFiles())
			}
		}
	case *wakeMsg:
		if m.epoch == t.epoch {
			t.idle = false
			t.schedulePoll()
		}
	case *diskFailedMsg:
		if m.epoch == t.epoch && t.inst != nil {
			t.fail(m.err) // it names the database and what failed
		}
	case *messages.TriggerCheckpoint:
		if m.Epoch == t.epoch && t.src != nil {
			t.barrierTS, t.savepointName, t.savepointID = m.TimestampUnixNano, m.Savepoint, m.CheckpointId
			t.barrierBase, t.barrierAligned = m.BaseCheckpointId, m.Aligned
			// A stop-with-savepoint: nothing after the barrier, unless the
			// savepoint aborts.
			t.paused = t.sh.cfg.syncSnapshots || m.Stop
			if m.Stop {
				t.stopAt = m.CheckpointId
			}
			t.snapshot(m.CheckpointId, 0)
		}
	case *messages.AbortCheckpoint:
		if m.Epoch == t.epoch && t.incr != nil {
			t.incr.Aborted(m.CheckpointId)
		}
		t.onAbort(m)
		if m.Epoch == t.epoch {
			// An aligned snapshot of it may still wait behind input
			// (backpressure): when it runs, it must not hold the timers.
			t.abortedAt = max(t.abortedAt, m.CheckpointId)
			t.releaseStop(m.CheckpointId)
		}
		t.resume(m.Epoch)
	case *messages.CompleteCheckpoint:
		t.onComplete(m)
	case *messages.RunTasks:
		t.onRun(m)
	case *messages.EndSource:
		if m.Epoch == t.epoch && t.src != nil && t.exhausted && !t.ending {
			t.endOutputs()
		}
	case *actor.Started:
		t.onStarted(ctx)
	case *actor.Restarting, *actor.Stopping:
		t.shutdown()
		return
	case *actor.Stopped:
		t.dispatch.stop()
	default:
		t.log.Warn("dropping a message of unknown type", "type", fmt.Sprintf("%T", m))
	}
	if prio && !t.prio.waiting() {
		// The queue waited for this barrier or timeout, also when it was
		// dropped (fenced, stale) and started nothing.
		t.drain()
	}
}

func (t *task) recoverFailure() {
	r := recover()
	if r == nil {
		return
	}
	if te, ok := r.(*TaskError); ok {
		panic(te)
	}
	cause := CausePanic
	if t.restoring {
		cause = CauseRestore
	}
	panic(&TaskError{Task: t.plan.ID, Operator: t.plan.Operator, Epoch: t.epoch, Value: r, Stack: debug.Stack(), cause: cause})
}

// fail fails the task with err, an error of an operator (or of its
// transactional sink's commit).
func (t *task) fail(err error) { t.failAs(errorCause(err), err) }

// failAs fails the task with err, whose cause is known; while the task
// restores its state, every failure is a restore failure.
func (t *task) failAs(cause FailureCause, err error) {
	if t.restoring {
		cause = CauseRestore
	}
	// A returned error needs no stack: it says what failed. A panic keeps
	// the stack of the code that panicked (recoverFailure).
	panic(&TaskError{Task: t.plan.ID, Operator: t.plan.Operator, Epoch: t.epoch, Value: err, cause: cause})
}

func (t *task) onStarted(ctx actor.Context) {
	t.self, t.root = ctx.Self(), t.sh.system.Root
	inc := t.sh.inc.Load()
	t.epoch, t.ctx = inc.epoch, inc.ctx
	inst, err := t.sh.plan.NewInstance(t.idx, dataflow.InstanceContext{
		Job: t.sh.job, BatchSize: t.sh.cfg.batchSize, BatchBytes: t.sh.cfg.batchBytes, Sender: t, Logger: t.log, Context: t.ctx, Epoch: t.epoch,
		SkipDirtyKeyGroups: !t.sh.cfg.incremental, // full checkpoints need no record of what was written
		DiskState:          t.sh.cfg.diskStateFor(t.log),
	})
	if err != nil {
		t.fail(err)
	}
	t.inst = inst
	if dc, ok := inst.(dataflow.DiskCheckpointer); ok && dc.OnDisk() {
		// A database that fails while the task waits (for input, or for a
		// checkpoint's flush in the upload) fails the task at once.
		root, self, epoch := t.root, t.self, t.epoch
		dc.WatchDisk(func(err error) { root.Send(self, &diskFailedMsg{epoch: epoch, err: err}) })
	}
	t.et = newEventTime(t.plan, inst)
	t.src, _ = inst.(dataflow.SourceInstance)
	if t.src != nil {
		t.reading = watchReads(t.ctx, t.log)
		if t.idx < len(t.sh.reads) {
			t.sh.reads[t.idx].Store(t.reading)
		}
	}
	// A task without state in the checkpoint belongs to an operator that is
	// new or held no state: dataflow.PlanRestore has refused any other
	// checkpoint. It starts empty.
	st := inc.restoreState(t.sh.plan, t.idx)
	if st != nil {
		t.restoring = true
		if f := t.sh.cfg.faults; f != nil && f.Restore != nil {
			f.Restore(t.plan.ID, inc.restore.Manifest.GetCheckpointId())
		}
		if err := t.restore(inc, st); err != nil {
			t.fail(fmt.Errorf("restore from checkpoint %d: %w", inc.restore.Manifest.GetCheckpointId(), err))
		}
		t.restoring = false
	}
	t.replay = inc.restoreInFlight(t.idx, st)
	t.setupIncremental(inc)
	t.outs = make([]outChannel, len(t.plan.Outputs))
	for i, c := range t.plan.CountedOutputs() {
		t.outs[i].counted = c
	}
	t.ins = make([]inChannel, len(t.plan.Inputs))
	switch {
	case len(t.ins) == 0:
	case t.sh.cfg.atLeastOnce:
		t.aligner = align.NewAtLeastOnce[*batchMsg](len(t.ins))
	case t.sh.cfg.unaligned:
		t.aligner = align.NewUnaligned[*batchMsg](len(t.ins))
	default:
		t.aligner = align.New[*batchMsg](len(t.ins))
	}
	if pt, ok := inst.(dataflow.ProcessingTimers); ok {
		t.proc = &procClock{timers: pt}
	}
	if s, ok := inst.(dataflow.Starter); ok {
		if err := s.Start(); err != nil {
			if t.ctx.Err() != nil {
				return // stopping: not a failure
			}
			t.fail(fmt.Errorf("start: %w", err))
		}
	}
	t.root.Send(t.sh.jobPID, &messages.TaskRestored{Epoch: t.epoch, Task: uint32(t.idx), WorkerId: t.sh.worker})
}

func (t *task) onRun(m *messages.RunTasks) {
	if m.Epoch != t.epoch || t.running {
		return
	}
	t.running = true
	for i, id := range t.plan.Outputs {
		ch := t.sh.plan.Channels[id]
		o := &t.outs[i]
		o.pid, o.input, o.to = t.sh.pids[ch.To], int32(ch.ToInput), t.sh.plan.Tasks[ch.To].ID
		if o.remote = o.pid.Address != t.sh.system.Address(); o.remote {
			o.codec = t.sh.plan.ChannelCodec(id)
		}
	}
	for i, id := range t.plan.Inputs {
		ch := t.sh.plan.Channels[id]
		in := &t.ins[i]
		in.pid, in.output, in.window = t.sh.pids[ch.From], uint32(ch.FromOutput), t.sh.cfg.credits
		if in.pid.Address != t.sh.system.Address() {
			in.codec = t.sh.plan.ChannelCodec(id)
			in.window = min(MaxCredits, t.sh.cfg.credits*remoteCreditFactor)
			if a := t.sh.arrivalsOf(t.idx); a != nil {
				in.arrival = &a.ins[i]
				in.arrival.granted.Store(in.grant())
			}
		}
		t.root.Send(in.pid, &messages.Credit{Epoch: t.epoch, Channel: in.output, Granted: in.grant()})
	}
	if t.replay != nil {
		t.replayInFlight(t.replay)
		t.replay = nil
		// A receiver's credit may have come before this RunTasks (in a
		// cluster they travel on different links): send what it allows.
		for i := range t.outs {
			t.sendQueued(&t.outs[i])
		}
		t.drain()
	}
	t.watchLinks()
	if t.src != nil {
		root, self, epoch := t.root, t.self, t.epoch
		if err := t.src.Open(t.ctx, func() { root.Send(self, &wakeMsg{epoch: epoch}) }); err != nil {
			if t.ctx.Err() != nil {
				return // stopping: not a failure
			}
			t.fail(fmt.Errorf("open source: %w", err))
		}
		t.schedulePoll()
	}
	t.armProcTimer() // timers that became due while the job was down fire now
}

// onComplete lets transactional sinks commit, and a paused source go on.
func (t *task) onComplete(m *messages.CompleteCheckpoint) {
	if m.Epoch != t.epoch {
		return
	}
	if f := t.sh.cfg.faults; f != nil && f.Complete != nil {
		f.Complete(t.plan.ID, m.CheckpointId)
	}
	if l, ok := t.inst.(dataflow.CheckpointListener); ok {
		if err := l.CheckpointComplete(m.CheckpointId, m.Commit); err != nil {
			t.fail(fmt.Errorf("checkpoint %d complete: %w", m.CheckpointId, err))
		}
	}
	if m.Ack {
		t.root.Send(t.sh.jobPID, &messages.CheckpointCommitted{Epoch: t.epoch, CheckpointId: m.CheckpointId, Task: uint32(t.idx), WorkerId: t.sh.worker})
	}
	switch {
	case m.CheckpointId != t.stopAt:
		t.resume(m.Epoch)
	case !m.Ack: // the stop failed (see stoppedAt): the source goes on
		t.releaseStop(m.CheckpointId)
		t.resume(m.Epoch)
	} // else after a stop-with-savepoint, nothing more
}

// releaseCounters withdraws the task's queued batches and closes its
// backpressure interval: the next incarnation counts its own.
func (t *task) releaseCounters() {
	if t.backlogged > 0 {
		t.ctr.endBlocked(t.blockedSince)
		t.backlogged = 0
	}
	var queued int64
	for i := range t.outs {
		for _, it := range t.outs[i].queue {
			if it.batch != nil {
				queued++
			}
		}
		t.outs[i].queue = nil
	}
	t.ctr.queued.Add(-queued)
}

// releaseStop forgets the stop-with-savepoint of checkpoint id, which
// failed or was aborted: the job goes on, and so do the processing-time
// timers it held.
func (t *task) releaseStop(id uint64) {
	if id == 0 || t.stopAt != id {
		return
	}
	t.stopAt = 0
	t.armProcTimer()
	if t.idle {
		t.et.armIdle(t) // a source's idleness, held likewise (onIdleTick)
	}
}

// resume lets a source paused by a synchronous checkpoint or a
// stop-with-savepoint produce again.
func (t *task) resume(epoch uint64) {
	if epoch == t.epoch && t.paused {
		t.paused = false
		t.schedulePoll()
	}
}

func (t *task) shutdown() {
	t.giveUpInFlight(math.MaxUint64) // an upload waiting for channel state ends
	t.abortOutWait(math.MaxUint64)
	if t.alignTimer != nil {
		t.alignTimer.Stop()
	}
	t.et.stop()
	t.proc.stop()
	if t.lingerTimer != nil {
		t.lingerTimer.Stop()
	}
	t.stopLinks()
	t.releaseCounters()
	inst := t.inst
	t.inst = nil // closed at most once, even if Close panics
	if inst == nil {
		return
	}
	// A panic must not leave the Restarting or Stopping handler: protoactor
	// would leave the actor suspended half-way through its restart.
	defer func() {
		if r := recover(); r != nil {
			t.log.Error("closing the task panicked", "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if err := inst.Close(); err != nil {
		t.log.Warn("closing the task failed", "err", err)
	}
}

// keyGroupSnapshotter is dataflow.KeyGroupSnapshotter: an instance whose
// keyed state records the key groups written.
type keyGroupSnapshotter interface {
	TakeDirtyKeyGroups(dst []uint64)
	SnapshotKeyGroups(st *messages.TaskState, groups []uint64) error
}

// setupIncremental gives the task its incremental bookkeeping when
// checkpoints are incremental and its operator tracks its keyed state: a
// task restored from its own state, at the same key groups, may build on
// that checkpoint.
func (t *task) setupIncremental(inc *incarnation) {
	ks, ok := t.inst.(keyGroupSnapshotter)
	if !t.sh.cfg.incremental || !ok || !t.plan.Keyed {
		return
	}
	tr, err := incremental.New(t.plan.KeyGroupStart, t.plan.KeyGroupEnd, t.sh.plan.MaxParallelism, t.sh.cfg.rewriteEvery)
	if err != nil {
		t.fail(err)
	}
	t.incr, t.keyed, t.dirtyBuf = tr, ks, make([]uint64, tr.Words())
	t.disk = newDiskBook(t.sh.job, t.sh.cfg.rewriteEvery)
	if inc.restore == nil || inc.restore.Manifest.GetSavepoint() != "" {
		return
	}
	if inc.assign != nil { // only a task that restores its own state as it is
		if tr := inc.assign.Task(t.idx); tr.Rescaled || len(tr.Parts) != 1 || tr.Parts[0] != t.plan.ID {
			return
		}
	}
	for _, e := range inc.restore.Manifest.GetTasks() {
		// A checkpoint written from a savepoint holds the savepoint's
		// objects, which a checkpoint must never reference.
		if e.GetTaskId() == t.plan.ID && strings.HasPrefix(e.GetState().GetKey(), snapshots.CheckpointsPrefix(t.sh.job)) {
			// A checkpoint of the other backend holds the states in
			// another form (key groups, or database files): the next
			// checkpoint must not build on it, or an entry deleted since
			// would come back from the sections it references.
			dc, ok := t.inst.(dataflow.DiskCheckpointer)
			if (e.GetState().GetDisk() != nil) != (ok && dc.OnDisk()) {
				continue
			}
			tr.Restored(inc.restore.Manifest.GetCheckpointId(), e.GetState())
			if d := e.GetState().GetDisk(); d != nil && d == t.adopted {
				t.disk.uploaded(dc.DatabaseID(), inc.restore.Manifest.GetCheckpointId(), d.GetFiles())
			}
		}
	}
}

// restore loads st, the task's state in the incarnation's checkpoint, into
// its instance. When the checkpoint was loaded as heads (see loadPoint),
// st holds no entries: the instance restores the head, then the key
// groups of the task's range, streamed from the store from each stored
// state the task's state comes from, checked and decoded in parallel,
// never the whole state at once.
func (t *task) restore(inc *incarnation, st *messages.TaskState) error {
	if err := t.restoreHeap(inc, st); err != nil {
		return err
	}
	return t.restoreDisk(inc)
}

// restoreHeap is restore but for the states stored as database files.
func (t *task) restoreHeap(inc *incarnation, st *messages.TaskState) error {
	if !inc.restore.Heads {
		return t.inst.Restore(st)
	}
	kr, ok := t.inst.(dataflow.KeyGroupRestorer)
	if !ok {
		if len(st.GetKeyGroups()) > 0 {
			return fmt.Errorf("the operator's instance (%T) holds keyed state but cannot restore it key group by key group (dataflow.KeyGroupRestorer)", t.inst)
		}
		return t.inst.Restore(st)
	}
	if err := t.inst.Restore(st); err != nil {
		return err
	}
	parts := []string{t.plan.ID}
	if inc.assign != nil {
		parts = inc.assign.Task(t.idx).Parts
	}
	handles := make(map[string]*messages.StateHandle, len(inc.restore.Manifest.GetTasks()))
	for _, e := range inc.restore.Manifest.GetTasks() {
		handles[e.GetTaskId()] = e.GetState()
	}
	ctx, cancel := context.WithTimeout(inc.ctx, t.sh.timeout())
	defer cancel()
	for _, id := range parts {
		h := handles[id]
		if h == nil {
			continue
		}
		if _, err := t.sh.cps.StreamKeyGroups(ctx, h, t.plan.KeyGroupStart, t.plan.KeyGroupEnd, kr.RestoreKeyGroup); err != nil {
			return err
		}
	}
	return nil
}
