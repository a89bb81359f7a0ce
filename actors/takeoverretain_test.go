package actors_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// staleStore is holder A's view of the store, with the pauses of a holder
// that stops at the wrong moments: the first listing of the checkpoints
// after armList waits for listGo; the manifest of checkpoint late waits
// for lateGo before it is written and for lateDone after (so that A's
// check after the write comes later still).
type staleStore struct {
	snapshots.Store
	job              string
	armed            atomic.Bool
	listAt, listGo   chan struct{}
	late             uint64
	lateAt, lateGo   chan struct{}
	landed, lateDone chan struct{}
	opened           sync.Map // the channels released, by address
}

// release closes ch, a channel the test opens, once.
func (s *staleStore) release(ch chan struct{}) {
	if _, done := s.opened.LoadOrStore(ch, true); !done {
		close(ch)
	}
}

// releaseAll lets a holder stopped by s go on, when a test ends early.
func (s *staleStore) releaseAll() {
	for _, ch := range []chan struct{}{s.listGo, s.lateGo, s.lateDone} {
		s.release(ch)
	}
}

func newStaleStore(s snapshots.Store, job string) *staleStore {
	return &staleStore{Store: s, job: job, listAt: make(chan struct{}), listGo: make(chan struct{}),
		lateAt: make(chan struct{}), lateGo: make(chan struct{}), landed: make(chan struct{}), lateDone: make(chan struct{})}
}

func (s *staleStore) List(ctx context.Context, prefix string) ([]string, error) {
	if prefix == snapshots.CheckpointsPrefix(s.job) && s.armed.CompareAndSwap(true, false) {
		close(s.listAt)
		<-s.listGo
	}
	return s.Store.List(ctx, prefix)
}

func (s *staleStore) Create(ctx context.Context, key string, data []byte) error {
	if s.late == 0 || key != snapshots.ManifestKey(s.job, s.late) {
		return s.Store.(snapshots.Creator).Create(ctx, key, data)
	}
	close(s.lateAt)
	<-s.lateGo
	err := s.Store.(snapshots.Creator).Create(ctx, key, data)
	close(s.landed)
	<-s.lateDone
	return err
}

// sharedGroupJob is gatedFileSinkJob whose first 1000 records count 50
// keys of their own, which later records never touch: the key groups of
// those keys are stored once, by the first checkpoint, and every later
// incremental checkpoint references that object.
func sharedGroupJob(name string, n int64, dir string, gate *testsrc.Gate, failAt int64) *topology.Graph {
	g := topology.New(name)
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i }, gate, topology.Parallelism(1))
	var failed atomic.Bool
	key := func(v int64) int64 {
		if v < 1000 {
			return 1000 + v%50
		}
		return v % 13
	}
	keyed := topology.Process(topology.KeyBy(src, key), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			c := topology.Value[int64](ks, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				if failAt > 0 && v == failAt && failed.CompareAndSwap(false, true) {
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

// waitClosed waits for ch to close, failing t after a minute.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(time.Minute):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestTakeOverPausedRetentionKeepsRestorePoint: holder A completes
// checkpoints 1 and 2 (incremental, sharing one object), and its retention
// after checkpoint 2 passes its lease check and pauses before it lists the
// checkpoints. A's checkpoint 3 is in flight; B takes the job over and
// restores checkpoint 2; then A's manifest 3 lands (void: B never saw it),
// and A's retention lists. A must not delete checkpoint 2, B's restore
// point. B then completes a checkpoint of its own, fails, restores that
// checkpoint, and ends; the file sink's output holds every record once.
func TestTakeOverPausedRetentionKeepsRestorePoint(t *testing.T) {
	const n = 6000
	job := "paused-retention"
	out := t.TempDir()
	raw, err := snapshots.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	stale := newStaleStore(raw, job)
	t.Cleanup(stale.releaseAll)
	retained := make(chan error, 8)
	var waitRetained func(uint64) error
	var want atomic.Uint64
	faults := &actorstest.Faults{Retained: func(id uint64, err error) {
		if id == want.Load() {
			retained <- err
		}
	}}
	waitRetained = func(id uint64) error {
		t.Helper()
		select {
		case err := <-retained:
			return err
		case <-time.After(time.Minute):
			t.Fatalf("timed out waiting for the retention after checkpoint %d", id)
			return nil
		}
	}
	opts := func(s snapshots.Store, ev *events) []actors.Option {
		return []actors.Option{actors.WithStore(s), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)),
			actors.WithCheckpointInterval(0), actors.WithListener(ev.listen), actors.WithRetainedCheckpoints(1),
			actors.WithIncrementalCheckpoints(0), actors.WithLeaseTimeout(time.Hour)}
	}

	gate := testsrc.NewGate(1000)
	var evA events
	a, err := actors.Start(context.Background(), sharedGroupJob(job, n, out, gate, 0),
		append(opts(stale, &evA), actorstest.WithFaults(faults))...)
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	want.Store(1)
	first, err := a.Checkpoint(context.Background())
	if err != nil || first != 1 {
		t.Fatalf("A's first checkpoint: %d, %v", first, err)
	}
	if err := waitRetained(first); err != nil {
		t.Fatalf("A's retention after checkpoint %d: %v", first, err)
	}
	gate.SetLimit(2000)
	gate.WaitReached(t, 2000)
	want.Store(2)
	stale.armed.Store(true)
	restorePoint, err := a.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, stale.listAt, "A's retention to list") // it checked its lease

	// A's checkpoint 3 is in flight across the takeover.
	stale.late = restorePoint + 1
	gate.SetLimit(3000)
	gate.WaitReached(t, 3000)
	lateErr := make(chan error, 1)
	go func() { _, err := a.Checkpoint(context.Background()); lateErr <- err }()
	waitClosed(t, stale.lateAt, "A's manifest of checkpoint 3")

	gateB := testsrc.NewGate(2000)
	var evB events
	running := evB.subscribe()
	b, err := actors.Start(context.Background(), sharedGroupJob(job, n, out, gateB, 3500),
		append(opts(raw, &evB), actors.WithTakeOver())...)
	if err != nil {
		t.Fatal(err)
	}
	if ev := waitFor(t, running, "B to run", func(ev actors.Event) bool { return ev.Kind == actors.EventRunning }); ev.Checkpoint != restorePoint {
		t.Fatalf("B runs from checkpoint %d, want %d", ev.Checkpoint, restorePoint)
	}
	stale.release(stale.lateGo) // A's manifest 3 lands, void
	waitClosed(t, stale.landed, "A's manifest 3 to land")
	stale.release(stale.listGo) // A's retention lists
	err = waitRetained(restorePoint)
	t.Logf("A's retention after the takeover: %v", err)
	if _, gerr := raw.Get(context.Background(), snapshots.ManifestKey(job, restorePoint)); gerr != nil {
		t.Fatalf("B's restore point, checkpoint %d, after A's retention: %v", restorePoint, gerr)
	}
	if !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Errorf("A's retention after the takeover: %v, want ErrLeaseLost", err)
	}
	stale.release(stale.lateDone)
	if err := <-lateErr; err == nil {
		t.Error("A's checkpoint 3 completed after the takeover")
	}
	if err := waitJob(t, a); !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Errorf("A's Wait: %v, want ErrLeaseLost", err)
	}

	// B checkpoints (its first id may be taken by A's void manifest), fails
	// at record 3500 and restores its own checkpoint.
	gateB.SetLimit(3000)
	gateB.WaitReached(t, 3000)
	var own uint64
	for attempt := 0; own == 0; attempt++ {
		id, err := b.Checkpoint(context.Background())
		switch {
		case err == nil:
			own = id
		case attempt == 3:
			t.Fatalf("B's checkpoint: %v", err)
		default:
			t.Logf("B's checkpoint: %v", err)
		}
	}
	gateB.SetLimit(n)
	if err := waitJob(t, b); err != nil {
		t.Fatalf("B's Wait: %v", err)
	}
	r := evB.of(actors.EventRestoring)
	if len(r) == 0 || r[len(r)-1].Checkpoint != own {
		t.Fatalf("B's restores %+v, want its own checkpoint %d after the failure", r, own)
	}
	seen, _ := readParts(t, out)
	exactlyOnce(t, seen, n)
}
