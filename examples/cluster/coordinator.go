package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/actors/dashboard"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// runCoordinator runs the job as the coordinator of a cluster: it waits for
// the workers, runs the job to its end, and checks the final checkpoint
// against the closed form, and with -sink-dir the sink's part files.
func runCoordinator(ctx context.Context, o options, stdout io.Writer, logger *slog.Logger) (err error) {
	out := &lineWriter{w: stdout}
	srv, err := dashboard.Start(ctx, dashboard.Config{Addr: o.http, Token: os.Getenv(dashboard.TokenEnv), Logger: logger})
	if err != nil {
		return err
	}
	if b := srv.Banner(); b != "" {
		fmt.Fprintln(out, b)
	}
	defer func() { err = errors.Join(err, srv.Close()) }()
	opts := append(srv.Options(),
		cluster.WithCoordinator(cluster.Coordinator{
			Listen: o.listen, Workers: o.workers, Store: o.store, TLS: o.tls(), Secret: o.secret, AllowPlaintext: o.allowPlaintext,
			SlotTimeout:       o.slotTimeout,
			HeartbeatInterval: o.heartbeat, HeartbeatTimeout: o.heartbeatTimeout,
		}),
		actors.WithCheckpointInterval(o.interval),
		actors.WithRestartPolicy(restart.Policy{MaxFailures: o.maxFailures, Window: o.failureWindow}),
		actors.WithBatchSize(o.batch),
		actors.WithLogger(logger),
		actors.WithListener(func(e actors.Event) { out.println(formatEvent(e)) }),
	)
	if o.batchBytes > 0 {
		opts = append(opts, actors.WithBatchBytes(o.batchBytes))
	}
	if o.startOver {
		opts = append(opts, actors.WithStartOver())
	}
	if o.takeOver {
		opts = append(opts, actors.WithTakeOver())
	}
	if o.leaseTimeout > 0 {
		opts = append(opts, actors.WithLeaseTimeout(o.leaseTimeout))
	}
	if o.inlineLimit >= 0 {
		opts = append(opts, actors.WithInlineStateLimit(o.inlineLimit))
	}
	if o.retained > 0 {
		opts = append(opts, actors.WithRetainedCheckpoints(o.retained))
	}
	if o.fromCheckpoint > 0 {
		opts = append(opts, actors.WithCheckpoint(o.fromCheckpoint))
	}
	switch o.checkpointMode {
	case "unaligned":
		opts = append(opts, actors.WithCheckpointMode(actors.CheckpointUnaligned))
	case "at-least-once":
		opts = append(opts, actors.WithCheckpointMode(actors.CheckpointAtLeastOnce))
	}
	if o.alignTimeout > 0 {
		opts = append(opts, actors.WithAlignmentTimeout(o.alignTimeout))
	}
	job, err := actors.Start(ctx, buildJob(o.job), opts...)
	if err != nil {
		if errors.Is(err, actors.ErrAlreadyFinished) {
			return fmt.Errorf("%w (the store %s holds a finished run of job %q: add -start-over to run it again)", err, o.store, jobName)
		}
		if errors.Is(err, snapshots.ErrLeaseHeld) {
			return fmt.Errorf("%w (add -takeover to take the job over from it on purpose)", err)
		}
		return err
	}
	srv.Attach(job)
	out.println(listeningPrefix + job.Address())
	if err := job.Wait(); err != nil {
		return fmt.Errorf("the job ended without finishing: %w", err)
	}
	res, err := verify(ctx, o.store, o.job, logger)
	if err != nil {
		return err
	}
	out.println(fmt.Sprintf("%skeys=%d records=%d checkpoint=%d", resultPrefix, res.keys, res.records, res.checkpoint))
	if o.job.sinkDir != "" {
		sr, err := checkSink(o.job.sinkDir, o.job)
		if err != nil {
			return err
		}
		out.println(fmt.Sprintf("%sparts=%d records=%d", sinkPrefix, sr.parts, sr.records))
	}
	out.println(okLine)
	return nil
}

// lineWriter writes whole lines from several goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes b as it is; b should hold whole lines.
func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func (l *lineWriter) println(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, s)
}

// result is what verify found in the final checkpoint.
type result struct {
	checkpoint    uint64
	keys, records int64
}

// verify reads the newest complete checkpoint of the job back from the store
// and checks that it is the final one and that it holds, for every key, the
// count and the sum of the closed form, and for every source task the
// offset at the end of its records.
func verify(ctx context.Context, storeURL string, p jobParams, logger *slog.Logger) (result, error) {
	store, err := snapshots.Open(ctx, storeURL)
	if err != nil {
		return result{}, fmt.Errorf("verify: %w", err)
	}
	defer store.Close()
	cps := snapshots.NewCheckpoints(store, jobName, logger)
	id, err := cps.LatestCompleteID(ctx)
	if err != nil {
		return result{}, fmt.Errorf("verify: %w", err)
	}
	m, err := cps.ReadManifest(ctx, id)
	if err != nil {
		return result{}, fmt.Errorf("verify: %w", err)
	}
	if !m.GetFinal() {
		return result{}, fmt.Errorf("%w: the newest complete checkpoint, %d, is not the final one", errResult, id)
	}
	counts, sums := map[int64]int64{}, map[int64]int64{}
	var problems []error
	sources := 0
	for _, e := range m.GetTasks() {
		st, err := cps.ReadTaskState(ctx, e.GetState())
		if err != nil {
			return result{}, fmt.Errorf("verify: checkpoint %d: %w", id, err)
		}
		switch st.GetOperator() {
		case "source":
			sources++
			off, err := topology.GeneratedRecords(st)
			if err != nil {
				return result{}, fmt.Errorf("verify: checkpoint %d: task %s: %w", id, e.GetTaskId(), err)
			}
			if want := sourceRecords(p.records, int(st.GetSubtask()), sourceParallelism); off != want {
				problems = append(problems, fmt.Errorf("task %s ended at offset %d, want %d (is -records %d given to every node?)", e.GetTaskId(), off, want, p.records))
			}
		case "sum":
			if err := collect(st, counts, sums); err != nil {
				return result{}, fmt.Errorf("verify: checkpoint %d: %w", id, err)
			}
		}
	}
	if sources != sourceParallelism {
		problems = append(problems, fmt.Errorf("%d source tasks in the final checkpoint, want %d", sources, sourceParallelism))
	}
	problems = append(problems, compare(p, counts, sums)...)
	if len(problems) > 0 {
		return result{}, fmt.Errorf("%w: final checkpoint %d: %w", errResult, id, errors.Join(problems...))
	}
	return result{checkpoint: id, keys: p.keys, records: p.records}, nil
}

// collect adds the keyed states of one sum task to counts and sums; a key
// held by two tasks is an error.
func collect(ts *messages.TaskState, counts, sums map[int64]int64) error {
	c, err := topology.DecodeValueState[int64, int64](ts, "count")
	if err != nil {
		return err
	}
	s, err := topology.DecodeValueState[int64, int64](ts, "sum")
	if err != nil {
		return err
	}
	for k, v := range c {
		if _, dup := counts[k]; dup {
			return fmt.Errorf("key %d is held by two tasks (%s and another)", k, ts.GetTaskId())
		}
		counts[k] = v
	}
	for k, v := range s {
		sums[k] = v
	}
	return nil
}

// compare checks every key's count and sum against the closed form; it
// reports at most a few differences, and how many there are.
func compare(p jobParams, counts, sums map[int64]int64) []error {
	var problems []error
	wrong := 0
	note := func(err error) {
		wrong++
		if wrong <= 5 {
			problems = append(problems, err)
		}
	}
	for k := range p.keys {
		wc, ws := expected(p.records, p.keys, k)
		if counts[k] != wc || sums[k] != ws {
			note(fmt.Errorf("key %d: count %d sum %d, closed form count %d sum %d", k, counts[k], sums[k], wc, ws))
		}
	}
	for k := range counts {
		if k < 0 || k >= p.keys {
			note(fmt.Errorf("key %d is not one of the %d keys", k, p.keys))
		}
	}
	if wrong > 5 {
		problems = append(problems, fmt.Errorf("and %d more keys differ", wrong-5))
	}
	return problems
}
