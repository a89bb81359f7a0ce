package baseline

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// pipeline is the parent of the run's actors: it spawns the sink, the workers
// and the source, tells each where the others are, and forwards the stop of
// an unbounded run to the source.
type pipeline struct {
	cfg    Config
	done   chan<- Result
	source *actor.PID
}

func (p *pipeline) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		sk := newSink(p.cfg, p.done)
		w := &wiring{sink: ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return sk }))}
		for i := range p.cfg.Parallelism {
			wk := newWorker(p.cfg, i)
			w.workers = append(w.workers, ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return wk })))
		}
		src := newSource(p.cfg)
		w.source = ctx.Spawn(actor.PropsFromProducer(func() actor.Actor { return src }))
		p.source = w.source
		ctx.Send(w.sink, w)
		for _, pid := range w.workers {
			ctx.Send(pid, w)
		}
		ctx.Send(w.source, w) // last: the source starts on it
	case *stopMsg:
		ctx.Send(p.source, m)
	}
}

// stopOnFailure stops a child that panicked, instead of restarting it with
// its state lost, and reports the failure to the run.
type stopOnFailure struct{ errs chan<- error }

func (s stopOnFailure) HandleFailure(_ *actor.ActorSystem, sup actor.Supervisor, child *actor.PID, _ *actor.RestartStatistics, reason, _ any) {
	select {
	case s.errs <- fmt.Errorf("baseline: actor %s failed: %v", child.Id, reason):
	default:
	}
	sup.StopChildren(child)
}

// RunProtoactor runs the pipeline on a fresh actor system: until cfg.Records
// records have reached the sink or, when cfg.Records is 0, until ctx is done
// (the source then stops and the pipeline drains). Every actor, timer and
// goroutine of the run has ended when it returns. When ctx ends a bounded run
// early, the partial Result comes with an error wrapping the context's cause.
func RunProtoactor(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return Result{}, err
	}
	system := actor.NewActorSystem(
		actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }),
		// A dead letter starts a throttle goroutine that lives one interval;
		// the pipeline sends none, but keep it short should a failure cause one.
		actor.WithDeadLetterThrottleInterval(50*time.Millisecond),
	)
	defer system.Shutdown()
	done := make(chan Result, 1)
	errs := make(chan error, 1)
	p := &pipeline{cfg: cfg, done: done}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return p }, actor.WithSupervisor(stopOnFailure{errs})))

	var res Result
	select {
	case res = <-done:
	case err = <-errs:
	case <-ctx.Done():
		system.Root.Send(pid, theStop)
		select {
		case res = <-done:
		case err = <-errs:
		}
		if err == nil && cfg.Records > 0 && res.Records < cfg.Records {
			err = fmt.Errorf("baseline: stopped after %d of %d records: %w", res.Records, cfg.Records, context.Cause(ctx))
		}
	}
	if serr := system.Root.StopFuture(pid).Wait(); serr != nil && err == nil {
		err = fmt.Errorf("baseline: stop the pipeline: %w", serr)
	}
	return res, err
}
