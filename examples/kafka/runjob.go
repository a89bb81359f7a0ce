package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/dashboard"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
)

// stopTries bounds the attempts at a stop-with-savepoint: a failover
// meanwhile aborts it, and the job runs on.
const stopTries = 20

// runner runs the job until its output is complete.
type runner struct {
	o     options
	p     *printer
	log   *slog.Logger
	store snapshots.Store
	plan  *faultPlan
	w     *watcher
	srv   *dashboard.Server // nil without -http

	mu          sync.Mutex
	starts      int   // jobs started by this process
	completed   int   // checkpoints completed
	failures    int   // task failures
	lastFailure error // the last task failure, for errors
}

// runJob runs the job on the store until the read_committed output holds an
// effect for every order, restarting it once part way as -restart says, and
// stops it with a savepoint.
//
// With feeding, it writes the input meanwhile (see feed); a failure to
// write it ends the run.
func runJob(ctx context.Context, o options, p *printer, stderr io.Writer, feeding bool) (err error) {
	url, fresh := o.store, false
	if url == "" {
		dir, err := os.MkdirTemp("", "snapflow-kafka-")
		if err != nil {
			return fmt.Errorf("a temporary directory for the store: %w", err)
		}
		url, fresh = dir, true
	}
	// A fresh store of an in-process broker is removed at the end: its
	// checkpoints hold offsets of a broker that ends with the process.
	remove := fresh && o.inProcess
	if remove {
		defer os.RemoveAll(url)
	}
	store, err := snapshots.Open(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	note := ""
	switch {
	case remove:
		note = " (a fresh directory, removed at the end; -store chooses another)"
	case fresh:
		note = " (a fresh directory; -store chooses another)"
	}
	p.say("store: %s%s", store, note)
	// The runtime logs every injected failure with its stack: only -v
	// shows them; the events below say what happened.
	log := slog.New(slog.DiscardHandler)
	if o.verbose {
		log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	r := &runner{o: o, p: p, store: store, log: log}
	if r.srv, err = dashboard.Start(ctx, dashboard.Config{Addr: o.http, Token: os.Getenv(dashboard.TokenEnv), Logger: log}); err != nil {
		return err
	}
	if b := r.srv.Banner(); b != "" {
		fmt.Fprintln(p, b)
	}
	defer func() { err = errors.Join(err, r.srv.Close()) }()
	if r.w, err = watch(ctx, o.brokers, o.out, o.records); err != nil {
		return err
	}
	defer r.w.stop()
	r.plan = planFaults(o.seed, o.faults, o.records, r.w.committed, p.say)
	p.say("faults (seed %d; -seed repeats the plan): %s", o.seed, r.plan)
	if !feeding {
		return r.drive(ctx)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	fed := make(chan struct{})
	defer func() { cancel(nil); <-fed }()
	p.say("feeding %q %d orders of %d customers in %d chunks, each once the output holds the effects of all but the last chunk",
		o.in, o.records, o.customers, o.chunks)
	go func() {
		defer close(fed)
		if err := feed(ctx, r.w, o.brokers, o.in, o.records, o.customers, o.chunks); err != nil {
			cancel(err)
			return
		}
		p.say("fed %q all %d orders of %d customers", o.in, o.records, o.customers)
	}()
	return r.drive(ctx)
}

func (r *runner) drive(ctx context.Context) error {
	job, err := r.start(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = job.Stop() }() // after an error; a no-op once stopped
	if r.o.restart != restartNone && r.w.committed() < r.o.records/2 {
		if err := r.await(ctx, job, r.o.records/2); err != nil {
			return err
		}
		if err := r.restart(ctx, job); err != nil {
			return err
		}
		again, err := r.start(ctx)
		if err != nil {
			return err
		}
		job = again
	}
	if err := r.await(ctx, job, r.o.records); err != nil {
		return err
	}
	name, id, err := r.stopWithSavepoint(ctx, job, "final")
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.p.say("stopped with savepoint %q (checkpoint %d) once the output held all %d effects; %d checkpoints completed, %d task failures, %d of %d planned faults injected",
		name, id, r.o.records, r.completed, r.failures, r.plan.injected(), r.plan.planned())
	return nil
}

// start starts the job on the store: from the beginning, or from where the
// store says it stopped.
func (r *runner) start(ctx context.Context) (*actors.Job, error) {
	r.mu.Lock()
	r.starts++
	r.mu.Unlock()
	g := build(jobConfig{brokers: r.o.brokers, in: r.o.in, out: r.o.out, txPrefix: txPrefix(r.o.out)})
	began := time.Now()
	opts := append(r.srv.Options(), actors.WithStore(r.store), actors.WithCheckpointInterval(r.o.interval),
		actors.WithLogger(r.log), actors.WithListener(r.event), actorstest.WithFaults(r.plan.faults()),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: 10 * time.Millisecond, MaxBackoff: time.Second, MaxFailures: 20, Window: time.Minute}))
	job, err := actors.Start(ctx, g, opts...)
	if err != nil {
		return nil, fmt.Errorf("start job %q (after %v): %w", jobName, time.Since(began).Round(time.Millisecond), err)
	}
	r.srv.Attach(job)
	return job, nil
}

// event prints the notable events of the job.
func (r *runner) event(e actors.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch e.Kind {
	case actors.EventRunning:
		from := "from the beginning"
		switch {
		case e.Savepoint != "":
			from = fmt.Sprintf("from savepoint %q (checkpoint %d)", e.Savepoint, e.Checkpoint)
		case e.Checkpoint != 0:
			from = fmt.Sprintf("from checkpoint %d", e.Checkpoint)
		}
		r.p.say("job %q running (start %d, epoch %d) %s; checkpoints every %v; %d of %d effects committed so far",
			jobName, r.starts, e.Epoch, from, r.o.interval, r.w.committed(), r.o.records)
	case actors.EventTaskFailed:
		r.failures++
		r.lastFailure = fmt.Errorf("task %s: %w", e.Task, e.Err)
		r.p.say("failure: %v", e.Err)
	case actors.EventRestoring:
		what := "nothing: no checkpoint yet"
		switch {
		case e.Savepoint != "":
			what = fmt.Sprintf("savepoint %q (checkpoint %d)", e.Savepoint, e.Checkpoint)
		case e.Checkpoint != 0:
			what = fmt.Sprintf("checkpoint %d", e.Checkpoint)
		}
		r.p.say("rolling back to %s (epoch %d)", what, e.Epoch)
	case actors.EventCheckpointCompleted:
		r.completed++
		if e.Savepoint != "" {
			r.p.say("savepoint %q complete (checkpoint %d)", e.Savepoint, e.Checkpoint)
		}
	case actors.EventFailed:
		r.p.say("job failed: %v", e.Err)
	}
}

// await waits until n orders have a visible effect, or the job ends, or
// ctx ends.
func (r *runner) await(ctx context.Context, job *actors.Job, n int64) error {
	err := r.w.wait(ctx, n, job.Done())
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errJobEnded):
		return fmt.Errorf("job %q ended with %d of %d effects committed: %w", jobName, r.w.committed(), r.o.records, job.Wait())
	}
	r.mu.Lock()
	last := r.lastFailure
	r.mu.Unlock()
	if last != nil {
		err = fmt.Errorf("%w; the job's last task failure: %w", err, last)
	}
	return err
}

// restart stops the job part way, as -restart says; the caller starts it
// again at once. That matters: the sink tasks may stop before they commit
// what the last checkpoint (or the savepoint) pre-committed, and those
// transactions stay open, holding read_committed consumers back, until the
// next start commits them; after the transaction timeout the broker aborts
// them and that start fails (kafka.Sink's package documentation).
func (r *runner) restart(ctx context.Context, job *actors.Job) error {
	have := r.w.committed()
	if r.o.restart == restartSavepoint {
		name, id, err := r.stopWithSavepoint(ctx, job, "restart")
		if err != nil {
			return err
		}
		r.p.say("restart of the whole job: stopped with savepoint %q (checkpoint %d) at %d of %d effects committed; starting it again on the same store",
			name, id, have, r.o.records)
		return nil
	}
	if err := job.Stop(); !errors.Is(err, actors.ErrStopped) {
		return fmt.Errorf("stop job %q for the restart: %w", jobName, err)
	}
	r.p.say("restart of the whole job: stopped (Stop, no savepoint) at %d of %d effects committed; starting it again on the same store",
		have, r.o.records)
	return nil
}

// stopWithSavepoint stops the job with a savepoint called prefix-N, N above
// the store's savepoints of that prefix, retrying while failovers abort it.
func (r *runner) stopWithSavepoint(ctx context.Context, job *actors.Job, prefix string) (string, uint64, error) {
	infos, err := job.Checkpoints().Savepoints(ctx)
	if err != nil {
		return "", 0, fmt.Errorf("list the savepoints of job %q: %w", jobName, err)
	}
	next := 1
	for _, in := range infos {
		if n, err := strconv.Atoi(strings.TrimPrefix(in.Name, prefix+"-")); err == nil && strings.HasPrefix(in.Name, prefix+"-") {
			next = max(next, n+1)
		}
	}
	name := fmt.Sprintf("%s-%d", prefix, next)
	var errs []error
	for range stopTries {
		id, err := job.StopWithSavepoint(ctx, name)
		if err == nil {
			if werr := job.Wait(); !errors.Is(werr, actors.ErrStopped) {
				return "", 0, fmt.Errorf("job %q after stopping with savepoint %q: %v, want it stopped", jobName, name, werr)
			}
			return name, id, nil
		}
		errs = append(errs, err)
		select {
		case <-job.Done():
			return "", 0, fmt.Errorf("stop job %q with savepoint %q: %w", jobName, name, errors.Join(err, job.Wait()))
		case <-ctx.Done():
			return "", 0, fmt.Errorf("stop job %q with savepoint %q: %w", jobName, name, context.Cause(ctx))
		default:
		}
	}
	return "", 0, fmt.Errorf("stop job %q with savepoint %q: %d attempts failed: %w", jobName, name, stopTries, errors.Join(errs...))
}
