package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/snapflow/snapflow/internal/diskstate"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/actors/linkwatch"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// Worker configures a worker process of a cluster: see ServeWorker.
type Worker struct {
	// Join is the coordinator's address, host:port.
	Join string
	// Listen is the worker's own address (default "127.0.0.1:0": loopback,
	// a free port).
	Listen string
	// Slots is how many tasks the worker runs at most (default 4).
	Slots int
	// Jobs are the jobs this worker can run, by the name of their graph.
	// The coordinator checks that its job is among them with the same
	// topology fingerprint: run the same binary on every node.
	Jobs []func() *topology.Graph
	// TLS, when set, makes the connections to other nodes mutual TLS.
	// A Listen host off loopback needs it (see AllowPlaintext).
	TLS *TLS
	// Secret is the cluster's secret (see Coordinator.Secret); default: the
	// environment variable SNAPFLOW_CLUSTER_SECRET.
	Secret string
	// AllowPlaintext lets Listen be off loopback without TLS (see
	// Coordinator.AllowPlaintext).
	AllowPlaintext bool
	// RegisterTimeout bounds how long the worker tries to register with
	// the coordinator, at start and again after losing it (default 30s).
	RegisterTimeout time.Duration
	// Logger receives the worker's logs (default: discarded).
	Logger *slog.Logger
	// Listening, when set, is called with the worker's address once it
	// listens.
	Listening func(addr string)
	// Faults injects failures into the worker's tasks, for tests and
	// soaks (see Faults); nil in production.
	Faults *Faults
}

// Defaults of a worker.
const (
	DefaultSlots           = 4
	DefaultRegisterTimeout = 30 * time.Second
	registerRetry          = 250 * time.Millisecond
)

// ErrRegister is wrapped by ServeWorker's error when the worker could not
// register: the coordinator is unreachable or refused it.
var ErrRegister = errors.New("actors: worker registration")

// ServeWorker runs a worker: it registers with the coordinator at w.Join,
// runs the tasks the coordinator places on it and returns nil when the
// coordinator says the job has ended (finished or stopped), an error
// wrapping ErrJobFailed when it says the job failed (not when a takeover
// superseded the coordinator: the job goes on under the new one). It returns ctx's cause when ctx ends,
// and an error wrapping ErrRegister when the coordinator cannot be reached
// within w.RegisterTimeout or refuses the worker (another binary, another
// job). A worker that loses its coordinator drops its tasks and registers
// again, so that a restarted coordinator finds it.
func ServeWorker(ctx context.Context, w Worker) error {
	if w.Listen == "" {
		w.Listen = DefaultListen
	}
	if w.Slots == 0 {
		w.Slots = DefaultSlots
	}
	if w.Slots < 0 {
		return fmt.Errorf("cluster: Worker.Slots %d: must be at least 1", w.Slots)
	}
	if w.RegisterTimeout <= 0 {
		w.RegisterTimeout = DefaultRegisterTimeout
	}
	if w.Logger == nil {
		w.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if _, _, err := splitHostPort("Worker.Join", w.Join); err != nil {
		return err
	}
	secret, err := nodeauth.Secret("cluster: Worker.Secret", w.Secret, os.Getenv)
	if err != nil {
		return err
	}
	jobs := map[string]*dataflow.Plan{}
	var offered []*messages.JobFingerprint
	for i, mk := range w.Jobs {
		g := mk()
		if g == nil {
			return fmt.Errorf("cluster: Worker.Jobs[%d] returned a nil graph", i)
		}
		p, err := dataflow.NewPlan(g)
		if err != nil {
			return fmt.Errorf("cluster: Worker.Jobs[%d]: %w", i, err)
		}
		if _, dup := jobs[p.Job]; dup {
			return fmt.Errorf("cluster: Worker.Jobs: job %q twice", p.Job)
		}
		jobs[p.Job] = p
		offered = append(offered, &messages.JobFingerprint{Job: p.Job, Fingerprint: p.Fingerprint, Params: p.Params, Topology: p.Topology()})
	}
	if len(jobs) == 0 {
		return errors.New("cluster: Worker.Jobs is empty: the worker must know the coordinator's job")
	}
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoactorLogger(w.Logger) }),
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond),
	)
	n, err := startNode(system, nodeSpec{option: "Worker.Listen", listen: w.Listen, tls: w.TLS, secret: secret,
		allowPlaintext: w.AllowPlaintext, allowOption: "Worker.AllowPlaintext", log: w.Logger})
	if err != nil {
		system.Shutdown()
		return err
	}
	id := newNodeID("w")
	log := w.Logger.With("address", n.addr)
	log.Info("worker listening", "worker", id, "join", w.Join, "slots", w.Slots)
	if w.Listening != nil {
		w.Listening(n.addr)
	}
	h := &workerHost{
		cfg: &w, id: id, log: log, system: system, jobs: jobs, offered: offered,
		coordPID: actor.NewPID(w.Join, coordinatorName), done: make(chan error, 1),
	}
	stopIt := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return h }, actor.WithGuardian(stopIt)), workerName)
	if err != nil {
		n.shutdown()
		system.Shutdown()
		return fmt.Errorf("actors: worker: spawn: %w", err)
	}
	var result error
	select {
	case result = <-h.done:
	case <-ctx.Done():
		result = context.Cause(ctx)
	}
	_ = system.Root.PoisonFuture(pid).Wait()
	h.uploads.Wait()
	n.shutdown()
	system.Shutdown()
	if h.store != nil {
		h.store.Close()
	}
	log.Info("worker stopped", "result", result)
	return result
}

// workerHost is a worker's host actor: it registers with the coordinator,
// answers its heartbeats, and spawns and supervises the tasks placed on it.
type workerHost struct {
	cfg      *Worker
	id       string
	log      *slog.Logger
	system   *actor.ActorSystem
	self     *actor.PID
	jobs     map[string]*dataflow.Plan
	offered  []*messages.JobFingerprint
	coordPID *actor.PID
	done     chan error

	// registered is the coordinator's answer; nil while registering.
	registered *messages.Registered
	// coordinator is the id of the coordinator registered with last; it
	// may still end the job after the worker has noticed it gone.
	coordinator string
	finished    bool      // the coordinator ended the job
	regSince    time.Time // when the current registration attempts began
	attempt     uint64
	lastHeard   time.Time // the coordinator's last heartbeat
	coordEpoch  uint64    // the coordinator's epoch, from its heartbeats (see abandoned)
	plan        *dataflow.Plan
	// counters are the task counters since the worker registered under
	// its id, shared by every deployment (see Job.TaskMetrics).
	counters []taskCounters
	store    snapshots.Store
	storeURL string
	cps      *snapshots.Checkpoints
	runtime  config

	dep *shared // the tasks' shared state of the deployment running
	// confirming is the deployment whose states are loaded, waiting for
	// the coordinator to confirm that it is still the newest (see
	// onLoaded).
	confirming *deployLoaded
	tasks      map[string]*actor.PID
	timer      *time.Timer
	tickDue    time.Time
	tickGen    uint64

	// uploads tracks the state loads and uploads of every deployment, so
	// that ServeWorker leaves none behind.
	uploads sync.WaitGroup
}

// workerTick is the worker's timer; gen tells a tick of a stopped timer
// (already queued when it was stopped) from the current one.
type workerTick struct{ gen uint64 }

// deployLoaded carries the states loaded for a deployment.
type deployLoaded struct {
	dep    *shared
	deploy *messages.Deploy
	states map[string]*messages.TaskState
	task   string // the task whose state failed to load, with err
	err    error
}

func (h *workerHost) Receive(ctx actor.Context) {
	defer func() {
		if r := recover(); r != nil {
			h.end(fmt.Errorf("actors: worker %s: internal error: %v\n%s", h.id, r, debug.Stack()))
		}
	}()
	switch m := ctx.Message().(type) {
	case *actor.Started:
		h.self = ctx.Self()
		h.startRegistering()
	case *workerTick:
		if m.gen != h.tickGen {
			return
		}
		h.onTick(ctx)
	case *messages.Registered:
		h.onRegistered(ctx, m)
	case *messages.Heartbeat:
		if h.registered != nil && m.Coordinator == h.registered.Coordinator {
			h.lastHeard, h.coordEpoch = time.Now(), max(h.coordEpoch, m.Epoch)
			h.system.Root.Send(h.coordPID, &messages.HeartbeatAck{WorkerId: h.id, Seq: m.Seq, Tasks: reportCounters(h.counters)})
		}
	case *messages.Deploy:
		h.onDeploy(ctx, m)
	case *deployLoaded:
		h.onLoaded(ctx, m)
	case *messages.DeployConfirmed:
		h.onConfirmed(ctx, m)
	case *messages.JobDone:
		// The coordinator may have been noticed gone (its connection
		// closes as it ends) before its JobDone is read.
		if m.Coordinator != "" && m.Coordinator == h.coordinator && !h.finished {
			h.finished = true
			h.log.Info("the coordinator ended the job", "reason", m.Reason)
			h.stopDeployment(ctx)
			h.system.Root.Send(h.coordPID, &messages.JobDoneAck{WorkerId: h.id})
			if m.Failed {
				h.end(fmt.Errorf("%w: %s", ErrJobFailed, m.Reason))
				return
			}
			h.end(nil)
		}
	case *actor.Terminated:
		if m.Who.GetId() == coordinatorName && h.registered != nil && !h.finished {
			h.lostCoordinator(ctx, "its connection broke")
		}
	case *actor.Stopping:
		h.stopDeployment(ctx)
		if h.timer != nil {
			h.timer.Stop()
		}
	case *actor.Stopped:
		// ServeWorker stops it after taking its result; any other stop
		// (a Stop or PoisonPill message) ends ServeWorker with an error.
		h.end(fmt.Errorf("%w: the host actor of worker %s was stopped", ErrActorStopped, h.id))
	case *actor.Restarting:
	default:
		h.log.Warn("worker dropping a message of unknown type", "type", fmt.Sprintf("%T", m))
	}
}

// end makes ServeWorker return err.
func (h *workerHost) end(err error) {
	select {
	case h.done <- err:
	default:
	}
}

// startRegistering registers under a new worker id: a coordinator that
// declared the previous incarnation lost refuses its id for good.
func (h *workerHost) startRegistering() {
	if h.registered != nil || h.attempt > 0 {
		h.id = newNodeID("w")
		h.log.Info("registering under a new worker id", "worker", h.id)
	}
	h.registered, h.regSince, h.attempt = nil, time.Now(), 0
	h.register()
}

func (h *workerHost) register() {
	h.attempt++
	h.system.Root.Send(h.coordPID, &messages.RegisterWorker{WorkerId: h.id, Address: h.system.Address(),
		Slots: uint32(h.cfg.Slots), Jobs: h.offered, Attempt: h.attempt})
	h.arm(registerRetry)
}

func (h *workerHost) arm(d time.Duration) {
	root, self := h.system.Root, h.self
	h.tickDue = time.Now().Add(d)
	if h.timer != nil {
		h.timer.Stop()
	}
	h.tickGen++
	tick := &workerTick{gen: h.tickGen}
	h.timer = time.AfterFunc(d, func() { root.Send(self, tick) })
}

func (h *workerHost) onTick(ctx actor.Context) {
	if h.finished {
		return
	}
	if h.registered == nil {
		if since := time.Since(h.regSince); since > h.cfg.RegisterTimeout {
			why := "is it running, and do both sides have the same secret and TLS settings? (a warning says why a connection was refused)"
			_, client, err := h.cfg.TLS.configs()
			if err == nil {
				if d := nodeauth.ProbeTLS(h.cfg.Join, client, time.Second); d != "" {
					why = "the connection is refused at TLS: " + d
				}
			}
			h.end(fmt.Errorf("%w: no answer from the coordinator at %s within %v (%d attempts): %s",
				ErrRegister, h.cfg.Join, h.cfg.RegisterTimeout, h.attempt, why))
			return
		}
		h.register()
		return
	}
	timeout := time.Duration(h.registered.GetSettings().GetHeartbeatTimeoutNanos())
	interval := time.Duration(h.registered.GetSettings().GetHeartbeatIntervalNanos())
	if late := time.Since(h.tickDue); late >= timeout/2 {
		// This process was not running (descheduled, paused): heartbeats
		// may wait in the mailbox, so their silence proves nothing yet. But
		// the coordinator may have replaced the deployment meanwhile: ask
		// it, and drop the tasks if it has (see onConfirmed).
		h.log.Warn("the worker's tick came late; asking the coordinator whether its deployment is still current", "late", late.Round(time.Millisecond))
		if h.dep != nil {
			h.confirm(h.dep.inc.Load().epoch)
		}
	} else if silent := time.Since(h.lastHeard); silent > timeout {
		h.lostCoordinator(ctx, fmt.Sprintf("no heartbeat for %v", silent.Round(time.Millisecond)))
		return
	} else if p := h.confirming; p != nil {
		// The question or its answer may have been lost with a broken
		// stream: ask again until the coordinator answers.
		h.confirm(p.deploy.Epoch)
	}
	h.arm(interval)
}

// lostCoordinator drops the tasks and registers again.
func (h *workerHost) lostCoordinator(ctx actor.Context, reason string) {
	h.log.Warn("lost the coordinator; dropping the tasks and registering again", "coordinator", h.registered.Coordinator, "reason", reason)
	ctx.Unwatch(h.coordPID)
	h.stopDeployment(ctx)
	if h.timer != nil {
		h.timer.Stop()
	}
	h.startRegistering()
}

func (h *workerHost) onRegistered(ctx actor.Context, m *messages.Registered) {
	if m.WorkerId != h.id || h.registered != nil {
		return
	}
	if m.Refused != "" && m.Lost {
		// A registration of an id the coordinator has since declared lost
		// (it was retried across a partition): register under a new id.
		h.log.Info("the coordinator declared this worker id lost", "worker", h.id)
		h.startRegistering()
		return
	}
	if m.Refused != "" {
		h.end(fmt.Errorf("%w: the coordinator at %s refused worker %s: %s", ErrRegister, h.cfg.Join, h.id, m.Refused))
		return
	}
	plan := h.jobs[m.Job]
	switch {
	case plan == nil:
		h.end(fmt.Errorf("%w: the coordinator runs job %q, which this worker does not know", ErrRegister, m.Job))
		return
	case plan.Fingerprint != m.Fingerprint:
		what := "" // empty for a coordinator that predates the topology's description
		if d := dataflow.TopologyChange(m.GetTopology(), plan.Topology(), "the coordinator", "this worker"); d != "" {
			what = " (" + d + ")"
		}
		h.end(fmt.Errorf("%w: job %q has topology fingerprint %s here but %s on the coordinator%s: run the same binary with the same flags on every node",
			ErrRegister, m.Job, plan.Fingerprint, m.Fingerprint, what))
		return
	}
	if err := h.openStore(m); err != nil {
		h.end(fmt.Errorf("%w: %w", ErrRegister, err))
		return
	}
	h.registered, h.coordinator, h.plan, h.lastHeard, h.coordEpoch = m, m.Coordinator, plan, time.Now(), 0
	// Counted afresh under this id: the coordinator keeps what the worker
	// reported under its previous one.
	h.counters = newCounters(len(plan.Tasks))
	h.runtime = workerRuntime(m.Settings, h.cfg.Logger, h.store)
	h.runtime.faults = h.cfg.Faults
	ctx.Watch(h.coordPID)
	h.log.Info("registered with the coordinator", "worker", h.id, "coordinator", m.Coordinator, "job", m.Job, "store", h.store.String())
	if h.timer != nil {
		h.timer.Stop()
	}
	h.arm(time.Duration(m.GetSettings().GetHeartbeatIntervalNanos()))
}

// openStore opens the job's store, once per URL.
func (h *workerHost) openStore(m *messages.Registered) error {
	if h.store != nil && h.storeURL == m.Store {
		h.cps = snapshots.NewCheckpoints(h.store, m.Job, h.log)
		return nil
	}
	if h.store != nil { // a new coordinator with another store
		h.uploads.Wait() // the old tasks' uploads, cancelled, end first
		h.store.Close()
		h.store = nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := snapshots.Open(ctx, m.Store)
	if err != nil {
		return fmt.Errorf("open the job's store: %w", err)
	}
	h.store, h.storeURL = s, m.Store
	h.cps = snapshots.NewCheckpoints(s, m.Job, h.log)
	return nil
}

// workerRuntime is the configuration of the tasks, from the coordinator's.
func workerRuntime(s *messages.RuntimeSettings, log *slog.Logger, store snapshots.Store) config {
	c := defaultConfig()
	c.batchSize, c.batchBytes, c.credits = int(s.GetBatchSize()), int(s.GetBatchBytes()), int(s.GetCredits())
	c.linger = time.Duration(s.GetLingerNanos())
	c.checkpoint.Timeout = time.Duration(s.GetCheckpointTimeoutNanos())
	c.syncSnapshots = s.GetSynchronousSnapshots()
	if c.atLeastOnce = s.GetAtLeastOnce(); c.atLeastOnce {
		c.mode = AtLeastOnce
	}
	if c.unaligned = s.GetUnaligned() && !c.atLeastOnce && !c.syncSnapshots; c.unaligned {
		c.mode = Unaligned
	}
	if d := time.Duration(s.GetAlignTimeoutNanos()); d > 0 && c.mode == Aligned && !c.syncSnapshots {
		c.alignTimeout = d
	}
	c.incremental, c.rewriteEvery = s.GetIncremental(), int(s.GetRewriteEvery())
	c.inline, c.inlineSet = int(s.GetInlineLimit()), true
	if s.GetDiskState() {
		c.diskState = &diskstate.Config{CacheBytes: s.GetDiskCacheBytes(), MemTableBytes: s.GetDiskMemtableBytes(), NoLocalRecovery: s.GetDiskNoLocalRecovery()}
	}
	c.logger, c.store = log, store
	c.linkInterval = time.Duration(s.GetHeartbeatIntervalNanos())
	c.linkTimeout = linkwatch.Timeout(c.linkInterval, time.Duration(s.GetHeartbeatTimeoutNanos()))
	return c
}

func (h *workerHost) onDeploy(ctx actor.Context, m *messages.Deploy) {
	if h.registered == nil || m.Coordinator != h.registered.Coordinator {
		return
	}
	if h.dep != nil && m.Epoch <= h.dep.inc.Load().epoch {
		return
	}
	h.stopDeployment(ctx)
	cfg := h.runtime
	h.cps.SetInlineLimit(cfg.inline)
	uctx, cancel := context.WithCancel(context.Background())
	rctx, stopRun := context.WithCancel(uctx)
	sh := &shared{job: h.plan.Job, plan: h.plan, cfg: &cfg, log: h.log.With("job", h.plan.Job), system: h.system, cps: h.cps,
		uploadCtx: uctx, cancelUpload: cancel, runCtx: rctx, stopRun: stopRun, jobPID: h.coordPID, uploads: &h.uploads, counters: h.counters,
		worker: h.id}
	sh.pids, sh.arrivals = make([]*actor.PID, len(h.plan.Tasks)), make([]*arrivals, len(h.plan.Tasks))
	var mine []*messages.DeployTask
	for _, dt := range m.Tasks {
		if int(dt.Task) >= len(h.plan.Tasks) {
			h.log.Error("deploy names an unknown task; ignoring it", "task", dt.Task)
			return
		}
		t := h.plan.Tasks[dt.Task]
		sh.pids[dt.Task] = taskPID(dt.WorkerAddress, m.Coordinator, m.Epoch, t.ID)
		if dt.WorkerAddress == h.system.Address() {
			mine = append(mine, dt)
		}
	}
	sh.inc.Store(sh.newIncarnation(m.Epoch, nil, nil))
	h.dep = sh
	if len(mine) == 0 {
		h.log.Info("no task placed here in this epoch", "epoch", m.Epoch)
		return
	}
	// Load the states off the actor: reading the store may take a while.
	root, self, inc := h.system.Root, h.self, sh.inc.Load()
	sh.goUploadCtx(inc.ctx, func(ctx context.Context) {
		read := sh.cps.BytesRead()
		states, task, err := loadDeployed(ctx, sh.cps, h.plan, mine)
		if err == nil && m.CheckpointId > 0 {
			var size uint64
			for _, dt := range mine {
				size += handleSize(dt.State)
				for _, p := range dt.Parts {
					size += handleSize(p)
				}
			}
			// Other reads of the store (the lease's) may add a little.
			h.log.Info("loaded the state of the tasks placed here", "epoch", m.Epoch, "checkpoint", m.CheckpointId,
				"read_bytes", sh.cps.BytesRead()-read, "handles_bytes", size)
		}
		root.Send(self, &deployLoaded{dep: sh, deploy: m, states: states, task: task, err: err})
	})
}

func (h *workerHost) onLoaded(ctx actor.Context, m *deployLoaded) {
	if m.dep != h.dep {
		return // superseded
	}
	epoch := m.deploy.Epoch
	if m.err != nil {
		h.log.Error("could not load the tasks' state", "epoch", epoch, "err", m.err)
		h.system.Root.Send(h.coordPID, &messages.TaskFailed{WorkerId: h.id, Epoch: epoch, TaskId: m.task, Reason: m.err.Error(), Cause: string(CauseRestore),
			Damage: damageOf(m.err)})
		return
	}
	// A worker paused (SIGSTOP, a frozen VM) may read a Deploy that the
	// coordinator has replaced since: its tasks must not touch the store or
	// a sink. They start only once the coordinator confirms the epoch.
	h.confirming = m
	h.confirm(epoch)
}

// confirm asks the coordinator whether epoch is still the one it runs,
// with this worker live in it.
func (h *workerHost) confirm(epoch uint64) {
	h.system.Root.Send(h.coordPID, &messages.ConfirmDeploy{WorkerId: h.id, Coordinator: h.coordinator, Epoch: epoch})
}

// onConfirmed starts the tasks of the deployment waiting for the answer
// when it is current, and drops the deployment when it is not.
func (h *workerHost) onConfirmed(ctx actor.Context, m *messages.DeployConfirmed) {
	if h.dep == nil || m.Coordinator != h.coordinator || m.Epoch != h.dep.inc.Load().epoch {
		return // an answer about a deployment already replaced here
	}
	switch {
	case m.Lost: // it registers again at once, rather than after a heartbeat timeout
		h.log.Warn("the coordinator has replaced this deployment; dropping its tasks", "epoch", m.Epoch)
		h.lostCoordinator(ctx, "it declared this worker lost")
		return
	case !m.Current:
		h.log.Warn("the coordinator has replaced this deployment; dropping its tasks", "epoch", m.Epoch)
		h.stopDeployment(ctx)
		return
	}
	if p := h.confirming; p != nil && p.dep == h.dep {
		h.confirming = nil
		h.startTasks(ctx, p)
	}
}

// startTasks spawns the tasks of deployment m placed on this worker.
func (h *workerHost) startTasks(ctx actor.Context, m *deployLoaded) {
	epoch := m.deploy.Epoch
	inc := m.dep.inc.Load()
	if len(m.states) > 0 {
		inc.restore = &snapshots.Restorable{Manifest: &messages.Manifest{Job: h.plan.Job, CheckpointId: m.deploy.CheckpointId}, States: m.states}
		inc.disk = deployedDisk(h.plan, m.deploy.Tasks)
	}
	h.tasks = map[string]*actor.PID{}
	var placed []string
	for _, dt := range m.deploy.Tasks {
		if dt.WorkerAddress != h.system.Address() {
			continue
		}
		idx, t := int(dt.Task), h.plan.Tasks[dt.Task]
		sh := m.dep
		arr := newArrivals(epoch, len(t.Inputs))
		sh.arrivals[idx] = arr
		pid, err := ctx.SpawnNamed(taskProps(sh, idx, arr),
			taskActorName(m.deploy.Coordinator, epoch, t.ID))
		if err != nil {
			h.system.Root.Send(h.coordPID, &messages.TaskFailed{WorkerId: h.id, Epoch: epoch, TaskId: t.ID, Reason: "spawn: " + err.Error(), Cause: string(CauseOther)})
			continue
		}
		h.tasks[t.ID] = pid
		placed = append(placed, t.ID)
	}
	sort.Strings(placed)
	h.log.Info("running tasks", "epoch", epoch, "checkpoint", m.deploy.CheckpointId, "tasks", placed)
}

// stopDeployment stops the tasks of the deployment running, if any.
func (h *workerHost) stopDeployment(ctx actor.Context) {
	if h.dep == nil {
		return
	}
	h.dep.inc.Load().cancel()
	for _, pid := range h.tasks {
		ctx.Stop(pid)
	}
	h.dep.stopRun()
	h.dep, h.tasks, h.confirming = nil, nil, nil
}

// HandleFailure reports a failed task to the coordinator, which rolls the
// job back; the task is stopped meanwhile.
func (h *workerHost) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason any, _ any) {
	te, ok := reason.(*TaskError)
	if !ok {
		te = &TaskError{Task: child.GetId(), Value: reason, cause: CausePanic}
	}
	attrs := []any{"task", te.Task, "epoch", te.Epoch, "err", te.Value}
	if len(te.Stack) > 0 { // a panic's
		attrs = append(attrs, "stack", string(te.Stack))
	}
	sup.StopChildren(child)
	if now := h.abandoned(te.Epoch); now != "" {
		// The coordinator has rolled back (or ended the job) since: this
		// failure is an echo of the abandoned epoch, not a new one.
		h.log.Warn("task of an abandoned epoch failed; not reported, the job has rolled back", append(attrs, "now", now)...)
		return
	}
	h.log.Error("task failed", attrs...)
	err, _ := te.Value.(error)
	h.system.Root.Send(h.coordPID, &messages.TaskFailed{WorkerId: h.id, Epoch: te.Epoch, TaskId: te.Task, Reason: fmt.Sprint(te.Value),
		Cause: string(failureCause(te)), Damage: damageOf(err)})
}

// abandoned says, when epoch is not the epoch this worker runs for the
// coordinator, what is instead ("epoch 3", "no deployment"); "" when it is.
// The coordinator's epoch, learnt from its heartbeats, moves on at a
// rollback before the next deployment arrives.
func (h *workerHost) abandoned(epoch uint64) string {
	switch {
	case h.dep == nil:
		return "no deployment"
	case epoch != h.dep.inc.Load().epoch:
		return fmt.Sprintf("epoch %d", h.dep.inc.Load().epoch)
	case epoch < h.coordEpoch:
		return fmt.Sprintf("epoch %d on the coordinator", h.coordEpoch)
	}
	return ""
}

// loadDeployed reads the states of the tasks placed on this worker: each
// task's own stored state, or, for a task whose state is redistributed from
// another parallelism, the key groups of its range from the stored states
// that held them (through their key-group index, only those bytes),
// merged with its splits.
func loadDeployed(ctx context.Context, cps *snapshots.Checkpoints, plan *dataflow.Plan, mine []*messages.DeployTask) (_ map[string]*messages.TaskState, task string, _ error) {
	states := map[string]*messages.TaskState{}
	for _, dt := range mine {
		t := plan.Tasks[dt.Task]
		switch {
		case dt.Rescaled:
			part := &messages.TaskState{}
			for _, h := range dt.Parts {
				groups, _, err := cps.ReadKeyGroups(ctx, h, t.KeyGroupStart, t.KeyGroupEnd)
				if err != nil {
					return nil, t.ID, fmt.Errorf("load the key groups of task %s: %w", t.ID, err)
				}
				part.KeyGroups = append(part.KeyGroups, groups...)
			}
			// The part carries no state descriptors: the coordinator has
			// checked them against the job's declarations (PlanRestore), and
			// the task records its own in its next snapshot.
			tr := dataflow.TaskRestore{Rescaled: true, Splits: dt.Splits, HasSplits: dt.HasSplits, EventTime: dt.EventTime, Watermark: dt.Watermark}
			states[t.ID] = dataflow.MergeState(t, tr, []*messages.TaskState{part})
		case dt.State != nil:
			st, err := cps.ReadTaskState(ctx, dt.State)
			if err != nil {
				return nil, t.ID, fmt.Errorf("load the state of task %s: %w", t.ID, err)
			}
			states[t.ID] = st
		}
		if dt.InFlightRemapped {
			// The checkpoint's channel state, placed in this plan's
			// channels by the coordinator, replaces what the task stored.
			st := states[t.ID]
			if st == nil && len(dt.InFlight) > 0 {
				st = &messages.TaskState{TaskId: t.ID, Operator: t.Operator, OperatorId: t.OperatorID, Subtask: uint32(t.Subtask)}
				states[t.ID] = st
			}
			if st != nil {
				st.InFlight = dt.InFlight
			}
		}
	}
	return states, "", nil
}

// deployedDisk returns the database checkpoints that each deployed task
// restores its on-disk state from: its stored state's, or, rescaled, its
// parts'.
func deployedDisk(plan *dataflow.Plan, tasks []*messages.DeployTask) map[string][]*messages.DiskCheckpoint {
	out := map[string][]*messages.DiskCheckpoint{}
	for _, dt := range tasks {
		id := plan.Tasks[dt.Task].ID
		handles := dt.Parts
		if !dt.Rescaled {
			handles = []*messages.StateHandle{dt.State}
		}
		for _, h := range handles {
			if d := h.GetDisk(); d != nil {
				out[id] = append(out[id], d)
			}
		}
	}
	return out
}

// damageOf classifies an error of a restore for TaskFailed.Damage.
func damageOf(err error) string {
	switch {
	case errors.Is(err, snapshots.ErrCorrupt):
		return "corrupt"
	case errors.Is(err, snapshots.ErrNotFound):
		return "not-found"
	}
	return ""
}

// handleSize is the size of the task state h points at, inline states
// excepted (the Deploy carries them): its own object and the key-group
// sections it references in earlier ones.
func handleSize(h *messages.StateHandle) uint64 {
	if h == nil || len(h.GetInline()) > 0 {
		return 0
	}
	return snapshots.StateSize(h)
}
