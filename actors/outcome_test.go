package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
)

// errFaulty is the error of faultyStore's injected failures.
var errFaulty = errors.New("faulty store: injected")

// faultyStore wraps a store with switchable faults on keys that contain a
// string, and tracks the calls in flight.
type faultyStore struct {
	snapshots.Store
	mu sync.Mutex
	// putThenFail stores the object, then reports an error (a lost answer).
	putThenFail map[string]int
	// afterPut, when set before the store is used, is called with the key
	// of every object putThenFail stored, before the error is returned.
	afterPut func(key string)
	// putFail reports an error without storing.
	putFail map[string]int
	// getFail fails reads.
	getFail map[string]int
	// panicPut and panicDelete panic.
	panicPut    map[string]int
	panicDelete map[string]int

	inflight  int
	statePuts int // Puts of state objects that have ended
	idle      *sync.Cond
}

func newFaultyStore(s snapshots.Store) *faultyStore {
	f := &faultyStore{Store: s, putThenFail: map[string]int{}, putFail: map[string]int{}, getFail: map[string]int{},
		panicPut: map[string]int{}, panicDelete: map[string]int{}}
	f.idle = sync.NewCond(&f.mu)
	return f
}

// take reports whether a fault of rules matches key, spending one (n < 0:
// unlimited).
func (f *faultyStore) take(rules map[string]int, key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for match, n := range rules {
		if n != 0 && strings.Contains(key, match) {
			if n > 0 {
				rules[match] = n - 1
			}
			return true
		}
	}
	return false
}

func (f *faultyStore) enter() {
	f.mu.Lock()
	f.inflight++
	f.mu.Unlock()
}

func (f *faultyStore) leave(key string) {
	f.mu.Lock()
	f.inflight--
	if strings.HasSuffix(key, ".state") {
		f.statePuts++
	}
	f.idle.Broadcast()
	f.mu.Unlock()
}

// waitStatePuts waits until n Puts of state objects have ended.
func (f *faultyStore) waitStatePuts(n int) {
	f.mu.Lock()
	for f.statePuts < n {
		f.idle.Wait()
	}
	f.mu.Unlock()
}

func (f *faultyStore) Put(ctx context.Context, key string, data []byte) error {
	f.enter()
	defer f.leave(key)
	switch {
	case f.take(f.panicPut, key):
		panic("faulty store: put panics on " + key)
	case f.take(f.putFail, key):
		return fmt.Errorf("put %s: %w", key, errFaulty)
	case f.take(f.putThenFail, key):
		if err := f.Store.Put(ctx, key, data); err != nil {
			return err
		}
		if f.afterPut != nil {
			f.afterPut(key)
		}
		return fmt.Errorf("put %s: the answer was lost: %w", key, errFaulty)
	}
	return f.Store.Put(ctx, key, data)
}

// Create is Put's create-only twin (snapshots.Creator), with the same faults.
func (f *faultyStore) Create(ctx context.Context, key string, data []byte) error {
	c, ok := f.Store.(snapshots.Creator)
	if !ok {
		return fmt.Errorf("create %s: the store it wraps cannot create: %w", key, errFaulty)
	}
	f.enter()
	defer f.leave(key)
	switch {
	case f.take(f.panicPut, key):
		panic("faulty store: create panics on " + key)
	case f.take(f.putFail, key):
		return fmt.Errorf("create %s: %w", key, errFaulty)
	case f.take(f.putThenFail, key):
		if err := c.Create(ctx, key, data); err != nil {
			return err
		}
		return fmt.Errorf("create %s: the answer was lost: %w", key, errFaulty)
	}
	return c.Create(ctx, key, data)
}

func (f *faultyStore) Get(ctx context.Context, key string) ([]byte, error) {
	if f.take(f.getFail, key) {
		return nil, fmt.Errorf("get %s: %w", key, errFaulty)
	}
	return f.Store.Get(ctx, key)
}

func (f *faultyStore) Delete(ctx context.Context, key string) error {
	if f.take(f.panicDelete, key) {
		panic("faulty store: delete panics on " + key)
	}
	return f.Store.Delete(ctx, key)
}

// set installs a fault under the store's lock.
func (f *faultyStore) set(rules map[string]int, match string, n int) {
	f.mu.Lock()
	rules[match] = n
	f.mu.Unlock()
}

// outcomes checks that no checkpoint was reported both aborted and
// completed, and returns the ids reported completed and aborted.
func outcomes(t *testing.T, ev *events) (completed, aborted map[uint64]bool) {
	t.Helper()
	completed, aborted = map[uint64]bool{}, map[uint64]bool{}
	for _, e := range ev.of(actors.EventCheckpointCompleted) {
		completed[e.Checkpoint] = true
	}
	for _, e := range ev.of(actors.EventCheckpointAborted) {
		aborted[e.Checkpoint] = true
	}
	for id := range completed {
		if aborted[id] {
			t.Fatalf("checkpoint %d was reported both completed and aborted", id)
		}
	}
	for _, e := range ev.of(actors.EventRestoring) {
		if e.Checkpoint != 0 && !completed[e.Checkpoint] {
			t.Fatalf("the job rolled back to checkpoint %d, which it never reported complete (aborted: %v)", e.Checkpoint, aborted[e.Checkpoint])
		}
	}
	return completed, aborted
}

// runningParity starts the parity job name over 1..n on store with manual
// checkpoints only, and returns once its source has emitted 1..1000 and
// waits at its gate.
func runningParity(t *testing.T, name string, n int64, store snapshots.Store, fail *failures, opts ...actors.Option) (*actors.Job, *testsrc.Gate, *latest, *events) {
	t.Helper()
	gate := testsrc.NewGate(1000)
	g, out := paritySumJob(name, n, gate, fail)
	ev := &events{}
	j, err := actors.Start(context.Background(), g, append([]actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	return j, gate, out, ev
}

// TestManifestWriteErrorAfterLanding: a manifest write that reports an error
// after the manifest is in place completes the checkpoint, as recovery would
// see it; one that did not land aborts it.
func TestManifestWriteErrorAfterLanding(t *testing.T) {
	const n = 20_000
	mem := snapshots.NewMem()
	store := newFaultyStore(mem)
	j, gate, out, ev := runningParity(t, "landed", n, store, nil)
	store.set(store.putThenFail, "_manifest", 1)
	landed, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatalf("checkpoint whose manifest landed: %v", err)
	}
	store.set(store.putFail, "_manifest", 1)
	if id, err := j.Checkpoint(context.Background()); err == nil {
		t.Fatalf("checkpoint %d whose manifest never landed reported complete", id)
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	completed, aborted := outcomes(t, ev)
	if !completed[landed] || aborted[landed] {
		t.Fatalf("checkpoint %d: completed %v, aborted %v; want completed", landed, completed, aborted)
	}
	if !aborted[landed+1] {
		t.Fatalf("checkpoint %d, whose manifest was never written, was not reported aborted", landed+1)
	}
	if _, err := snapshots.NewCheckpoints(mem, "landed", nil).ReadManifest(context.Background(), landed+1); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("manifest of the aborted checkpoint: %v, want not found", err)
	}
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// TestManifestInDoubtFailsOver: when a manifest write fails and its outcome
// cannot be read back, the job rolls back and reports the checkpoint by what
// recovery finds: here the manifest landed, so it is complete, and restored.
func TestManifestInDoubtFailsOver(t *testing.T) {
	const n = 20_000
	mem := snapshots.NewMem()
	store := newFaultyStore(mem)
	j, gate, out, ev := runningParity(t, "doubt", n, store, nil)
	store.set(store.putThenFail, "_manifest", 1)
	store.set(store.getFail, "_manifest", 1) // the read-back fails once
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatalf("checkpoint whose manifest landed, found by recovery: %v", err)
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	completed, aborted := outcomes(t, ev)
	if !completed[id] || aborted[id] {
		t.Fatalf("checkpoint %d: completed %v, aborted %v", id, completed, aborted)
	}
	if r := ev.of(actors.EventRestoring); len(r) != 1 || r[0].Checkpoint != id {
		t.Fatalf("restores %+v, want one from checkpoint %d", r, id)
	}
	assertEqualMaps(t, "final state", finalTotals(t, mem, "doubt", "sum"), parityWant(n))
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// TestAbortedCheckpointsAreDeleted: with failures tolerated, aborted
// checkpoints do not pile up in the store.
func TestAbortedCheckpointsAreDeleted(t *testing.T) {
	const aborts = 20
	gate := testsrc.NewGate(1000)
	g, _ := paritySumJob("aborts", 1_000_000, gate, nil)
	mem := snapshots.NewMem()
	store := newFaultyStore(mem)
	// Every checkpoint aborts, at the sink: the last task to snapshot, so
	// every task has started its upload before the abort.
	store.set(store.putFail, "sink#0.state", -1)
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithTolerableCheckpointFailures(-1))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	for i := range aborts {
		if id, err := j.Checkpoint(context.Background()); err == nil {
			t.Fatalf("checkpoint %d completed", id)
		}
		// The 4 tasks' uploads of this checkpoint have ended (3 landed).
		store.waitStatePuts(4 * (i + 1))
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	infos, err := snapshots.NewCheckpoints(mem, "aborts", nil).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 0 {
		t.Fatalf("%d of %d aborted checkpoints are still in the store: %+v", len(infos), aborts, infos)
	}
}

// TestStorePanicFailsOnlyTheCheckpoint: a store that panics on the upload
// and retention goroutines aborts a checkpoint; the process survives and
// the job finishes exactly.
func TestStorePanicFailsOnlyTheCheckpoint(t *testing.T) {
	const n = 20_000
	gate := testsrc.NewGate(1000)
	g, out := paritySumJob("panics", n, gate, nil)
	store := newFaultyStore(snapshots.NewMem())
	store.set(store.panicPut, "sum#0.state", 1)
	store.set(store.panicDelete, "chk-", -1)
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	if _, err := j.Checkpoint(context.Background()); err == nil || !strings.Contains(err.Error(), "panic") {
		t.Fatalf("checkpoint whose upload panicked: %v, want an error about the panic", err)
	}
	for range 2 { // the second one's retention deletes the first and panics
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// TestStartRefusesUnusableCheckpoints: complete checkpoints that all fail to
// verify make Start fail rather than start the job over empty.
func TestStartRefusesUnusableCheckpoints(t *testing.T) {
	store := snapshots.NewMem()
	j, _, _, _ := runningParity(t, "unusable", 100_000, store, nil)
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), stateKey(t, store, "unusable", id, "sum#0"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	g2, _ := paritySumJob("unusable", 100_000, testsrc.NewGate(100_000), nil)
	j2, err := actors.Start(context.Background(), g2, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)))
	if err == nil {
		_ = j2.Stop()
		t.Fatal("Start succeeded with no usable checkpoint")
	}
	if !errors.Is(err, snapshots.ErrNoUsableCheckpoint) || !strings.Contains(err.Error(), "WithStartOver") {
		t.Fatalf("Start: %v, want ErrNoUsableCheckpoint and the WithStartOver hint", err)
	}
}

// TestFailoverRefusesUnusableCheckpoints: a failover that finds the job's
// only checkpoint corrupt fails the job instead of rewinding to the start.
func TestFailoverRefusesUnusableCheckpoints(t *testing.T) {
	store := snapshots.NewMem()
	j, gate, _, ev := runningParity(t, "gone", 100_000, store, newFailures(1500))
	id, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), stateKey(t, store, "gone", id, "sum#1"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(100_000) // record 1500 fails a task
	err = waitJob(t, j)
	var je *actors.JobError
	if !errors.As(err, &je) || !errors.Is(err, snapshots.ErrNoUsableCheckpoint) {
		t.Fatalf("Wait: %v, want a JobError wrapping ErrNoUsableCheckpoint", err)
	}
	if r := ev.of(actors.EventRunning); len(r) != 1 {
		t.Fatalf("the job ran %d times (%+v); it must not start over", len(r), r)
	}
}

// TestRetentionKeepsAUsableCheckpoint: with one retained checkpoint and a
// corrupt newest one, Start keeps the older usable checkpoint, and a later
// failover restores it again.
func TestRetentionKeepsAUsableCheckpoint(t *testing.T) {
	const n = 30_000
	store := snapshots.NewMem()
	gate := testsrc.NewGate(1000)
	g, _ := paritySumJob("retain", n, gate, nil)
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	older, newer := twoCheckpoints(t, j, gate)
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), stateKey(t, store, "retain", newer, "sum#1"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	gate2 := testsrc.NewGate(1000)
	g2, out := paritySumJob("retain", n, gate2, newFailures(2500))
	var ev events
	j2, err := actors.Start(context.Background(), g2, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithRetainedCheckpoints(1), actors.WithCheckpointInterval(0), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	gate2.SetLimit(n) // record 2500 fails a task before any new checkpoint
	if err := waitJob(t, j2); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRunning); len(r) < 2 || r[0].Checkpoint != older || r[1].Checkpoint != older {
		t.Fatalf("runs %+v, want both the start and the failover from checkpoint %d", r, older)
	}
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// stallingStore blocks state Puts until their context ends, signalling
// entered on the first.
type stallingStore struct {
	snapshots.Store
	once    sync.Once
	entered chan struct{}
}

func (s *stallingStore) Put(ctx context.Context, key string, data []byte) error {
	if strings.HasSuffix(key, ".state") {
		s.once.Do(func() { close(s.entered) })
		<-ctx.Done()
		return ctx.Err()
	}
	return s.Store.Put(ctx, key, data)
}

// TestStopDuringUploadIsAStop: Stop abandons the uploads in flight, and
// that is not a checkpoint failure: with no failure tolerated and no
// restart allowed, the job still ends with ErrStopped.
func TestStopDuringUploadIsAStop(t *testing.T) {
	gate := testsrc.NewGate(1000)
	g, _ := paritySumJob("stopupload", 100_000, gate, nil)
	store := &stallingStore{Store: snapshots.NewMem(), entered: make(chan struct{})}
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithTolerableCheckpointFailures(0), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	go func() { _, _ = j.Checkpoint(context.Background()) }()
	<-store.entered
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Stop: %v, want ErrStopped", err)
	}
	if n := ev.count(actors.EventCheckpointAborted) + ev.count(actors.EventTaskFailed); n != 0 {
		t.Fatalf("the stop produced %d abort or failure events", n)
	}
}
