package snapshotstest

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// errInjected is the error of the faults that faultyStore injects.
var errInjected = errors.New("injected fault")

// faultyStore injects faults into the writes and reads of manifests.
type faultyStore struct {
	snapshots.Store
	// putLands makes a manifest Put store the object, then fail.
	putLands bool
	// putFails makes a manifest Put fail without storing anything.
	putFails bool
	// cancelAfterPut cancels the Put's context once the object is stored,
	// and returns the context's error, as a PUT landing as it ends would.
	cancelAfterPut context.CancelFunc
	// getFails makes reading a manifest fail.
	getFails bool
	// abandoned makes a manifest Put fail with context.DeadlineExceeded
	// without storing, as a write abandoned by its deadline whose bytes the
	// server may still commit.
	abandoned bool
}

func isManifest(key string) bool { return strings.HasSuffix(key, "/_manifest") }

func (f *faultyStore) Put(ctx context.Context, key string, data []byte) error {
	if !isManifest(key) {
		return f.Store.Put(ctx, key, data)
	}
	switch {
	case f.abandoned:
		return context.DeadlineExceeded
	case f.putFails:
		return errInjected
	case f.cancelAfterPut != nil:
		if err := f.Store.Put(ctx, key, data); err != nil {
			return err
		}
		f.cancelAfterPut()
		return ctx.Err()
	case f.putLands:
		if err := f.Store.Put(ctx, key, data); err != nil {
			return err
		}
		return errInjected
	}
	return f.Store.Put(ctx, key, data)
}

func (f *faultyStore) Get(ctx context.Context, key string) ([]byte, error) {
	if f.getFails && isManifest(key) {
		return nil, errInjected
	}
	return f.Store.Get(ctx, key)
}

// testManifestWriteFails checks that PutManifest tells the truth when the
// store's Put fails: nil when the manifest is in place anyway, the Put's
// error when it is not, and ErrManifestInDoubt when it cannot tell.
func testManifestWriteFails(t *testing.T, newStore newStoreFunc) {
	t.Run("landed", func(t *testing.T) {
		s := newStore(t)
		c, logs := newCheckpoints(&faultyStore{Store: s, putLands: true})
		m := putManifest(t, c, 1, putStates(t, c, 1, defaultTasks...)) // fails the test unless nil
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), errInjected.Error()) {
			t.Errorf("no warning about the failed write logged:\n%s", logs)
		}
		wantLoaded(t, c, 1)
		if got := loadLatest(t, c).Manifest; got.GetCheckpointId() != m.GetCheckpointId() {
			t.Errorf("restored checkpoint %d", got.GetCheckpointId())
		}
	})
	t.Run("landed as the context ended", func(t *testing.T) {
		s := newStore(t)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		f := &faultyStore{Store: s}
		c, _ := newCheckpoints(f)
		m := manifestOf(1, putStates(t, c, 1, defaultTasks...))
		f.cancelAfterPut = cancel
		if err := c.PutManifest(ctx, m); err != nil {
			t.Fatalf("PutManifest = %v, want nil: the manifest is in place", err)
		}
		wantLoaded(t, c, 1)
	})
	t.Run("absent", func(t *testing.T) {
		s := newStore(t)
		c, _ := newCheckpoints(&faultyStore{Store: s, putFails: true})
		err := c.PutManifest(t.Context(), manifestOf(1, putStates(t, c, 1, defaultTasks...)))
		if !errors.Is(err, errInjected) || errors.Is(err, snapshots.ErrManifestInDoubt) {
			t.Fatalf("PutManifest = %v, want the Put's error, not in doubt", err)
		}
		wantNotFound(t, s, snapshots.ManifestKey(job, 1))
		if r := loadLatest(t, c); r != nil {
			t.Errorf("LoadLatest = checkpoint %d, want none", r.Manifest.GetCheckpointId())
		}
	})
	t.Run("abandoned by its context", func(t *testing.T) {
		s := newStore(t)
		c, _ := newCheckpoints(&faultyStore{Store: s, abandoned: true})
		err := c.PutManifest(t.Context(), manifestOf(1, putStates(t, c, 1, defaultTasks...)))
		if !errors.Is(err, snapshots.ErrManifestInDoubt) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("PutManifest = %v, want ErrManifestInDoubt: the server may still commit the write", err)
		}
	})
	for _, landed := range []bool{true, false} {
		name := "in doubt, absent"
		if landed {
			name = "in doubt, landed"
		}
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			c, _ := newCheckpoints(&faultyStore{Store: s, putLands: landed, putFails: !landed, getFails: true})
			err := c.PutManifest(t.Context(), manifestOf(1, putStates(t, c, 1, defaultTasks...)))
			if !errors.Is(err, snapshots.ErrManifestInDoubt) || !errors.Is(err, errInjected) {
				t.Fatalf("PutManifest = %v, want ErrManifestInDoubt wrapping the Put's error", err)
			}
			if !strings.Contains(err.Error(), snapshots.ManifestKey(job, 1)) {
				t.Errorf("error %q does not name the manifest", err)
			}
		})
	}
	t.Run("another manifest in place", func(t *testing.T) {
		s := newStore(t)
		c, _ := newCheckpoints(s)
		m := putManifest(t, c, 1, putStates(t, c, 1, defaultTasks...))
		f, _ := newCheckpoints(&faultyStore{Store: s, putFails: true})
		other := manifestOf(1, m.GetTasks())
		other.Epoch = 7
		if err := f.PutManifest(t.Context(), other); !errors.Is(err, snapshots.ErrCheckpointTaken) || errors.Is(err, snapshots.ErrManifestInDoubt) {
			t.Fatalf("PutManifest = %v, want ErrCheckpointTaken: the checkpoint is not complete with this manifest", err)
		}
	})
}

// testDeleteIncomplete checks that DeleteIncomplete removes the objects of
// the checkpoints without a manifest below the bound, and nothing else.
func testDeleteIncomplete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	complete(t, c, 1)
	putStates(t, c, 2, defaultTasks...) // aborted
	complete(t, c, 3)
	mustPut(t, s, snapshots.ManifestKey(job, 3), []byte("garbage")) // corrupt, but complete
	putStates(t, c, 4, "src#0")                                     // aborted
	putStates(t, c, 5, "src#0", "sum#0")                            // in flight
	want := keysOf(t, s, 1, 3, 5)
	n, err := c.DeleteIncomplete(ctx, 5)
	if n != 2 || err != nil {
		t.Errorf("DeleteIncomplete(5) = %d, %v; want 2, nil", n, err)
	}
	wantKeys(t, s, "", want...)
	if n, err := c.DeleteIncomplete(ctx, 5); n != 0 || err != nil {
		t.Errorf("DeleteIncomplete(5) again = %d, %v; want 0, nil", n, err)
	}
	if n, err := c.DeleteIncomplete(ctx, 0); n != 0 || err != nil {
		t.Errorf("DeleteIncomplete(0) = %d, %v; want 0, nil", n, err)
	}
	wantKeys(t, s, "", want...)
	want = keysOf(t, s, 1, 3)
	if n, err := c.DeleteIncomplete(ctx, 6); n != 1 || err != nil {
		t.Errorf("DeleteIncomplete(6) = %d, %v; want 1, nil", n, err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 1)
}

// testDeleteAll checks that DeleteAll removes every checkpoint of the job,
// complete or not, and nothing of another job.
func testDeleteAll(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	complete(t, c, 1)
	putStates(t, c, 2, defaultTasks...) // aborted
	complete(t, c, 3)
	other := "other" + job
	mustPut(t, s, snapshots.ManifestKey(other, 1), []byte("another job's"))
	n, err := c.DeleteAll(ctx)
	if err != nil || n != 3 {
		t.Fatalf("DeleteAll = %d, %v; want 3 checkpoints", n, err)
	}
	if keys, err := s.List(ctx, snapshots.CheckpointsPrefix(job)); err != nil || len(keys) != 0 {
		t.Fatalf("left %v (%v)", keys, err)
	}
	if _, err := s.Get(ctx, snapshots.ManifestKey(other, 1)); err != nil {
		t.Fatalf("another job's object: %v", err)
	}
	if r := loadLatest(t, c); r != nil {
		t.Fatalf("LoadLatest after DeleteAll = checkpoint %d", r.Manifest.GetCheckpointId())
	}
}
