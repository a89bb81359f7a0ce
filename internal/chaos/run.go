package chaos

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
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
	// Phases are the parallelisms of the phases of a shape with BuildPhase
	// (nil: four, chosen from the seed; see PhasesFromSeed).
	Phases []int
	// SameSavepointName retries a phase's failed StopWithSavepoint under
	// the same name, "phase-<i>"; by default each attempt after the first
	// has a name of its own, "phase-<i>.<attempt>".
	SameSavepointName bool
	// Options are added to the job's options (for example
	// actors.WithIncrementalCheckpoints).
	Options []actors.Option
	// FromCheckpoints ends each phase but the last with Stop, once a
	// checkpoint that stored records in flight has completed (or its
	// sources reached the gate), rather than with a savepoint; the next
	// phase starts from the phase's newest checkpoint (actors.
	// WithCheckpoint) at its parallelism. With unaligned checkpoints, their
	// records in flight are then redistributed over the new parallelism.
	// Unlike a savepoint, such a checkpoint is not at the sources'
	// positions, and is not checked there.
	FromCheckpoints bool
}

// RunResult is what a run did.
type RunResult struct {
	Counts    map[Kind]int
	Failures  int // task failures the job observed (EventTaskFailed)
	Restores  int
	FromCkpt  int // restores from a checkpoint (not from the beginning)
	Completed int
	// Incremental counts the completed checkpoints in which a task stored
	// an object smaller than its state: it referenced earlier objects.
	Incremental int
	Aborted     int
	Stale       uint64
	Elapsed     time.Duration
	FinalStates map[string]map[int64]int64 // checker operator -> key -> last seq

	// Of a shape with Verify (the event-time shape): rows committed by
	// event-time timers, by processing-time timers, and records that came
	// after the watermark had passed their window.
	TimersFired, ProcTimersFired, Late int
	// Rows is the rows a shape with Verify checked (the Nexmark shapes),
	// and OpenWindows the keys with open windows their savepoints held.
	Rows, OpenWindows int
	// PendingAtSavepoints is the number of event-time timers pending in
	// the phases' savepoints, which the rescales moved.
	PendingAtSavepoints int

	// Of a run in phases (a shape with BuildPhase):
	Phases            []int // the parallelism of each phase
	Savepoints        int   // savepoints taken: one per phase but the last
	SavepointsFailed  int   // StopWithSavepoint calls that failed (the job ran on, and they were retried)
	SavepointRestores int   // recoveries that restored a phase's savepoint again, before the phase completed a checkpoint
	StartRetries      int   // Start calls that failed on an injected store error (and were retried)
	// With FromCheckpoints: the phases started from a checkpoint, and how
	// many of those checkpoints held records in flight.
	CheckpointRescales, InFlightRescales int
}

// Run runs one soak job to its end and verifies it: no semantic violation,
// the sink saw every seq, and the final "last" state of every checker equals
// the failure-free result. A shape with BuildPhase runs in phases (see
// RunConfig.Phases).
func Run(ctx context.Context, rc RunConfig) (RunResult, error) {
	if rc.Shape.BuildPhase != nil {
		return runPhases(ctx, rc)
	}
	start := time.Now()
	in := NewInjector(rc.Seed, rc.Rates, rc.Budget)
	in.Disable() // armed once the job runs: Start itself must succeed
	v := &Violations{}
	job := jobName(rc)
	g := topology.New(job)
	sink := rc.Shape.Build(g, rc.N, rc.Rate, in, v)
	var res RunResult
	var t tally
	opts := append(jobOptions(rc, in), actors.WithListener(func(e actors.Event) {
		if e.Kind == actors.EventRunning {
			in.Enable()
		}
		t.listen(e)
	}))
	j, err := actors.Start(ctx, g, opts...)
	if err != nil {
		return res, err
	}
	err = j.Wait()
	in.Disable()
	t.addTo(&res)
	res.Counts, res.Elapsed, res.Stale = in.Counts(), time.Since(start), j.Stats().StaleMessages
	if err != nil {
		return res, fmt.Errorf("job %s: %w", job, err)
	}
	return res, verify(ctx, rc, job, sink, v, &res)
}

func (rc RunConfig) logger() *slog.Logger {
	if rc.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return rc.Logger
}

func jobName(rc RunConfig) string { return fmt.Sprintf("soak-%s-%d", rc.Shape.Name, rc.Seed) }

// jobOptions are the options of every soak job but its listener.
func jobOptions(rc RunConfig, in *Injector) []actors.Option {
	interval := rc.Interval
	if interval == 0 {
		interval = 20 * time.Millisecond
	}
	opts := []actors.Option{
		actors.WithStore(WrapStore(rc.Store, in)), actors.WithLogger(rc.logger()), actorstest.WithFaults(in.Faults()),
		actors.WithCheckpointInterval(interval), actors.WithCheckpointTimeout(10 * time.Second),
		actors.WithTolerableCheckpointFailures(-1),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 20 * time.Millisecond,
			MaxFailures: 100_000, Window: time.Hour}),
	}
	return append(opts, rc.Options...)
}

// tally counts a job's events; its listener may run on any goroutine.
type tally struct {
	mu                                               sync.Mutex
	failures, restores, fromCkpt, completed, aborted int
	incremental                                      int
}

func (t *tally) listen(e actors.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch e.Kind {
	case actors.EventTaskFailed:
		t.failures++
	case actors.EventRestoring:
		t.restores++
		if e.Checkpoint > 0 {
			t.fromCkpt++
		}
	case actors.EventCheckpointCompleted:
		t.completed++
		for _, tc := range e.Tasks {
			if tc.Uploaded > 0 && tc.Uploaded < tc.Bytes {
				t.incremental++
				break
			}
		}
	case actors.EventCheckpointAborted:
		t.aborted++
	}
}

// addTo adds the counts to res.
func (t *tally) addTo(res *RunResult) {
	t.mu.Lock()
	defer t.mu.Unlock()
	res.Failures += t.failures
	res.Restores += t.restores
	res.FromCkpt += t.fromCkpt
	res.Completed += t.completed
	res.Incremental += t.incremental
	res.Aborted += t.aborted
}

func verify(ctx context.Context, rc RunConfig, job string, sink *Sink, v *Violations, res *RunResult) error {
	var errs []error
	if err := v.Err(); err != nil {
		errs = append(errs, err)
	}
	cps := snapshots.NewCheckpoints(rc.Store, job, nil)
	rp, err := cps.LoadLatest(ctx)
	if err == nil {
		err = topology.ExpandDiskState(ctx, cps, rp, "") // states on disk
	}
	if err != nil || rp == nil || !rp.Manifest.Final {
		errs = append(errs, fmt.Errorf("final checkpoint: %v (found %v)", err, rp != nil))
	}
	if rc.Shape.Verify != nil {
		return errors.Join(append(errs, rc.Shape.Verify(rc.N, res))...)
	}
	if rp == nil || !rp.Manifest.Final {
		return errors.Join(errs...)
	}
	want := rc.Shape.Want(rc.N)
	if d := Diff(sink.Max(), want); d != "" {
		errs = append(errs, fmt.Errorf("sink: %s", d))
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
