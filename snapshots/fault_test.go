package snapshots_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// faultyStore fails Get on one key with an error that is neither ErrNotFound
// nor ErrCorrupt, as an unreachable store would.
type faultyStore struct {
	snapshots.Store
	key string
}

var errUnreachable = errors.New("connection refused")

func (f *faultyStore) Get(ctx context.Context, key string) ([]byte, error) {
	if key == f.key {
		return nil, errUnreachable
	}
	return f.Store.Get(ctx, key)
}

func writeCheckpoint(t *testing.T, c *snapshots.Checkpoints, id uint64, tasks ...string) {
	t.Helper()
	m := &messages.Manifest{Job: c.Job(), CheckpointId: id}
	for _, task := range tasks {
		h, err := c.PutTaskState(t.Context(), id, &messages.TaskState{Job: c.Job(), TaskId: task, CheckpointId: id})
		if err != nil {
			t.Fatal(err)
		}
		m.Tasks = append(m.Tasks, &messages.TaskStateEntry{TaskId: task, State: h})
	}
	if err := c.PutManifest(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// TestStoreErrorsAreNotSkipped checks that LoadLatest, Retain and Verify
// return a store failure instead of treating the checkpoint as unusable.
func TestStoreErrorsAreNotSkipped(t *testing.T) {
	for name, key := range map[string]string{
		"state":    snapshots.StateKey("job", 2, "b#0"),
		"manifest": snapshots.ManifestKey("job", 2),
	} {
		t.Run(name, func(t *testing.T) {
			mem := snapshots.NewMem()
			writeCheckpoint(t, snapshots.NewCheckpoints(mem, "job", nil), 1, "a#0", "b#0")
			writeCheckpoint(t, snapshots.NewCheckpoints(mem, "job", nil), 2, "a#0", "b#0")
			c := snapshots.NewCheckpoints(&faultyStore{Store: mem, key: key}, "job", nil)
			if r, err := c.LoadLatest(t.Context()); !errors.Is(err, errUnreachable) {
				t.Errorf("LoadLatest = %v, %v; want the store's error", r, err)
			}
			if err := c.Verify(t.Context(), 2); !errors.Is(err, errUnreachable) {
				t.Errorf("Verify = %v, want the store's error", err)
			}
			if err := c.Retain(t.Context(), 1, 3); !errors.Is(err, errUnreachable) {
				t.Errorf("Retain = %v, want the store's error", err)
			}
			keys, err := mem.List(t.Context(), "")
			if err != nil || len(keys) != 6 {
				t.Errorf("Retain deleted objects after a failed read: %q, %v", keys, err)
			}
		})
	}
}

func TestNilLoggerDiscards(t *testing.T) {
	mem := snapshots.NewMem()
	c := snapshots.NewCheckpoints(mem, "job", nil)
	writeCheckpoint(t, c, 1, "a#0")
	if err := mem.Put(t.Context(), snapshots.ManifestKey("job", 1), []byte("bad")); err != nil {
		t.Fatal(err)
	}
	if r, err := c.LoadLatest(t.Context()); r != nil || !errors.Is(err, snapshots.ErrNoUsableCheckpoint) {
		t.Errorf("LoadLatest = %v, %v; want ErrNoUsableCheckpoint", r, err)
	}
	if c.Store() != mem || !strings.HasPrefix(c.Store().String(), "mem://") {
		t.Errorf("Store() = %v", c.Store())
	}
}
