package actors

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
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
func Start(ctx context.Context, g *topology.Graph, opts ...Option) (*Job, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.finish(); err != nil {
		return nil, err
	}
	plan, err := topology.NewPlan(g)
	if err != nil {
		return nil, err
	}
	log := cfg.logger.With("job", plan.Job)
	if err := cfg.store.Check(ctx); err != nil {
		return nil, fmt.Errorf("actors: job %q: store %s is not usable: %w", plan.Job, cfg.store, err)
	}
	cps := snapshots.NewCheckpoints(cfg.store, plan.Job, log)
	maxID, err := cps.MaxID(ctx)
	if err != nil {
		return nil, fmt.Errorf("actors: job %q: list checkpoints: %w", plan.Job, err)
	}
	rp, err := cps.LoadLatest(ctx)
	if err != nil {
		return nil, fmt.Errorf("actors: job %q: load the newest checkpoint: %w", plan.Job, err)
	}
	epoch := uint64(1)
	if rp != nil {
		if fp := rp.Manifest.GetTopologyFingerprint(); fp != plan.Fingerprint && !cfg.allowNewTopology {
			return nil, fmt.Errorf("actors: job %q: checkpoint %d was taken from a different topology (fingerprint %s, this job %s); start with WithAllowTopologyChange to restore it anyway, or use another job name or store",
				plan.Job, rp.Manifest.GetCheckpointId(), fp, plan.Fingerprint)
		}
		epoch = rp.Manifest.GetEpoch() + 1
		log.Info("resuming from checkpoint", "checkpoint", rp.Manifest.GetCheckpointId(), "epoch", epoch)
	}
	if err := cps.Retain(ctx, cfg.retained, maxID+1); err != nil {
		log.Warn("cleaning up old checkpoints failed", "err", err)
	}

	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return cfg.logger.With("component", "protoactor") }),
		// Messages to actors that have just stopped (a linger timer firing
		// during Stop, say) are dead letters. protoactor-go logs them through
		// a throttle whose goroutine lives for one interval: keep it short so
		// that nothing outlives a stopped job for long.
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond),
	)
	uctx, cancel := context.WithCancel(context.Background())
	sh := &shared{job: plan.Job, plan: plan, cfg: &cfg, log: log, system: system, cps: cps, uploadCtx: uctx, cancelUpload: cancel}
	sh.inc.Store(sh.newIncarnation(epoch, rp))
	j := &Job{sh: sh, system: system, stopped: make(chan struct{}), done: make(chan struct{})}
	ja := newJobActor(sh, j.stopped, maxID+1, rp)
	// The job actor recovers its own panics; should one escape anyway, stop
	// it rather than let the root guardian restart it with stale state.
	stopIt := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return ja }, actor.WithGuardian(stopIt)), "job-"+plan.Job)
	if err != nil {
		cancel()
		system.Shutdown()
		return nil, fmt.Errorf("actors: job %q: spawn: %w", plan.Job, err)
	}
	j.pid = pid
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
	j.sh.cancelUpload()
	j.system.Shutdown()
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
func (j *Job) Stop() error {
	j.once.Do(func() { j.system.Root.Send(j.pid, &stopRequest{cause: ErrStopped}) })
	return j.Wait()
}

// Checkpoint triggers a checkpoint now (or as soon as the one in flight ends)
// and returns its id once it is complete, or why it failed.
func (j *Job) Checkpoint(ctx context.Context) (uint64, error) {
	reply := make(chan checkpointResult, 1)
	j.system.Root.Send(j.pid, &checkpointRequest{reply: reply})
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

// Plan is the job's physical plan.
func (j *Job) Plan() *topology.Plan { return j.sh.plan }

// Checkpoints gives access to the job's checkpoints in its store.
func (j *Job) Checkpoints() *snapshots.Checkpoints { return j.sh.cps }
