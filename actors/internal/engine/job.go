package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// Job is a running topology.
type Job struct {
	sh      *shared
	system  *actor.ActorSystem
	pid     *actor.PID
	stopped chan struct{} // closed when the job actor has stopped
	done    chan struct{} // closed when everything is released
	once    sync.Once
	err     error
	// closeStore closes the store Start opened (cluster mode).
	closeStore func()
}

// Address is the coordinator's address in cluster mode (see WithCoordinator),
// where workers join; "" in one process.
func (j *Job) Address() string {
	if j.sh.node == nil {
		return ""
	}
	return j.sh.node.addr
}

// Run starts the job and waits for it to end; see Start and Wait.
func Run(ctx context.Context, g *topology.Graph, opts ...Option) error {
	j, err := Start(ctx, g, opts...)
	if err != nil {
		return err
	}
	return j.Wait()
}

// Start validates and plans g, checks the store, finds the newest complete
// checkpoint of the job (by its name) and starts the job from it, or from the
// beginning when there is none. Cancelling ctx stops the job.
//
// Start refuses, before any record flows:
//   - a checkpoint that cannot be restored exactly into g (see
//     WithAllowTopologyChange, and docs/savepoints.md);
//   - a store whose complete checkpoints of the job are all unusable (an
//     error wrapping snapshots.ErrNoUsableCheckpoint);
//   - a job that already finished (ErrAlreadyFinished): its newest
//     checkpoint is the final one. WithStartOver runs it again from the
//     beginning.
func Start(ctx context.Context, g *topology.Graph, opts ...Option) (*Job, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		return nil, err
	}
	var ownStore snapshots.Store // opened here, closed when the job ends
	if cfg.cluster != nil {
		if ownStore, err = cfg.openClusterStore(ctx, plan); err != nil {
			return nil, err
		}
	}
	closeStore := func() {
		if ownStore != nil {
			ownStore.Close()
		}
	}
	if err := cfg.finish(); err != nil {
		closeStore()
		return nil, err
	}
	if cfg.unaligned || cfg.alignTimeout > 0 {
		// Channel state is stored encoded, by each edge's codec.
		if err := plan.CheckWire(); err != nil {
			closeStore()
			return nil, fmt.Errorf("actors: job %q with unaligned checkpoints, which store in-flight records: %w", plan.Job, err)
		}
	}
	declared, err := plan.DeclaredStates()
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("actors: job %q: %w", plan.Job, err)
	}
	if err := plan.Preflight(ctx); err != nil {
		closeStore()
		return nil, fmt.Errorf("actors: job %q: %w", plan.Job, err)
	}
	log := cfg.logger.With("job", plan.Job)
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return protoactorLogger(cfg.logger) }),
		// Messages to actors that have just stopped (a linger timer firing
		// during Stop, say) are dead letters. protoactor-go logs them through
		// a throttle whose goroutine lives for one interval: keep it short so
		// that nothing outlives a stopped job for long.
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond),
	)
	var n *node
	cps := snapshots.NewCheckpoints(cfg.store, plan.Job, cfg.logger) // it adds the job to its lines
	undo := func() {
		n.shutdown()
		system.Shutdown()
		if cps.Lease() != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := cps.ReleaseLease(ctx); err != nil {
				log.Warn("releasing the job's lease failed", "err", err)
			}
			cancel()
		}
		closeStore()
	}
	var coordinator, address string
	if cfg.cluster != nil {
		// Listen first: a coordinator started by mistake on a running one's
		// address fails here, before it takes the job's lease.
		identity, err := newIdentity()
		if err != nil {
			undo()
			return nil, err
		}
		if n, err = startNode(system, nodeSpec{option: "Coordinator.Listen", listen: cfg.cluster.Listen,
			tls: cfg.cluster.TLS, secret: cfg.cluster.Secret, allowPlaintext: cfg.cluster.AllowPlaintext, allowOption: "Coordinator.AllowPlaintext", log: log,
			identity: identity, jobs: []string{plan.Job}, bindWorkers: true}); err != nil {
			undo()
			return nil, err
		}
		coordinator, address = newNodeID("c"), n.addr
		log = log.With("coordinator", coordinator)
	}
	// One job name on one store has one holder: the lease is claimed
	// before the store is read, and fences every write of a holder that
	// another has superseded (see snapshots.Checkpoints.AcquireLease).
	if err := cps.Check(ctx); err != nil { // a panic in the store is an error too
		undo()
		return nil, fmt.Errorf("actors: job %q: store %s is not usable: %w", plan.Job, cfg.store, err)
	}
	lease, err := acquireLease(ctx, &cfg, cps, coordinator, address)
	if err != nil {
		undo()
		return nil, err
	}
	r, err := resume(ctx, &cfg, plan, declared, log, cps, lease)
	if err != nil {
		undo()
		return nil, err
	}

	uctx, cancel := context.WithCancel(context.Background())
	rctx, stopRun := context.WithCancel(uctx)
	sh := &shared{job: plan.Job, plan: plan, cfg: &cfg, log: log, system: system, cps: r.cps, declared: declared,
		operators: plan.Operators(declared), origin: r.origin,
		uploadCtx: uctx, cancelUpload: cancel, runCtx: rctx, stopRun: stopRun, coordinator: coordinator, node: n,
		uploads: new(sync.WaitGroup), counters: newCounters(len(plan.Tasks)), reads: make([]atomic.Pointer[readWatch], len(plan.Tasks))}
	name := "job-" + plan.Job
	if n != nil {
		name = coordinatorName
		log.Info("coordinator listening", "address", n.addr)
	}
	sh.inc.Store(sh.newIncarnation(r.epoch, r.point, r.assign))
	_, sh.lastEpoch = snapshots.HolderEpochs(lease)
	j := &Job{sh: sh, system: system, stopped: make(chan struct{}), done: make(chan struct{})}
	ja := newJobActor(sh, j.stopped, r.maxID+1, r.point)
	ja.retainPending = r.retain
	// The job actor recovers its own panics; should one escape anyway, stop
	// it rather than let the root guardian restart it with stale state.
	stopIt := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return ja }, actor.WithGuardian(stopIt)), name)
	if err != nil {
		stopRun()
		cancel()
		undo()
		return nil, fmt.Errorf("actors: job %q: spawn: %w", plan.Job, err)
	}
	j.pid, j.closeStore = pid, closeStore
	interval := cfg.leaseRequest(plan.Job, "", "").RenewInterval
	sh.goRenew(func(ctx context.Context) {
		sh.renewLease(ctx, interval, func(err error) { system.Root.Send(pid, &leaseLostMsg{err: err}) })
	})
	go j.release(ctx, ja)
	return j, nil
}

// release waits for the job actor to stop (or ctx to end), then frees every
// resource of the job.
func (j *Job) release(ctx context.Context, ja *jobActor) {
	select {
	case <-j.stopped:
	case <-ctx.Done():
		j.system.Root.Send(j.pid, &stopRequest{cause: fmt.Errorf("%w: %w", ErrStopped, context.Cause(ctx))})
		<-j.stopped
	}
	if ja.result != nil {
		j.sh.cancelUpload() // stopped or failed: abandon uploads in flight
	}
	j.sh.uploads.Wait() // finished: let the last retention pass end
	j.sh.stopRun()
	j.sh.cancelUpload()
	j.sh.stopRenew()
	j.sh.releaseLease()
	j.sh.node.shutdown()
	j.system.Shutdown()
	if d := j.sh.cfg.diskState; d != nil { // the job has ended: its local copies go
		if err := d.RemoveLocal(j.sh.job); err != nil {
			j.sh.log.Warn("could not remove the local copies of the on-disk state", "err", err)
		}
	}
	j.closeStore()
	j.err = ja.result
	close(j.done)
}

// Wait blocks until the job has ended and returns nil when it finished (every
// source ended and the final checkpoint completed), ErrStopped after Stop or
// the cancellation of its context, or a *JobError when it failed.
func (j *Job) Wait() error {
	<-j.done
	return j.err
}

// Done is closed when the job has ended and released its resources.
func (j *Job) Done() <-chan struct{} { return j.done }

// Stop stops the job, waits until every actor and goroutine of it has ended
// and returns what Wait returns. Its checkpoints stay in the store, so
// starting the job again resumes from the newest complete one.
//
// Stop waits at most the stop timeout (WithStopTimeout, default 30s): a
// task that does not stop, such as a source blocked in Read that ignores
// the context given to Open, makes it return an error wrapping
// ErrStopTimeout that names the task. The job goes on stopping in the
// background; Wait returns its result once it has.
func (j *Job) Stop() error {
	j.once.Do(func() { j.system.Root.Send(j.pid, &stopRequest{cause: ErrStopped}) })
	timer := time.NewTimer(j.sh.cfg.stopTimeout)
	defer timer.Stop()
	select {
	case <-j.done:
		return j.err
	case <-timer.C:
	}
	return fmt.Errorf("%w: job %q did not stop within %v: %s", ErrStopTimeout, j.sh.job, j.sh.cfg.stopTimeout, j.sh.stuck())
}

// Checkpoint triggers a checkpoint now (or as soon as the one in flight ends)
// and returns its id once it is complete, or why it failed. When the job
// stops or fails while the checkpoint's manifest is being written, it
// returns the job's end (ErrStopped, say) although the manifest may land:
// the next Start then resumes from that checkpoint.
func (j *Job) Checkpoint(ctx context.Context) (uint64, error) {
	reply := make(chan checkpointResult, 1)
	j.system.Root.Send(j.pid, &checkpointRequest{reply: reply})
	return j.await(ctx, reply)
}

// Savepoint takes a savepoint called name while the job runs, and returns
// its checkpoint id once it is complete. A savepoint is an aligned
// checkpoint stored under `<job>/savepoints/<name>/` in the job's store,
// self-contained and never deleted by retention; start a job from it with
// WithSavepoint, at other parallelisms if need be. It is taken as soon as
// the checkpoint in flight, if any, ends.
//
// Savepoint refuses an invalid name, and one that a complete savepoint of
// the job already has (an error wrapping snapshots.ErrSavepointExists). A
// savepoint that fails (a task declines, an upload fails, it times out, or
// the job fails over meanwhile) leaves the job running and returns why;
// what that attempt stored is deleted. Once the sources have ended it is
// refused (the final checkpoint is the job's last). When ctx ends first,
// Savepoint returns its error, but the savepoint may still be taken.
//
// The savepoint's manifest is also written as a checkpoint's, pointing at
// the savepoint's objects, so that recovery restores it rather than an
// older checkpoint: two-phase-commit sinks then commit at the savepoint,
// and what it pre-committed is never aborted by a recovery behind it.
// Delete such a savepoint once newer checkpoints exist: while it is the
// newest, recovery falls back past it when it is gone, and a job with
// two-phase-commit sinks refuses to (snapshots.ErrFallbackRefused).
func (j *Job) Savepoint(ctx context.Context, name string) (uint64, error) {
	return j.savepoint(ctx, name, false)
}

// StopWithSavepoint takes a savepoint called name and stops the job there:
// the sources stop at their barrier, so no record after it reaches any
// state or sink. The job stops once every task has handled the savepoint's
// completion, where two-phase-commit sinks commit (should a task fail
// there, the job stops all the same, and the next start from the savepoint
// commits what it holds). It returns the savepoint's checkpoint id once the
// job has stopped; Wait then returns an error wrapping
// ErrStopped. If the savepoint fails, the sources produce again, the job
// keeps running, and StopWithSavepoint returns why. If the manifest's write
// is in doubt when the job fails over, the manifest is read back: a
// savepoint that landed stops the job there.
//
// If the savepoint completes but recording it as the job's origin fails,
// the job goes on and StopWithSavepoint returns an error wrapping
// ErrNotStopped: the savepoint is complete, so a retry must use another
// name.
//
// The savepoint becomes the job's origin (see WithSavepoint): starting the
// job again, even without WithSavepoint, resumes from it, not from an older
// checkpoint.
//
// When ctx ends first, StopWithSavepoint returns its error, but the request
// stays with the job, which may still stop with the savepoint; Wait tells.
func (j *Job) StopWithSavepoint(ctx context.Context, name string) (uint64, error) {
	id, err := j.savepoint(ctx, name, true)
	if err != nil {
		return 0, err
	}
	select {
	case <-j.done:
		return id, nil
	case <-ctx.Done():
		return id, context.Cause(ctx)
	}
}

func (j *Job) savepoint(ctx context.Context, name string, stop bool) (uint64, error) {
	if err := snapshots.ValidateSavepointName(name); err != nil {
		return 0, fmt.Errorf("actors: job %q: savepoint: %w", j.sh.job, err)
	}
	switch exists, err := j.sh.cps.SavepointExists(ctx, name); {
	case err != nil:
		return 0, fmt.Errorf("actors: job %q: savepoint %q: %w", j.sh.job, name, err)
	case exists:
		return 0, fmt.Errorf("actors: job %q: savepoint %q: %w: delete it first (snapflow savepoints delete) or choose another name",
			j.sh.job, name, snapshots.ErrSavepointExists)
	}
	reply := make(chan checkpointResult, 1)
	j.system.Root.Send(j.pid, &savepointRequest{name: name, stop: stop, reply: reply})
	return j.await(ctx, reply)
}

// await waits for the answer to a checkpoint or savepoint request.
func (j *Job) await(ctx context.Context, reply chan checkpointResult) (uint64, error) {
	select {
	case r := <-reply:
		return r.id, r.err
	case <-ctx.Done():
		return 0, context.Cause(ctx)
	case <-j.done:
		select {
		case r := <-reply:
			return r.id, r.err
		default:
		}
		if j.err != nil {
			return 0, j.err
		}
		return 0, ErrFinished
	}
}

// PlanOf is j's physical plan, for the monitor and for tests.
func PlanOf(j *Job) *dataflow.Plan { return j.sh.plan }

// Checkpoints gives access to the job's checkpoints in its store.
func (j *Job) Checkpoints() *snapshots.Checkpoints { return j.sh.cps }

// DiskRestoreBytes returns the bytes of on-disk state files (see
// WithDiskState) that the restores of this process's tasks have read so
// far: from the local copies of earlier checkpoints (task-local recovery)
// and from the snapshot store.
func (j *Job) DiskRestoreBytes() (local, downloaded int64) {
	s := j.sh.diskRestores.get()
	return s.LocalBytes, s.DownloadedBytes
}
