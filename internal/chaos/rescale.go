package chaos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// Phase is one phase of a run in phases: the job at one parallelism,
// started from the savepoint of the phase before it (the first from
// nothing), and ended by a savepoint once its sources reach Gate (the last
// runs to the end: its Gate is nil).
type Phase struct {
	Index       int
	Parallelism int
	Gate        *Gate
}

// maxSavepointAttempts bounds the StopWithSavepoint calls of one phase: an
// injected failure aborts a savepoint, and the runner tries again.
const maxSavepointAttempts = 50

// maxStartAttempts bounds the Start calls of one phase that fail on an
// injected store error.
const maxStartAttempts = 20

// PhasesFromSeed returns the parallelisms of the four phases of a run with
// this seed, each from 1 to MaxPhaseParallelism and each different from the
// one before it.
func PhasesFromSeed(seed uint64) []int {
	rng := rand.New(rand.NewPCG(seed, 0x5ca1e))
	out := make([]int, 4)
	for i := range out {
		for out[i] == 0 || (i > 0 && out[i] == out[i-1]) {
			out[i] = 1 + rng.IntN(MaxPhaseParallelism)
		}
	}
	return out
}

// runPhases runs a shape with BuildPhase: phase i runs the job at
// parallelism Phases[i] until its sources reach i+1 phases' share of their
// records, and stops it with savepoint "phase-i" (retried while injected
// failures abort it); phase i+1 starts from that savepoint. Failures are
// injected throughout, with a fresh budget per phase, and the first restore
// of every savepoint fails, so that every phase's recovery restores its
// savepoint again. Every savepoint must hold each key's checkers exactly at
// its sources' positions (nothing after the barrier), and the last phase's
// end is verified as Run verifies a run.
func runPhases(ctx context.Context, rc RunConfig) (RunResult, error) {
	start := time.Now()
	pars := rc.Phases
	if pars == nil {
		pars = PhasesFromSeed(rc.Seed)
	}
	res := RunResult{Phases: pars}
	in := NewInjector(rc.Seed, rc.Rates, rc.Budget)
	v := &Violations{}
	sink := NewSink(v)
	job := jobName(rc)
	var sp savepoint // the one the phase starts from
	for i, p := range pars {
		ph := Phase{Index: i, Parallelism: p}
		if i < len(pars)-1 {
			ph.Gate = NewGate(int64(i+1), int64(len(pars)))
		}
		next, err := runPhase(ctx, rc, ph, sp, in, sink, &res)
		res.Counts, res.Elapsed = in.Counts(), time.Since(start)
		if err != nil {
			return res, fmt.Errorf("job %s: phase %d (parallelism %d, phases %v): %w", job, i, p, pars, err)
		}
		sp = next
	}
	res.Counts, res.Elapsed = in.Counts(), time.Since(start)
	return res, verify(ctx, rc, job, sink, v, &res)
}

// savepoint is a savepoint a phase ended with: its name and checkpoint id;
// with RunConfig.FromCheckpoints, the checkpoint it ended at (no name).
type savepoint struct {
	name string
	id   uint64
}

// newest follows the checkpoints a phase completes: the newest, and
// whether it stored records in flight; flight receives once when one that
// did completes.
type newest struct {
	mu       sync.Mutex
	id       uint64
	inFlight bool
	flight   chan struct{}
}

func (n *newest) listen(e actors.Event) {
	if e.Kind != actors.EventCheckpointCompleted {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e.Checkpoint > n.id {
		n.id, n.inFlight = e.Checkpoint, e.InFlight > 0
	}
	if e.InFlight > 0 {
		select {
		case n.flight <- struct{}{}:
		default:
		}
	}
}

// runPhase runs phase ph from savepoint sp (none for the first phase), and
// returns the savepoint that ended it (none for the last phase, which runs
// to its end).
func runPhase(ctx context.Context, rc RunConfig, ph Phase, sp savepoint, in *Injector, sink *Sink, res *RunResult) (savepoint, error) {
	job := jobName(rc)
	g := topology.New(job)
	rc.Shape.BuildPhase(g, ph, rc.N, rc.Rate, in, sink)
	pt := &phaseTally{phase: ph.Index, savepoint: sp.id, v: sink.v}
	nw := &newest{flight: make(chan struct{}, 1)}
	opts := append(jobOptions(rc, in), actors.WithListener(pt.listen), actors.WithListener(nw.listen))
	switch {
	case ph.Index > 0 && rc.FromCheckpoints:
		opts = append(opts, actors.WithCheckpoint(sp.id))
		in.FailRestoreOf(sp.id)
	case ph.Index > 0:
		opts = append(opts, actors.WithSavepoint(sp.name))
		in.FailRestoreOf(sp.id)
	}
	in.NewPhase()
	in.Enable()
	j, err := startPhase(ctx, rc, g, opts, res)
	if err != nil {
		return savepoint{}, err
	}
	var next savepoint
	if rc.FromCheckpoints {
		next, err = endAtCheckpoint(ctx, j, ph, nw, res)
	} else {
		next, err = endPhase(ctx, rc, j, ph, in, res)
	}
	if ph.Gate == nil {
		in.Disable() // the last phase ran to its end
	}
	pt.addTo(res)
	res.Stale += j.Stats().StaleMessages
	switch {
	case err != nil:
		return savepoint{}, err
	case ph.Index > 0 && pt.restoredSavepoint() == 0:
		what := fmt.Sprintf("savepoint %q (checkpoint %d)", sp.name, sp.id)
		if sp.name == "" {
			what = fmt.Sprintf("checkpoint %d", sp.id)
		}
		return savepoint{}, fmt.Errorf("a task failed while restoring %s, but no recovery restored it again", what)
	case ph.Gate != nil && rc.FromCheckpoints:
		return next, nil
	case ph.Gate != nil:
		return next, checkSavepoint(ctx, rc, next, res)
	}
	return savepoint{}, nil
}

// savepointName is the name of the attempt-th savepoint attempt of a phase:
// "phase-<i>", then "phase-<i>.<attempt>" unless same (see
// RunConfig.SameSavepointName).
func savepointName(same bool, phase, attempt int) string {
	if attempt == 1 || same {
		return fmt.Sprintf("phase-%d", phase)
	}
	return fmt.Sprintf("phase-%d.%d", phase, attempt)
}

// startPhase starts the job of a phase, again while Start fails on an
// injected store error.
func startPhase(ctx context.Context, rc RunConfig, g *topology.Graph, opts []actors.Option, res *RunResult) (*actors.Job, error) {
	for attempt := 1; ; attempt++ {
		j, err := actors.Start(ctx, g, opts...)
		if err == nil {
			return j, nil
		}
		if !errors.Is(err, ErrInjected) || attempt == maxStartAttempts {
			return nil, fmt.Errorf("start (attempt %d): %w", attempt, err)
		}
		res.StartRetries++
		rc.logger().Info("chaos: Start failed on an injected store error; again", "attempt", attempt, "err", err)
	}
}

// endPhase waits for the end of the last phase, or for the sources of any
// other to reach its gate, then stops the job with the phase's savepoint
// (again while it fails) and returns the savepoint's checkpoint id. The
// first upload of an object of the savepoint fails, so that at least one
// attempt fails in every phase, however fast the machine. An attempt that
// fails having completed its savepoint (the job did not stop there:
// actors.ErrNotStopped) is retried under a name of its own, as the error
// says, even with RunConfig.SameSavepointName: a savepoint is never
// overwritten. Any other failed attempt must leave its savepoint
// incomplete.
func endPhase(ctx context.Context, rc RunConfig, j *actors.Job, ph Phase, in *Injector, res *RunResult) (savepoint, error) {
	if ph.Gate == nil {
		return savepoint{}, j.Wait()
	}
	select {
	case <-ph.Gate.Reached():
	case <-j.Done():
		return savepoint{}, fmt.Errorf("the job ended before its sources reached the phase's gate: %w", j.Wait())
	case <-ctx.Done():
		j.Stop()
		return savepoint{}, context.Cause(ctx)
	}
	defer in.FailPutUnder("")
	same := rc.SameSavepointName
	for attempt := 1; ; attempt++ {
		name := savepointName(same, ph.Index, attempt)
		if _, failed := in.PutFailed(); !failed { // not yet: the attempts before failed before storing anything
			in.FailPutUnder(snapshots.SavepointPrefix(jobName(rc), name))
		}
		id, err := j.StopWithSavepoint(ctx, name)
		if err == nil {
			res.Savepoints++
			switch failed, ok := in.PutFailed(); {
			case !ok:
				return savepoint{}, fmt.Errorf("StopWithSavepoint(%s), attempt %d, returned checkpoint %d, but stored no object", name, attempt, id)
			case failed == id:
				return savepoint{}, fmt.Errorf("StopWithSavepoint(%s), attempt %d, returned checkpoint %d although the upload of one of its objects failed", name, attempt, id)
			}
			if werr := j.Wait(); !errors.Is(werr, actors.ErrStopped) {
				return savepoint{}, fmt.Errorf("StopWithSavepoint(%s) returned checkpoint %d, but the job ended with %v, want ErrStopped", name, id, werr)
			}
			return savepoint{name: name, id: id}, nil
		}
		res.SavepointsFailed++
		rc.logger().Info("chaos: StopWithSavepoint failed; again", "savepoint", name, "attempt", attempt, "err", err)
		select {
		case <-j.Done():
			return savepoint{}, fmt.Errorf("StopWithSavepoint(%s), attempt %d: %w; the job ended: %w", name, attempt, err, j.Wait())
		default:
		}
		switch complete, serr := snapshots.NewCheckpoints(rc.Store, jobName(rc), nil).SavepointExists(ctx, name); {
		case serr != nil:
			j.Stop()
			return savepoint{}, fmt.Errorf("StopWithSavepoint(%s), attempt %d: %w; is its savepoint complete: %w", name, attempt, err, serr)
		case complete && !errors.Is(err, actors.ErrNotStopped):
			j.Stop()
			return savepoint{}, fmt.Errorf("StopWithSavepoint(%s), attempt %d, failed, but its savepoint is complete: %w", name, attempt, err)
		case complete:
			same = false
		}
		if attempt == maxSavepointAttempts {
			j.Stop()
			return savepoint{}, fmt.Errorf("StopWithSavepoint(%s) failed %d times, the last with: %w", name, attempt, err)
		}
	}
}

// endAtCheckpoint waits for the end of the last phase; for any other, for
// a checkpoint that stored records in flight (or for its sources to reach
// its gate), then stops the job and returns its newest checkpoint, which
// the next phase starts from (RunConfig.FromCheckpoints).
func endAtCheckpoint(ctx context.Context, j *actors.Job, ph Phase, nw *newest, res *RunResult) (savepoint, error) {
	if ph.Gate == nil {
		return savepoint{}, j.Wait()
	}
	select {
	case <-nw.flight:
	case <-ph.Gate.Reached():
		// The sources wait at the gate: take a checkpoint (again while
		// injected failures abort it), so that the phase has one.
		for attempt := 1; ; attempt++ {
			_, err := j.Checkpoint(ctx)
			if err == nil {
				break
			}
			if attempt == maxSavepointAttempts {
				j.Stop()
				return savepoint{}, fmt.Errorf("the sources reached the gate, and a checkpoint failed %d times, the last with: %w", attempt, err)
			}
		}
	case <-j.Done():
		return savepoint{}, fmt.Errorf("the job ended before the phase's end: %w", j.Wait())
	case <-ctx.Done():
		j.Stop()
		return savepoint{}, context.Cause(ctx)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		return savepoint{}, fmt.Errorf("Stop returned %v, want ErrStopped", err)
	}
	nw.mu.Lock()
	defer nw.mu.Unlock()
	if nw.id == 0 {
		return savepoint{}, errors.New("the phase completed no checkpoint")
	}
	res.CheckpointRescales++
	if nw.inFlight {
		res.InFlightRescales++
	}
	return savepoint{id: nw.id}, nil
}

// checkSavepoint checks savepoint sp: every
// checker holds, for every key, exactly the last seq that the sources'
// splits had produced (the snapshot boundary: no record after the barrier
// reached any state, and none before it is missing).
func checkSavepoint(ctx context.Context, rc RunConfig, sp savepoint, res *RunResult) error {
	name := sp.name
	rp, err := snapshots.NewCheckpoints(rc.Store, jobName(rc), nil).LoadSavepoint(ctx, name)
	if err != nil {
		return err
	}
	if got := rp.Manifest.GetCheckpointId(); got != sp.id {
		return fmt.Errorf("savepoint %s is checkpoint %d, but StopWithSavepoint returned %d", name, got, sp.id)
	}
	produced := map[int64]int64{} // key -> last seq produced
	for _, st := range rp.States {
		if len(rc.Shape.Checkers) == 0 {
			break // nothing to compare with
		}
		for _, b := range st.GetSplits() {
			key, next, err := DecodeKeySplit(b)
			if err != nil {
				return fmt.Errorf("savepoint %s: task %s: %w", name, st.GetTaskId(), err)
			}
			if _, dup := produced[key]; dup {
				return fmt.Errorf("savepoint %s: the split of key %d is held twice", name, key)
			}
			if next > 1 {
				produced[key] = next - 1
			}
		}
	}
	var errs []error
	for _, op := range rc.Shape.Checkers {
		got := map[int64]int64{}
		for _, st := range rp.States {
			if st.GetOperator() != op {
				continue
			}
			m, err := topology.DecodeValueState[int64, int64](st, "last")
			if err != nil {
				errs = append(errs, fmt.Errorf("savepoint %s: %w", name, err))
			}
			for k, s := range m {
				got[k] = s
			}
		}
		if d := Diff(got, produced); d != "" {
			errs = append(errs, fmt.Errorf("savepoint %s: the state of %s is not at the sources' positions: %s", name, op, d))
		}
	}
	if rc.Shape.CheckSavepoint != nil {
		errs = append(errs, rc.Shape.CheckSavepoint(name, rp.States, res))
	}
	return errors.Join(errs...)
}

// phaseTally counts the events of one phase's job and checks its restores:
// a phase started from a savepoint restores that savepoint or a checkpoint
// of its own, never an older one nor nothing.
type phaseTally struct {
	tally
	phase     int
	savepoint uint64
	v         *Violations

	mu                sync.Mutex
	savepointRestores int
}

func (t *phaseTally) listen(e actors.Event) {
	t.tally.listen(e)
	if t.savepoint == 0 || (e.Kind != actors.EventRestoring && e.Kind != actors.EventRunning) {
		return
	}
	if e.Checkpoint < t.savepoint {
		t.v.Add("phase %d, started from the savepoint of checkpoint %d: %s from checkpoint %d", t.phase, t.savepoint, e.Kind, e.Checkpoint)
	}
	if e.Kind == actors.EventRestoring && e.Checkpoint == t.savepoint {
		t.mu.Lock()
		t.savepointRestores++
		t.mu.Unlock()
	}
}

// restoredSavepoint returns how many recoveries restored the savepoint.
func (t *phaseTally) restoredSavepoint() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.savepointRestores
}

func (t *phaseTally) addTo(res *RunResult) {
	t.tally.addTo(res)
	t.mu.Lock()
	defer t.mu.Unlock()
	res.SavepointRestores += t.savepointRestores
}
