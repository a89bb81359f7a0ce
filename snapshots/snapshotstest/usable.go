package snapshotstest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// keysOf returns the keys of checkpoints ids, in id order.
func keysOf(t *testing.T, s snapshots.Store, ids ...uint64) []string {
	t.Helper()
	var keys []string
	for _, id := range ids {
		keys = append(keys, mustList(t, s, snapshots.CheckpointPrefix(job, id))...)
	}
	return keys
}

// damages make a complete checkpoint unusable in ways that only reading its
// states reveals: its manifest stays valid.
var damages = []struct {
	name string
	fn   func(t *testing.T, s snapshots.Store, id uint64)
}{
	{"corrupt state", func(t *testing.T, s snapshots.Store, id uint64) {
		mustPut(t, s, snapshots.StateKey(job, id, "sum#1"), []byte("garbage"))
	}},
	{"deleted state", func(t *testing.T, s snapshots.Store, id uint64) {
		if err := s.Delete(t.Context(), snapshots.StateKey(job, id, "src#0")); err != nil {
			t.Fatal(err)
		}
	}},
	{"other task's state", func(t *testing.T, s snapshots.Store, id uint64) {
		mustPut(t, s, snapshots.StateKey(job, id, "sum#1"), mustGet(t, s, snapshots.StateKey(job, id, "sum#0")))
	}},
}

// testRetainUsable is the failover that started empty: with keep 1 and the
// newest checkpoint damaged by hand, retention must keep the older usable
// one, which recovery then restores.
func testRetainUsable(t *testing.T, newStore newStoreFunc) {
	for _, d := range damages {
		t.Run(d.name, func(t *testing.T) {
			s := newStore(t)
			w, _ := newCheckpoints(s)
			for id := range uint64(3) {
				complete(t, w, id+1)
			}
			d.fn(t, s, 3)
			want := keysOf(t, s, 1, 2, 3) // 1 is 2's fallback: they share no object
			c, logs := newCheckpoints(s)  // a new process: nothing verified yet
			if err := c.Retain(t.Context(), 1, 4); err != nil {
				t.Fatalf("Retain: %v", err)
			}
			wantKeys(t, s, "", want...)
			if !strings.Contains(logs.String(), "unusable") {
				t.Errorf("retention kept checkpoint 3 without a word; log:\n%s", logs)
			}
			wantLoaded(t, c, 2)

			// A newer usable checkpoint makes the damaged one and the
			// oldest go: 2 is its fallback now.
			complete(t, c, 4)
			want = keysOf(t, s, 2, 4)
			if err := c.Retain(t.Context(), 1, 5); err != nil {
				t.Fatalf("Retain: %v", err)
			}
			wantKeys(t, s, "", want...)
			wantLoaded(t, c, 4)
		})
	}
}

// testRetainUnusableDoNotCount checks that unusable checkpoints newer than
// the oldest retained usable one are kept but not counted, and older ones
// are deleted.
func testRetainUnusableDoNotCount(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	w, _ := newCheckpoints(s)
	for id := range uint64(6) {
		complete(t, w, id+1)
	}
	damages[0].fn(t, s, 2) // older than what is kept: deleted
	damages[1].fn(t, s, 5)
	mustPut(t, s, snapshots.ManifestKey(job, 6), []byte("garbage"))
	want := keysOf(t, s, 3, 4, 5, 6)
	c, _ := newCheckpoints(s)
	if err := c.Retain(t.Context(), 2, 7); err != nil {
		t.Fatalf("Retain(2): %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 4)
	want = keysOf(t, s, 3, 4, 5, 6) // 3 is 4's fallback
	if err := c.Retain(t.Context(), 1, 7); err != nil {
		t.Fatalf("Retain(1): %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 4)
}

// testRetainNoUsable checks that retention deletes no complete checkpoint
// when none is usable, but still deletes aborted ones.
func testRetainNoUsable(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	w, _ := newCheckpoints(s)
	complete(t, w, 1)
	putStates(t, w, 2, defaultTasks...) // aborted
	complete(t, w, 3)
	damages[0].fn(t, s, 1)
	damages[1].fn(t, s, 3)
	want := keysOf(t, s, 1, 3)
	c, _ := newCheckpoints(s)
	if err := c.Retain(t.Context(), 1, 4); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, "", want...)
}

// testRetainKeepsReferencedByUnusable checks that an object that an
// unusable retained manifest references is kept, for inspection.
func testRetainKeepsReferencedByUnusable(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	w, _ := newCheckpoints(s)
	m1 := complete(t, w, 1)
	complete(t, w, 2)
	reused := m1.GetTasks()[0]
	entries := append([]*messages.TaskStateEntry{reused}, putStates(t, w, 3, defaultTasks[1:]...)...)
	putManifest(t, w, 3, entries)
	damages[0].fn(t, s, 3)
	want := keysOf(t, s, 1, 2, 3) // 1 is 2's fallback, and 3 references one of its objects
	c, _ := newCheckpoints(s)
	if err := c.Retain(t.Context(), 1, 4); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 2)
}

// countingStore counts the reads of state objects.
type countingStore struct {
	snapshots.Store
	stateGets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasSuffix(key, ".state") {
		s.stateGets.Add(1)
	}
	return s.Store.Get(ctx, key)
}

// testRetainVerifiesOnce checks that retention reads a checkpoint's states
// only when this Checkpoints has not verified it before: a checkpoint it
// wrote, or one that LoadLatest returned, is not read again.
func testRetainVerifiesOnce(t *testing.T, newStore newStoreFunc) {
	cs := &countingStore{Store: newStore(t)}
	w, _ := newCheckpoints(cs)
	for id := range uint64(3) {
		complete(t, w, id+1)
	}
	wantReads := func(op string, want int64) {
		t.Helper()
		if got := cs.stateGets.Swap(0); got != want {
			t.Errorf("%s read %d states, want %d", op, got, want)
		}
	}
	retain := func(c *snapshots.Checkpoints, keep int) {
		t.Helper()
		if err := c.Retain(t.Context(), keep, 10); err != nil {
			t.Fatalf("Retain: %v", err)
		}
	}
	retain(w, 3)
	wantReads("Retain by the writer", 0)

	c, _ := newCheckpoints(cs)
	wantLoaded(t, c, 3)
	wantReads("LoadLatest", 3)
	retain(c, 2)
	wantReads("Retain after LoadLatest", 3) // checkpoint 2 only
	retain(c, 2)
	wantReads("a second Retain", 0)
}
