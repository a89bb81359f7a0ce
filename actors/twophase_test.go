package actors_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// readParts returns how many times each value appears in the committed
// part files of dir, and the names of the files a reader would not see
// (hidden: in progress).
func readParts(t *testing.T, dir string) (map[int64]int, []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	var hidden []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			hidden = append(hidden, e.Name())
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			v, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", e.Name(), sc.Text(), err)
			}
			seen[v]++
		}
		f.Close()
	}
	return seen, hidden
}

// exactlyOnce checks that every value of 0..n-1 appears once in seen.
func exactlyOnce(t *testing.T, seen map[int64]int, n int64) {
	t.Helper()
	var missing, dup []int64
	for v := range n {
		switch c := seen[v]; {
		case c == 0:
			missing = append(missing, v)
		case c > 1:
			dup = append(dup, v)
		}
	}
	if len(missing) > 0 || len(dup) > 0 || int64(len(seen)) != n {
		t.Fatalf("committed output: %d values missing (first %v), %d duplicated (first %v), %d distinct; want 0..%d once each",
			len(missing), head(missing), len(dup), head(dup), len(seen), n-1)
	}
}

func head(v []int64) []int64 { return v[:min(len(v), 5)] }

// fileSinkJob is a job of 0..n-1 through a keyed stage (a shuffle) into
// an exactly-once file sink of parallelism 2 in dir; wrap, when not nil,
// wraps each sink task.
func fileSinkJob(name string, n int64, dir string, wrap func(topology.TwoPhaseSink[int64]) topology.TwoPhaseSink[int64]) *topology.Graph {
	g := topology.New(name)
	src := topology.Generate(g, "source", n, func(i int64) int64 { return i }, topology.Parallelism(2))
	keyed := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 13 }), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			c := topology.Value[int64](ks, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				x, _ := c.Get()
				c.Set(x + 1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(2))
	newSink := filesink.New(dir, filesink.Lines(func(v int64) string { return strconv.FormatInt(v, 10) }))
	topology.TwoPhaseCommitSink(keyed, "out", func(subtask, p int) topology.TwoPhaseSink[int64] {
		s := newSink(subtask, p)
		if wrap != nil {
			s = wrap(s)
		}
		return s
	}, topology.Parallelism(2))
	return g
}

// TestFileSinkExactlyOnceUnderFailures runs the file sink job with seeded
// task panics (in the source, the keyed stage and the sink) at 20 ms
// checkpoints: the committed files hold every record exactly once, and no
// in-progress file is left.
func TestFileSinkExactlyOnceUnderFailures(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const n = 60_000
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(seed, 11))
	var mu sync.Mutex
	var failures atomic.Int64
	faults := &actorstest.Faults{Process: func(task string) {
		mu.Lock()
		fail := failures.Load() < 8 && rng.IntN(40) == 0
		mu.Unlock()
		if fail {
			failures.Add(1)
			panic("injected failure in " + task)
		}
	}}
	var ev events
	err := actors.Run(context.Background(), fileSinkJob("filesink", n, dir, nil), actors.WithStore(snapshots.NewMem()),
		actors.WithLogger(testLogger(t)), actorstest.WithFaults(faults), actors.WithListener(ev.listen),
		actors.WithCheckpointInterval(20*time.Millisecond),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 100, Window: time.Hour}))
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	seen, hidden := readParts(t, dir)
	exactlyOnce(t, seen, n)
	if len(hidden) > 0 {
		t.Errorf("in-progress files left: %v", hidden)
	}
	t.Logf("%d failures injected, %d checkpoints", failures.Load(), ev.count(actors.EventCheckpointCompleted))
}

// faultySink wraps a TwoPhaseSink: commit fails, with failCommit, before
// committing.
type faultySink struct {
	topology.TwoPhaseSink[int64]
	failCommit func(s *faultySink) error
}

func (s *faultySink) Commit(ctx context.Context, txn []byte) error {
	if err := s.failCommit(s); err != nil {
		return err
	}
	return s.TwoPhaseSink.Commit(ctx, txn)
}

// TestFileSinkCommitFailures: a task that fails between a checkpoint's
// completion and its commit (the commit keeps failing until the task
// fails) is restored, and the restore commits what the checkpoint
// pre-committed; a commit that fails a few times is retried without a
// failure; one that can never succeed fails the job, with ErrCommit, rather
// than losing the records.
func TestFileSinkCommitFailures(t *testing.T) {
	const n = 20_000
	opts := func(t *testing.T, ev *events) []actors.Option {
		return []actors.Option{actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen),
			actors.WithCheckpointInterval(20 * time.Millisecond),
			actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 5, Window: time.Hour})}
	}
	t.Run("fails until the task fails", func(t *testing.T) {
		dir := t.TempDir()
		// The first sink task to commit fails every try, until it fails;
		// every other commit succeeds.
		var mu sync.Mutex
		var owner *faultySink
		failed := 0
		wrap := func(s topology.TwoPhaseSink[int64]) topology.TwoPhaseSink[int64] {
			return &faultySink{TwoPhaseSink: s, failCommit: func(s *faultySink) error {
				mu.Lock()
				defer mu.Unlock()
				if owner == nil {
					owner = s
				}
				if s == owner && failed < topology.CommitRetries {
					failed++
					return fmt.Errorf("injected: commit try %d fails", failed)
				}
				return nil
			}}
		}
		var ev events
		if err := actors.Run(context.Background(), fileSinkJob("commit-window", n, dir, wrap), opts(t, &ev)...); err != nil {
			t.Fatal(err)
		}
		if f := ev.of(actors.EventTaskFailed); len(f) != 1 || f[0].Cause != actors.CauseCommit {
			t.Errorf("task failures %+v, want the 1 of the commit, with cause %q", f, actors.CauseCommit)
		}
		seen, hidden := readParts(t, dir)
		exactlyOnce(t, seen, n)
		if len(hidden) > 0 {
			t.Errorf("in-progress files left: %v", hidden)
		}
	})
	t.Run("retried", func(t *testing.T) {
		dir := t.TempDir()
		var calls atomic.Int64
		wrap := func(s topology.TwoPhaseSink[int64]) topology.TwoPhaseSink[int64] {
			return &faultySink{TwoPhaseSink: s, failCommit: func(*faultySink) error {
				if calls.Add(1)%3 == 1 {
					return errors.New("injected: a commit fails once")
				}
				return nil
			}}
		}
		var ev events
		if err := actors.Run(context.Background(), fileSinkJob("commit-retried", n, dir, wrap), opts(t, &ev)...); err != nil {
			t.Fatal(err)
		}
		if ev.count(actors.EventTaskFailed) != 0 {
			t.Errorf("%d task failures: a commit that fails once must be retried", ev.count(actors.EventTaskFailed))
		}
		seen, _ := readParts(t, dir)
		exactlyOnce(t, seen, n)
	})
	t.Run("never", func(t *testing.T) {
		dir := t.TempDir()
		wrap := func(s topology.TwoPhaseSink[int64]) topology.TwoPhaseSink[int64] {
			return &faultySink{TwoPhaseSink: s, failCommit: func(*faultySink) error { return errors.New("injected: the broker refuses every commit") }}
		}
		var ev events
		err := actors.Run(context.Background(), fileSinkJob("commit-never", n, dir, wrap), opts(t, &ev)...)
		var je *actors.JobError
		if !errors.As(err, &je) || !errors.Is(err, topology.ErrCommit) || !strings.Contains(err.Error(), "the broker refuses every commit") {
			t.Fatalf("job: %v, want a JobError wrapping ErrCommit with the sink's error", err)
		}
	})
}

// TestFileSinkAcrossSavepoints: a file sink's output stays exactly once
// through a savepoint the job runs on after (it does not commit), a
// stop-with-savepoint (which commits), and a restart from it at another
// parallelism of the other operators.
func TestFileSinkAcrossSavepoints(t *testing.T) {
	const n = 30_000
	dir := t.TempDir()
	store := snapshots.NewMem()
	build := func(par int, gate *testsrc.Gate) *topology.Graph {
		g := topology.New("filesink-savepoints")
		src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i }, gate, topology.Parallelism(par))
		keyed := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 7 }), "count",
			func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
				c := topology.Value[int64](ks, "n")
				return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
					x, _ := c.Get()
					c.Set(x + 1)
					out.Emit(v)
					return nil
				}
			}, topology.Parallelism(par))
		topology.TwoPhaseCommitSink(keyed, "out", filesink.New(dir, filesink.Lines(func(v int64) string { return strconv.FormatInt(v, 10) })),
			topology.Parallelism(2))
		return g
	}
	gate := testsrc.NewGate(n / 3)
	j, err := actors.Start(context.Background(), build(2, gate), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/3)
	if _, err := j.Savepoint(context.Background(), "mid"); err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(2 * n / 3)
	gate.WaitReached(t, 2*n/3)
	stopWithSavepoint(t, j, "stop")
	j, err = actors.Start(context.Background(), build(3, testsrc.NewGate(n)), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(20*time.Millisecond), actors.WithSavepoint("stop"))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	seen, hidden := readParts(t, dir)
	exactlyOnce(t, seen, n)
	if len(hidden) > 0 {
		t.Errorf("in-progress files left: %v", hidden)
	}
}

// TestSavepointIsARecoveryPoint: a savepoint the job runs on after is also
// written as a checkpoint, so a failure right after it restores the
// savepoint, not an older checkpoint: the sink commits at the savepoint and
// its output stays exactly once.
func TestSavepointIsARecoveryPoint(t *testing.T) {
	const n = 20_000
	dir := t.TempDir()
	gate := testsrc.NewGate(n / 2)
	var fail atomic.Bool
	g := topology.New("savepoint-recovery")
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i }, gate, topology.Parallelism(2))
	topology.TwoPhaseCommitSink(src, "out", filesink.New(dir, filesink.Lines(func(v int64) string { return strconv.FormatInt(v, 10) })),
		topology.Parallelism(2))
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithListener(ev.listen), actors.WithCheckpointInterval(0),
		actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
			if task == "out#0" && fail.CompareAndSwap(true, false) {
				panic("injected: out#0 fails after the savepoint")
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, n/2)
	id, err := j.Savepoint(context.Background(), "mid")
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRestoring); len(r) != 1 || r[0].Checkpoint != id {
		t.Fatalf("restores %+v, want one, from the savepoint's checkpoint %d", r, id)
	}
	seen, hidden := readParts(t, dir)
	exactlyOnce(t, seen, n)
	if len(hidden) > 0 {
		t.Errorf("in-progress files left: %v", hidden)
	}
}
