package actors_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// panickyClose is a source whose Close panics.
type panickyClose struct{ testsrc.Gated }

func (p *panickyClose) Close() error { panic("close panics") }

// TestPanickingCloseDoesNotHang: a source whose Close panics must not wedge
// the restart of its task.
func TestPanickingCloseDoesNotHang(t *testing.T) {
	const n = 20_000
	gate := testsrc.NewGate(n)
	g := topology.New("close")
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &panickyClose{testsrc.Gated{N: n, Gate: gate}} })
	out := newLatest()
	store := snapshots.NewMem()
	topology.Sink(keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % 2 }), "sum", 2, newFailures(5000)), "sink", out.put)
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "close", "sum"), parityWant(n))
}

// blockingStore blocks the first Put whose key contains every string of
// match until release.
type blockingStore struct {
	snapshots.Store
	match   []string
	once    sync.Once
	entered chan struct{}
	release chan struct{}
}

func newBlockingStore(s snapshots.Store, match ...string) *blockingStore {
	return &blockingStore{Store: s, match: match, entered: make(chan struct{}), release: make(chan struct{})}
}

func (b *blockingStore) Put(ctx context.Context, key string, data []byte) error {
	if !slices.ContainsFunc(b.match, func(m string) bool { return !strings.Contains(key, m) }) {
		first := false
		b.once.Do(func() { first = true })
		if first {
			close(b.entered)
			<-b.release
		}
	}
	return b.Store.Put(ctx, key, data)
}

// TestManualCheckpointFailsOnFailover: a manual checkpoint in flight when a
// task fails is answered with ErrFailover, not left hanging.
func TestManualCheckpointFailsOnFailover(t *testing.T) {
	const n = 20_000
	gate := testsrc.NewGate(1000)
	g, _ := paritySumJob("manual", n, gate, newFailures(1500))
	store := newBlockingStore(snapshots.NewMem(), "chk-00000000000000000001/", "/sum#0.state")
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	res := make(chan error, 1)
	go func() { _, err := j.Checkpoint(context.Background()); res <- err }()
	<-store.entered  // checkpoint 1 is uploading
	gate.SetLimit(n) // record 1500 fails a task
	select {
	case err := <-res:
		if !errors.Is(err, coordinator.ErrFailover) {
			t.Fatalf("Checkpoint: %v, want ErrFailover", err)
		}
	case <-time.After(testTimeout):
		t.Fatal("the manual checkpoint was never answered")
	}
	close(store.release)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
}

// TestFailoverWaitsForManifest: a failure while a manifest is being written
// waits for the write; the restore then uses that checkpoint.
func TestFailoverWaitsForManifest(t *testing.T) {
	const n = 20_000
	gate := testsrc.NewGate(1000)
	g, out := paritySumJob("manifest", n, gate, newFailures(1500))
	mem := snapshots.NewMem()
	store := newBlockingStore(mem, "_manifest")
	var ev events
	failed := ev.subscribe()
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	go func() { _, _ = j.Checkpoint(context.Background()) }()
	<-store.entered // the manifest of checkpoint 1 is being written
	gate.SetLimit(n)
	waitFor(t, failed, "the failure", func(e actors.Event) bool { return e.Kind == actors.EventTaskFailed })
	close(store.release)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRestoring); len(r) != 1 || r[0].Checkpoint != 1 {
		t.Fatalf("restores %+v, want one from checkpoint 1, whose manifest landed", r)
	}
	// The failover does not report checkpoint 1 aborted: it is complete.
	if completed, aborted := outcomes(t, &ev); !completed[1] || aborted[1] {
		t.Fatalf("checkpoint 1: completed %v, aborted %v; want completed only", completed, aborted)
	}
	assertEqualMaps(t, "final state", finalTotals(t, mem, "manifest", "sum"), parityWant(n))
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// TestListenerPanicFailsTheJob: a panic while handling a failure (here in
// the listener) fails the job instead of restarting it silently.
func TestListenerPanicFailsTheJob(t *testing.T) {
	gate := testsrc.NewGate(10_000)
	g, _ := paritySumJob("listener", 10_000, gate, newFailures(100))
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventTaskFailed {
				panic("listener bug")
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err == nil || !strings.Contains(err.Error(), "listener bug") {
		t.Fatalf("Wait: %v, want the job to fail with the listener's panic", err)
	}
}
