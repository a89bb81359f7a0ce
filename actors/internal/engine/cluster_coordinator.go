package engine

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/actors/membership"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

// clusterCoord is the cluster side of a coordinator's job actor: the
// workers' registrations and heartbeats, placement and deployment. It runs
// in the job actor.
type clusterCoord struct {
	j        *jobActor
	spec     *Cluster
	id       string // this coordinator incarnation
	settings *messages.RuntimeSettings
	members  *membership.Members
	pids     map[string]*actor.PID // worker host actors by worker id
	ids      map[string]string     // worker id by address, for Terminated
	// deployed is the epoch deployed last (0: none), placed where its tasks
	// run.
	deployed uint64
	placed   membership.Placement
	// waiting is set until the first deployment, which waits for workers.
	waiting bool
	// short is when a failover first found too few slots (zero: it did
	// not, or a deployment has been placed since); pending is the
	// deployment that waits for a worker to join.
	short   time.Time
	pending *pendingDeploy
	hbSeq   uint64
	hbTimer *time.Timer
	hbDue   time.Time // when the heartbeat tick is due
	// ending holds the workers yet to let go of the ended job; ended is
	// set once the job has ended, when ending may be empty already.
	ending map[string]bool
	ended  bool
	// counts are the task counters each worker reported last, by worker
	// id and task index (see report).
	counts map[string][]workerCounts
	// retired are, by task, what lost workers had counted (their queued
	// batches dropped); gone are the ids of lost workers, whose late
	// reports are ignored.
	retired []workerCounts
	gone    map[string]bool
}

// endTick ends the wait for the workers to let go of the ended job.
type endTick struct{}

// pendingDeploy is a failover's deployment waiting for slots.
type pendingDeploy struct {
	epoch  uint64
	rp     *snapshots.Restorable
	assign *dataflow.Restore
}

// slotTimeout ends the wait of the deployment of epoch for slots.
type slotTimeout struct{ epoch uint64 }

type heartbeatTick struct{}

func newClusterCoord(j *jobActor, id string) *clusterCoord {
	c := j.sh.cfg
	spec := c.cluster
	return &clusterCoord{
		j: j, spec: spec, id: id,
		members: membership.New(membership.Config{HeartbeatInterval: spec.HeartbeatInterval, HeartbeatTimeout: spec.HeartbeatTimeout}),
		pids:    map[string]*actor.PID{}, ids: map[string]string{}, waiting: true, counts: map[string][]workerCounts{}, gone: map[string]bool{},
		settings: &messages.RuntimeSettings{
			BatchSize: uint32(c.batchSize), BatchBytes: uint64(c.batchBytes), Credits: uint32(c.credits),
			LingerNanos: c.linger.Nanoseconds(), CheckpointTimeoutNanos: j.sh.timeout().Nanoseconds(),
			SynchronousSnapshots: c.syncSnapshots, AtLeastOnce: c.atLeastOnce, Unaligned: c.unaligned, AlignTimeoutNanos: int64(c.alignTimeout),
			Incremental: c.incremental, RewriteEvery: uint32(c.rewriteEvery), InlineLimit: uint64(c.inlineLimit(j.sh.plan)),
			DiskState: c.diskState != nil, DiskCacheBytes: c.diskState.GetCacheBytes(), DiskMemtableBytes: c.diskState.GetMemTableBytes(),
			DiskNoLocalRecovery:    c.diskState.GetNoLocalRecovery(),
			HeartbeatIntervalNanos: spec.HeartbeatInterval.Nanoseconds(), HeartbeatTimeoutNanos: spec.HeartbeatTimeout.Nanoseconds(),
		},
	}
}

// start begins the wait for workers.
func (c *clusterCoord) start() {
	c.j.log.Info("coordinator waiting for workers", "address", c.j.sh.system.Address(), "workers", c.spec.Workers,
		"tasks", len(c.j.sh.plan.Tasks)) // the logger names the coordinator
	c.armHeartbeat()
}

// receive handles the cluster's messages; it reports whether m was one.
func (c *clusterCoord) receive(ctx actor.Context, m any) bool {
	switch m := m.(type) {
	case *messages.RegisterWorker:
		c.onRegister(ctx, m)
	case *messages.JobDoneAck:
		c.released(m.WorkerId)
	case *slotTimeout:
		c.onSlotTimeout(m)
	case *endTick:
		if c.ending != nil {
			c.j.log.Warn("workers did not acknowledge the end of the job in time", "workers", len(c.ending))
			c.ending = nil
			c.j.sh.system.Root.Stop(c.j.self)
		}
	case *messages.HeartbeatAck:
		c.members.Heartbeat(time.Now(), m.WorkerId)
		c.report(m.WorkerId, m.Tasks)
	case *heartbeatTick:
		c.onHeartbeatTick()
	case *messages.TaskFailed:
		c.onTaskFailed(m)
	case *messages.ConfirmDeploy:
		c.onConfirmDeploy(m)
	case *actor.Terminated:
		if id, ok := c.ids[m.Who.GetAddress()]; ok && m.Who.GetId() == workerName {
			if c.ended {
				c.released(id) // it ended, after the job: never a loss
				return true
			}
			c.lose(id, "its connection broke (process ended or network lost)")
		}
	default:
		return false
	}
	return true
}

func (c *clusterCoord) onRegister(ctx actor.Context, m *messages.RegisterWorker) {
	reply := &messages.Registered{WorkerId: m.WorkerId, Job: c.j.sh.job, Fingerprint: c.j.sh.plan.Fingerprint, Topology: c.j.sh.plan.Topology(),
		Store: c.spec.Store, Coordinator: c.id, Settings: c.settings}
	to := actor.NewPID(m.Address, workerName)
	if refused := c.refusal(m); refused != "" {
		c.j.log.Error("refusing a worker", "worker", m.WorkerId, "address", m.Address, "reason", refused)
		reply.Refused = refused
		c.j.send(to, reply)
		return
	}
	w, replaced, err := c.members.Register(time.Now(), m.WorkerId, m.Address, int(m.Slots))
	if err != nil {
		reply.Refused, reply.Lost = err.Error(), errors.Is(err, membership.ErrLost)
		if reply.Lost { // a registration retried across a partition: it tries again under a new id
			c.j.log.Info("refusing a worker id declared lost", "worker", m.WorkerId, "address", m.Address)
		} else {
			c.j.log.Error("refusing a worker", "worker", m.WorkerId, "address", m.Address, "err", err)
		}
		c.j.send(to, reply)
		return
	}
	for _, old := range replaced {
		c.onLost(old)
	}
	if _, known := c.pids[w.ID]; !known {
		c.pids[w.ID], c.ids[w.Addr] = to, w.ID
		ctx.Watch(to)
		c.j.log.Info("worker joined", "worker", w.ID, "address", w.Addr, "slots", w.Slots,
			"live_workers", len(c.members.Live()), "slots_total", c.members.Slots())
		c.j.emit(Event{Kind: EventNodeJoined, Epoch: c.j.epoch, Node: w.String()})
	}
	c.j.send(to, reply)
	if p := c.pending; p != nil && c.members.Slots() >= len(c.j.sh.plan.Tasks) {
		c.pending = nil
		if p.epoch == c.j.epoch && c.j.phase == phaseRestoring {
			c.j.log.Info("a worker joined: the job's tasks have slots again", "slots", c.members.Slots(), "tasks", len(c.j.sh.plan.Tasks))
			c.deployOrWait(p.epoch, p.rp, p.assign)
		}
	}
	if !c.waiting {
		return
	}
	live, slots, tasks := len(c.members.Live()), c.members.Slots(), len(c.j.sh.plan.Tasks)
	if live < c.spec.Workers || slots < tasks {
		c.j.log.Info("waiting for workers", "workers", live, "workers_wanted", c.spec.Workers, "slots", slots, "tasks", tasks)
		return
	}
	c.waiting = false
	if err := c.deploy(c.j.epoch, c.j.restore, c.j.sh.inc.Load().assign); err != nil {
		c.j.fail(err, "could not place the tasks")
	}
}

// refusal says why the worker cannot run this job, or "".
func (c *clusterCoord) refusal(m *messages.RegisterWorker) string {
	var known []string
	for _, jf := range m.Jobs {
		if jf.Job != c.j.sh.job {
			known = append(known, jf.Job)
			continue
		}
		if jf.Fingerprint != c.j.sh.plan.Fingerprint {
			what := "" // empty for a worker that predates the topology's description
			if d := dataflow.TopologyChange(c.j.sh.plan.Topology(), jf.GetTopology(), "the coordinator", "worker "+m.WorkerId); d != "" {
				what = " (" + d + ")"
			}
			return fmt.Sprintf("job %q has topology fingerprint %s on worker %s but %s on the coordinator%s: every node must run the same binary with the same flags",
				c.j.sh.job, jf.Fingerprint, m.WorkerId, c.j.sh.plan.Fingerprint, what)
		}
		if d := c.j.sh.plan.ParamsDiff(jf.Params, "the coordinator", "worker "+m.WorkerId); d != "" {
			return fmt.Sprintf("job %q has other parameters on worker %s: %s: start every node with the same parameters",
				c.j.sh.job, m.WorkerId, d)
		}
		return ""
	}
	sort.Strings(known)
	return fmt.Sprintf("worker %s does not know job %q (it knows %s): every node must run the same binary",
		m.WorkerId, c.j.sh.job, strings.Join(known, ", "))
}

func (c *clusterCoord) armHeartbeat() {
	root, self := c.j.sh.system.Root, c.j.self
	c.hbDue = time.Now().Add(c.spec.HeartbeatInterval)
	c.hbTimer = time.AfterFunc(c.spec.HeartbeatInterval, func() { root.Send(self, &heartbeatTick{}) })
}

func (c *clusterCoord) onHeartbeatTick() {
	if c.j.phase == phaseDone {
		return
	}
	now := time.Now()
	// A tick that comes half a timeout late means that this process was
	// not running (descheduled, paused): the acks waiting in the mailbox
	// would be read after the expiry. Skip the expiry once.
	if late := now.Sub(c.hbDue); late < c.spec.HeartbeatTimeout/2 {
		for _, w := range c.members.Expired(now) {
			c.onLost(w)
		}
	} else {
		c.j.log.Warn("the coordinator's heartbeat tick came late; not expiring workers on it", "late", late.Round(time.Millisecond))
	}
	c.hbSeq++
	hb := &messages.Heartbeat{Coordinator: c.id, Seq: c.hbSeq, Epoch: c.j.epoch}
	for _, w := range c.members.Live() {
		c.j.send(c.pids[w.ID], hb)
	}
	c.armHeartbeat()
}

// lose declares worker id lost.
func (c *clusterCoord) lose(id, reason string) {
	if w, ok := c.members.Lose(id, reason); ok {
		c.onLost(w)
	}
}

// onLost fails the tasks of a worker declared lost.
func (c *clusterCoord) onLost(w membership.Worker) {
	var tasks []string
	if c.deployed == c.j.epoch {
		for _, t := range c.placed.Tasks(w.ID) {
			tasks = append(tasks, t.String())
		}
	}
	c.j.log.Error("worker lost", "worker", w.ID, "address", w.Addr, "reason", w.Reason, "tasks", tasks, "epoch", c.j.epoch)
	c.j.emit(Event{Kind: EventNodeLost, Epoch: c.j.epoch, Node: w.String(), Err: w.Err()})
	c.retire(w.ID)
	// Nothing is sent to it: a hung worker that wakes up finds the
	// heartbeats gone, drops its tasks and registers under a new id.
	if len(tasks) == 0 || (c.j.phase != phaseRunning && c.j.phase != phaseRestoring) {
		return
	}
	c.j.onFailure(&NodeLostError{Worker: w.ID, Address: w.Addr, Reason: w.Reason, Tasks: tasks})
}

// onConfirmDeploy answers a worker that asks whether the deployment it
// loaded is still current: only while its epoch is the job's, deployed
// last, and the worker is live with tasks in it. A worker declared lost
// (it was paused, and the job moved on) hears that it is not.
func (c *clusterCoord) onConfirmDeploy(m *messages.ConfirmDeploy) {
	w, known := c.members.Get(m.WorkerId)
	if !known {
		return // not one of this coordinator's workers
	}
	j := c.j
	current := !w.Lost && m.Coordinator == c.id && m.Epoch == j.epoch && c.deployed == m.Epoch &&
		(j.phase == phaseRestoring || j.phase == phaseRunning) && len(c.placed.Tasks(w.ID)) > 0
	if !current {
		j.log.Warn("a worker asked to run a deployment that is no longer current; telling it to drop it",
			"worker", w.String(), "epoch", m.Epoch, "job_epoch", j.epoch)
	}
	to := c.pids[w.ID]
	if to == nil {
		to = actor.NewPID(w.Addr, workerName)
	}
	j.send(to, &messages.DeployConfirmed{Coordinator: c.id, Epoch: m.Epoch, Current: current, Lost: w.Lost})
}

func (c *clusterCoord) onTaskFailed(m *messages.TaskFailed) {
	j := c.j
	if m.Epoch != j.epoch || (j.phase != phaseRunning && j.phase != phaseRestoring) {
		return
	}
	if !j.fromDeployed("failure", m.TaskId, m.WorkerId) {
		return
	}
	t := j.sh.plan.Task(m.TaskId)
	op := ""
	if t != nil {
		op = t.Operator
	}
	w, _ := c.members.Get(m.WorkerId)
	j.log.Error("task failed on a worker", "task", m.TaskId, "worker", w.String())
	te := &TaskError{Task: m.TaskId, Operator: op, Epoch: m.Epoch, Value: remoteError(m.Reason, m.Damage), cause: parseCause(m.Cause)}
	j.onFailure(te)
}

// deployOrWait deploys epoch, or, when the live workers offer too few
// slots, waits for a worker to join for what remains of the slot timeout,
// counted from when a failover first found them short: the wait spends
// nothing of the restart policy. The job fails when the time is up.
func (c *clusterCoord) deployOrWait(epoch uint64, rp *snapshots.Restorable, assign *dataflow.Restore) {
	need, have := len(c.j.sh.plan.Tasks), c.members.Slots()
	if have >= need {
		c.short, c.pending = time.Time{}, nil
		if err := c.deploy(epoch, rp, assign); err != nil {
			c.j.onFailure(err)
		}
		return
	}
	now := time.Now()
	if c.short.IsZero() {
		c.short = now
	}
	left := c.spec.SlotTimeout - now.Sub(c.short)
	if left <= 0 {
		c.pending = nil
		c.j.fail(fmt.Errorf("actors: epoch %d: %w: the %d live workers offer %d slots for %d tasks, and no worker joined within %v (Coordinator.SlotTimeout)",
			epoch, membership.ErrNotEnoughSlots, len(c.members.Live()), have, need, c.spec.SlotTimeout), "too few slots")
		return
	}
	if c.pending == nil || c.pending.epoch != epoch {
		c.j.log.Warn("too few slots for the job's tasks after losing workers: waiting for a worker to join",
			"epoch", epoch, "slots", have, "tasks", need, "live_workers", len(c.members.Live()), "wait_left", left.Round(time.Second))
		root, self := c.j.sh.system.Root, c.j.self
		time.AfterFunc(left, func() { root.Send(self, &slotTimeout{epoch: epoch}) })
	}
	c.pending = &pendingDeploy{epoch: epoch, rp: rp, assign: assign}
}

// onSlotTimeout ends a wait for slots that no worker ended.
func (c *clusterCoord) onSlotTimeout(m *slotTimeout) {
	if p := c.pending; p != nil && p.epoch == m.epoch && m.epoch == c.j.epoch && c.j.phase == phaseRestoring {
		c.deployOrWait(p.epoch, p.rp, p.assign)
	}
}

// deploy places the tasks of epoch on the live workers and tells every
// worker to start its part, restoring rp (nil: empty state).
func (c *clusterCoord) deploy(epoch uint64, rp *snapshots.Restorable, assign *dataflow.Restore) error {
	j := c.j
	live := c.members.Live()
	refs := make([]membership.TaskRef, len(j.sh.plan.Tasks))
	for i, t := range j.sh.plan.Tasks {
		refs[i] = membership.TaskRef{Index: i, Operator: t.Operator, Subtask: t.Subtask}
	}
	placed, err := membership.Place(refs, live)
	if err != nil {
		return fmt.Errorf("actors: epoch %d: %w", epoch, err)
	}
	c.deployed, c.placed = epoch, placed
	var states map[string]*messages.StateHandle
	var id uint64
	if rp != nil {
		id = rp.Manifest.GetCheckpointId()
		states = map[string]*messages.StateHandle{}
		for _, e := range rp.Manifest.GetTasks() {
			states[e.TaskId] = e.State
		}
	}
	pids := make([]*actor.PID, len(j.sh.plan.Tasks))
	d := &messages.Deploy{Coordinator: c.id, Epoch: epoch, CheckpointId: id}
	for i, t := range j.sh.plan.Tasks {
		w, _ := placed.Worker(i)
		pids[i] = taskPID(w.Addr, c.id, epoch, t.ID)
		dt := &messages.DeployTask{Task: uint32(i), WorkerAddress: w.Addr}
		if assign != nil {
			tr := assign.Task(i)
			if tr.Rescaled {
				dt.Rescaled, dt.Splits, dt.HasSplits, dt.EventTime, dt.Watermark = true, tr.Splits, tr.HasSplits, tr.EventTime, tr.Watermark
				for _, p := range tr.Parts {
					dt.Parts = append(dt.Parts, states[p])
				}
			} else if len(tr.Parts) == 1 {
				dt.State = states[tr.Parts[0]]
			}
			dt.InFlightRemapped = assign.InFlightRemapped()
		}
		d.Tasks = append(d.Tasks, dt)
	}
	j.sh.pids = pids
	j.log.Info("placing the tasks", "epoch", epoch, "checkpoint", id, "placement", placed.String())
	j.emit(Event{Kind: EventPlaced, Epoch: epoch, Checkpoint: id, Placement: placed.String()})
	for _, w := range live {
		j.send(c.pids[w.ID], withInFlight(d, assign, placed, w.ID))
	}
	return nil
}

// withInFlight returns d for worker id: with the channel state that each of
// its tasks replays when assign remapped the checkpoint's (to a changed
// topology or parallelism), and d itself otherwise.
func withInFlight(d *messages.Deploy, assign *dataflow.Restore, placed membership.Placement, id string) *messages.Deploy {
	if assign == nil || !assign.InFlightRemapped() {
		return d
	}
	dw := &messages.Deploy{Coordinator: d.Coordinator, Epoch: d.Epoch, CheckpointId: d.CheckpointId, Tasks: slices.Clone(d.Tasks)}
	for i, dt := range dw.Tasks {
		items := assign.Task(i).InFlight
		if w, _ := placed.Worker(i); w.ID != id || len(items) == 0 {
			continue
		}
		c := proto.Clone(dt).(*messages.DeployTask)
		c.InFlight = items
		dw.Tasks[i] = c
	}
	return dw
}

// end tells every live worker that the job has ended (err nil: finished)
// and stops the job actor once each has acknowledged or closed its
// connection, or after a heartbeat timeout: no worker is left running
// tasks of an ended job.
func (c *clusterCoord) end(err error) {
	if c.hbTimer != nil {
		c.hbTimer.Stop()
	}
	reason := "finished"
	if err != nil {
		reason = err.Error()
	}
	// A coordinator superseded by a takeover ends, but the job goes on
	// under the new holder: its workers did nothing wrong.
	var failed *JobError
	done := &messages.JobDone{Coordinator: c.id, Reason: reason, Failed: errors.As(err, &failed) && !errors.Is(err, snapshots.ErrLeaseLost)}
	c.ending, c.ended = map[string]bool{}, true
	for _, w := range c.members.Live() {
		c.ending[w.ID] = true
		c.j.send(c.pids[w.ID], done)
	}
	if len(c.ending) == 0 {
		c.ending = nil
		c.j.sh.system.Root.Stop(c.j.self)
		return
	}
	root, self := c.j.sh.system.Root, c.j.self
	time.AfterFunc(c.spec.HeartbeatTimeout, func() { root.Send(self, &endTick{}) })
}

// released notes that worker id has let go of the ended job.
func (c *clusterCoord) released(id string) {
	if c.ending == nil || !c.ending[id] {
		return
	}
	delete(c.ending, id)
	if len(c.ending) == 0 {
		c.ending = nil
		c.j.sh.system.Root.Stop(c.j.self)
	}
}

// workerError is an error a worker reported, as its text, wrapping the
// sentinel of the damage it found (see TaskFailed.Damage) so that the
// coordinator treats it as a restore in one process would.
type workerError struct {
	msg    string
	damage error
}

func (e *workerError) Error() string { return e.msg }
func (e *workerError) Unwrap() error { return e.damage }

func remoteError(reason, damage string) error {
	switch damage {
	case "corrupt":
		return &workerError{reason, snapshots.ErrCorrupt}
	case "not-found":
		return &workerError{reason, snapshots.ErrNotFound}
	}
	return errors.New(reason)
}

// fromDeployed reports whether a message of the current epoch about task
// (an acknowledgement, a decline, a failure, an end) comes from where the
// task runs: in cluster mode, the worker
// the coordinator deployed it on. Any other is dropped, counted and logged.
func (j *jobActor) fromDeployed(what, task, worker string) bool {
	if j.cl == nil {
		return true
	}
	c := j.cl
	if t := j.sh.plan.Task(task); t != nil && c.deployed == j.epoch {
		if w, ok := c.placed.Worker(t.Index); ok && w.ID == worker && worker != "" {
			return true
		}
	}
	// Logged at the first drop and at every tenfold count: a flood must not
	// flood the log.
	if n := misdirected.Add(1); n&(n-1) == 0 || n%1000 == 0 {
		j.log.Warn("dropping a task's "+what+" that does not come from the worker running it",
			"task", task, "worker", worker, "epoch", j.epoch, "dropped_so_far", n)
	}
	return false
}

// misdirected counts the checkpoint messages dropped by fromDeployed.
var misdirected atomic.Uint64

// finishedFrom reports whether m, a task's end of input, comes from where
// the task runs (always in one process): a task marked finished by another
// node could end the job before its input has.
func (j *jobActor) finishedFrom(m *messages.TaskFinished) bool {
	return j.taskFrom("end of input", m.Task, m.WorkerId)
}

// taskFrom reports whether a message about the task of index task comes
// from the worker running it (always in one process); what names the
// message in the warning fromDeployed logs.
func (j *jobActor) taskFrom(what string, task uint32, worker string) bool {
	if j.cl == nil {
		return true
	}
	if int(task) >= len(j.sh.plan.Tasks) {
		return false
	}
	return j.fromDeployed(what, j.sh.plan.Tasks[task].ID, worker)
}
