package actors_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
)

// TestFileSinkNewestManifestGoneRefusedOnFailover: a running job with the
// file sink completes two checkpoints (after records 0..999 and
// 0..1999); the newer one's manifest then disappears from the store (as
// when a superseded holder's retention or a person deleted it), and a task
// fails. The failover must not restore the older checkpoint, whose replay
// would commit 1000..1999 again: the job fails with an error wrapping
// ErrFallbackRefused that names the missing checkpoint, and the committed
// output holds no record twice. With the manifest back, a start ends
// exactly once.
func TestFileSinkNewestManifestGoneRefusedOnFailover(t *testing.T) {
	const n = 6000
	job := "floor-failover"
	out := t.TempDir()
	store, err := snapshots.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gate := testsrc.NewGate(1000)
	var ev events
	j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, gate, 2500), rpOpts(t, store, &ev)...)
	if err != nil {
		t.Fatal(err)
	}
	older, newer := twoCheckpoints(t, j, gate)
	saved := saveObjects(t, store, snapshots.CheckpointPrefix(job, newer))
	if err := store.Delete(context.Background(), snapshots.ManifestKey(job, newer)); err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(n) // record 2500 fails the count once
	err = waitJob(t, j)
	var je *actors.JobError
	if !errors.As(err, &je) {
		t.Fatalf("Wait: %v, want a JobError", err)
	}
	t.Logf("refusal: %v", err)
	if !errors.Is(err, snapshots.ErrFallbackRefused) {
		t.Fatalf("Wait: %v, want an error wrapping ErrFallbackRefused", err)
	}
	for _, want := range []string{fmt.Sprintf("checkpoint %d, the newest", newer), fmt.Sprintf("found checkpoint %d", older), `"out"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	for _, r := range ev.of(actors.EventRestoring) {
		if r.Checkpoint == older {
			t.Fatalf("the failover restored the older checkpoint %d, though %d had completed", older, newer)
		}
	}
	committedOnce(t, out, 1000, 2000)

	for k, data := range saved { // the job cleaned up the objects left without a manifest
		if err := store.Put(context.Background(), k, data); err != nil {
			t.Fatal(err)
		}
	}
	rpRestartExact(t, job, n, out, store, newer)
}

// saveObjects returns the objects under prefix, by key.
func saveObjects(t *testing.T, store snapshots.Store, prefix string) map[string][]byte {
	t.Helper()
	keys, err := store.List(context.Background(), prefix)
	if err != nil || len(keys) == 0 {
		t.Fatalf("List %s: %v, %v", prefix, keys, err)
	}
	saved := make(map[string][]byte, len(keys))
	for _, k := range keys {
		if saved[k], err = store.Get(context.Background(), k); err != nil {
			t.Fatal(err)
		}
	}
	return saved
}
