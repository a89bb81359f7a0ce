package actors_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// testTimeout bounds every wait in these tests.
const testTimeout = 2 * time.Minute

// stopJob stops job and fails t unless it stopped as Stop stops a job.
func stopJob(t *testing.T, job *actors.Job) {
	t.Helper()
	if err := job.Stop(); err != nil && !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	if err := job.Wait(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Wait after Stop = %v", err)
	}
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("SNAPFLOW_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// kv is a key and its running sum.
type kv struct{ Key, Sum int64 }

// latest is an idempotent sink: the newest sum per key.
type latest struct {
	mu sync.Mutex
	m  map[int64]int64
}

func newLatest() *latest { return &latest{m: map[int64]int64{}} }

func (l *latest) put(v kv) error {
	l.mu.Lock()
	l.m[v.Key] = v.Sum
	l.mu.Unlock()
	return nil
}

func (l *latest) snapshot() map[int64]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]int64, len(l.m))
	for k, v := range l.m {
		out[k] = v
	}
	return out
}

// failures panics once at each chosen record value seen by an operator.
type failures struct {
	at       map[int64]*atomic.Bool
	injected atomic.Int64
}

func newFailures(values ...int64) *failures {
	f := &failures{at: map[int64]*atomic.Bool{}}
	for _, v := range values {
		f.at[v] = &atomic.Bool{}
	}
	return f
}

func (f *failures) maybePanic(task string, v int64) {
	if f == nil {
		return
	}
	if b := f.at[v]; b != nil && b.CompareAndSwap(false, true) {
		f.injected.Add(1)
		panic(fmt.Sprintf("injected failure in %s on record %d", task, v))
	}
}

// keyedSum adds a keyed running-sum operator: state "total" per key.
func keyedSum(s topology.KeyedStream[int64, int64], name string, p int, fail *failures) topology.Stream[kv] {
	return topology.Process(s, name, func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, kv] {
		total := topology.Value[int64](ks, "total")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[kv]) error {
			fail.maybePanic(ctx.TaskID(), v)
			t, _ := total.Get()
			t += v
			total.Set(t)
			out.Emit(kv{ctx.Key(), t})
			return nil
		}
	}, topology.Parallelism(p))
}

// events records a job's events and lets a test wait for one.
type events struct {
	mu   sync.Mutex
	all  []actors.Event
	subs []chan actors.Event
}

func (e *events) listen(ev actors.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.all = append(e.all, ev)
	for _, c := range e.subs {
		select {
		case c <- ev:
		default:
		}
	}
}

// subscribe returns a channel receiving the events from now on.
func (e *events) subscribe() chan actors.Event {
	c := make(chan actors.Event, 1024)
	e.mu.Lock()
	e.subs = append(e.subs, c)
	e.mu.Unlock()
	return c
}

func (e *events) count(k actors.EventKind) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.all {
		if ev.Kind == k {
			n++
		}
	}
	return n
}

func (e *events) of(k actors.EventKind) []actors.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []actors.Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// waitFor waits for an event satisfying ok on c.
func waitFor(t testing.TB, c chan actors.Event, what string, ok func(actors.Event) bool) actors.Event {
	t.Helper()
	timer := time.NewTimer(testTimeout)
	defer timer.Stop()
	for {
		select {
		case ev := <-c:
			if ok(ev) {
				return ev
			}
		case <-timer.C:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// finalTotals decodes the "total" state of every task of operator from the
// newest complete checkpoint, which must be the final one.
func finalTotals(t testing.TB, store snapshots.Store, job, operator string) map[int64]int64 {
	t.Helper()
	cps := snapshots.NewCheckpoints(store, job, nil)
	rp, err := cps.LoadLatest(context.Background())
	if err == nil {
		err = topology.ExpandDiskState(context.Background(), cps, rp, t.TempDir())
	}
	if err != nil || rp == nil {
		t.Fatalf("load the final checkpoint: %v (%v)", err, rp)
	}
	if !rp.Manifest.Final {
		t.Fatalf("newest checkpoint %d is not the final one", rp.Manifest.CheckpointId)
	}
	out := map[int64]int64{}
	for id, st := range rp.States {
		if st.Operator != operator {
			continue
		}
		m, err := topology.DecodeValueState[int64, int64](st, "total")
		if err != nil {
			t.Fatalf("decode %s: %v", id, err)
		}
		for k, v := range m {
			if _, dup := out[k]; dup {
				t.Fatalf("key %d held by two tasks", k)
			}
			out[k] = v
		}
	}
	return out
}

// paritySum is the sum of the values of one parity (0 even, 1 odd) in 1..n.
func paritySum(n, parity int64) int64 {
	var s int64
	for v := int64(1); v <= n; v++ {
		if v%2 == parity {
			s += v
		}
	}
	return s
}

func waitJob(t testing.TB, j *actors.Job) error {
	t.Helper()
	select {
	case <-j.Done():
		return j.Wait()
	case <-time.After(testTimeout):
		t.Fatal("job did not end in time")
		return nil
	}
}

func textLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// gatedParity is a gated source of 1..n for tests that move its gate.
type gatedParity struct {
	n int64
	g *testsrc.Gate
}

func testsrcGate(n int64) *gatedParity { return &gatedParity{n: n, g: testsrc.NewGate(1000)} }

func (gp *gatedParity) source(g *topology.Graph) topology.Stream[int64] {
	return topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: gp.n, Gate: gp.g} })
}

// twoCheckpoints takes a checkpoint once the gated source has emitted 1..1000,
// and another once it has emitted 1..2000, and returns their ids.
func twoCheckpoints(t testing.TB, j *actors.Job, gate *testsrc.Gate) (older, newer uint64) {
	t.Helper()
	for i, limit := range []int64{1000, 2000} {
		gate.SetLimit(limit)
		gate.WaitReached(t, limit)
		id, err := j.Checkpoint(context.Background())
		if err != nil {
			t.Fatalf("checkpoint after %d: %v", limit, err)
		}
		if i == 0 {
			older = id
		} else {
			newer = id
		}
	}
	return older, newer
}

// stateKey returns the key of task's state object in checkpoint id of job,
// as its manifest names it (state keys carry the epoch that wrote them).
func stateKey(t testing.TB, store snapshots.Store, job string, id uint64, task string) string {
	t.Helper()
	return stateKeyIn(t, store, snapshots.ManifestKey(job, id), task)
}

// savepointStateKey is stateKey for savepoint name of job.
func savepointStateKey(t testing.TB, store snapshots.Store, job, name, task string) string {
	t.Helper()
	return stateKeyIn(t, store, snapshots.SavepointManifestKey(job, name), task)
}

func stateKeyIn(t testing.TB, store snapshots.Store, manifest, task string) string {
	t.Helper()
	return snapshotstest.StateHandle(t, store, manifest, task).GetKey()
}

// gatedFileSinkJob is a gated split source of 0..n-1 (one task, so that the
// gate says exactly which records precede a barrier), a keyed count per
// v%13 (two tasks) and an exactly-once file sink "out" (two tasks) in dir.
// The count panics once on each record of failAt (0: never).
func gatedFileSinkJob(name string, n int64, dir string, gate *testsrc.Gate, failAt ...int64) *topology.Graph {
	g := topology.New(name)
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i }, gate, topology.Parallelism(1))
	failed := map[int64]*atomic.Bool{}
	for _, v := range failAt {
		if v != 0 {
			failed[v] = &atomic.Bool{}
		}
	}
	keyed := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 13 }), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			c := topology.Value[int64](ks, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				if f := failed[v]; f != nil && f.CompareAndSwap(false, true) {
					panic("injected: the count fails once on record " + strconv.FormatInt(v, 10))
				}
				x, _ := c.Get()
				c.Set(x + 1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(2))
	topology.TwoPhaseCommitSink(keyed, "out", filesink.New(dir, filesink.Lines(func(v int64) string { return strconv.FormatInt(v, 10) })),
		topology.Parallelism(2))
	return g
}

// committedOnce checks the committed part files of dir: no value twice,
// every value of 0..committed-1 present (the output the job committed for
// sure), none at or above below (records no checkpoint completed for).
func committedOnce(t *testing.T, dir string, committed, below int64) {
	t.Helper()
	seen, _ := readParts(t, dir)
	var dup, above, missing []int64
	for v, c := range seen {
		if c > 1 {
			dup = append(dup, v)
		}
		if v >= below {
			above = append(above, v)
		}
	}
	for v := range committed {
		if seen[v] == 0 {
			missing = append(missing, v)
		}
	}
	if len(dup) > 0 || len(above) > 0 || len(missing) > 0 {
		t.Fatalf("committed output: %d values twice or more (%v), %d at or above %d (%v), %d of 0..%d missing (%v)",
			len(dup), head(dup), len(above), below, head(above), len(missing), committed-1, head(missing))
	}
}
