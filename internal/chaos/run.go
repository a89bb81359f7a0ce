package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// RunConfig is one soak run: a shape over n records per source, with
// failures injected at rates, at most budget of them failing a task.
type RunConfig struct {
	Shape    Shape
	N        int64
	Store    snapshots.Store
	Seed     uint64
	Rates    Rates
	Budget   int
	Interval time.Duration // checkpoint interval (default 20ms)
	Rate     float64       // records/s per source task (0: as fast as possible)
	Logger   *slog.Logger
}

// RunResult is what a run did.
type RunResult struct {
	Counts      map[Kind]int
	Failures    int // task failures the job observed (EventTaskFailed)
	Restores    int
	FromCkpt    int // restores from a checkpoint (not from the beginning)
	Completed   int
	Aborted     int
	Stale       uint64
	Elapsed     time.Duration
	FinalStates map[string]map[int64]int64 // checker operator -> key -> last seq
}

// Run runs one soak job to its end and verifies it: no semantic violation,
// the sink saw every seq, and the final "last" state of every checker equals
// the failure-free result.
func Run(ctx context.Context, rc RunConfig) (RunResult, error) {
	start := time.Now()
	in := NewInjector(rc.Seed, rc.Rates, rc.Budget)
	in.Disable() // armed once the job runs: Start itself must succeed
	v := &Violations{}
	job := fmt.Sprintf("soak-%s-%d", rc.Shape.Name, rc.Seed)
	g := topology.New(job)
	sink := rc.Shape.Build(g, rc.N, rc.Rate, in, v)
	interval := rc.Interval
	if interval == 0 {
		interval = 20 * time.Millisecond
	}
	logger := rc.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var res RunResult
	opts := []actors.Option{
		actors.WithStore(WrapStore(rc.Store, in)), actors.WithLogger(logger), actors.WithFaults(in.Faults()),
		actors.WithCheckpointInterval(interval), actors.WithCheckpointTimeout(10 * time.Second),
		actors.WithTolerableCheckpointFailures(-1),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			MaxFailures: 100_000, Window: time.Hour}),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventRunning:
				in.Enable()
			case actors.EventTaskFailed:
				res.Failures++
			case actors.EventRestoring:
				res.Restores++
				if e.Checkpoint > 0 {
					res.FromCkpt++
				}
			case actors.EventCheckpointCompleted:
				res.Completed++
			case actors.EventCheckpointAborted:
				res.Aborted++
			}
		}),
	}
	j, err := actors.Start(ctx, g, opts...)
	if err != nil {
		return res, err
	}
	err = j.Wait()
	in.Disable()
	res.Counts, res.Elapsed, res.Stale = in.Counts(), time.Since(start), j.Stats().StaleMessages
	if err != nil {
		return res, fmt.Errorf("job %s: %w", job, err)
	}
	return res, verify(ctx, rc, job, sink, v, &res)
}

func verify(ctx context.Context, rc RunConfig, job string, sink *Sink, v *Violations, res *RunResult) error {
	var errs []error
	if err := v.Err(); err != nil {
		errs = append(errs, err)
	}
	want := rc.Shape.Want(rc.N)
	if d := Diff(sink.Max(), want); d != "" {
		errs = append(errs, fmt.Errorf("sink: %s", d))
	}
	rp, err := snapshots.NewCheckpoints(rc.Store, job, nil).LoadLatest(ctx)
	if err != nil || rp == nil || !rp.Manifest.Final {
		return errors.Join(append(errs, fmt.Errorf("final checkpoint: %v (found %v)", err, rp != nil))...)
	}
	res.FinalStates = map[string]map[int64]int64{}
	for _, op := range rc.Shape.Checkers {
		got := map[int64]int64{}
		for _, st := range rp.States {
			if st.Operator != op {
				continue
			}
			m, err := topology.DecodeValueState[int64, int64](st, "last")
			if err != nil {
				errs = append(errs, err)
			}
			for k, s := range m {
				got[k] = s
			}
		}
		res.FinalStates[op] = got
		if d := Diff(got, want); d != "" {
			errs = append(errs, fmt.Errorf("final state of %s: %s", op, d))
		}
	}
	return errors.Join(errs...)
}
