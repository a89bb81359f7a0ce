package actors_test

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
)

// rfReferences reports whether the state of task in checkpoint id of job
// reads a key group from object key.
func rfReferences(t *testing.T, store snapshots.Store, job string, id uint64, task, key string) bool {
	t.Helper()
	h := snapshotstest.StateHandle(t, store, snapshots.ManifestKey(job, id), task)
	if h.GetKey() == key {
		return true
	}
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() == key {
			return true
		}
	}
	return false
}

func rfManifestExists(t *testing.T, store snapshots.Store, job string, id uint64) bool {
	t.Helper()
	_, err := store.Get(context.Background(), snapshots.ManifestKey(job, id))
	switch {
	case err == nil:
		return true
	case errors.Is(err, snapshots.ErrNotFound):
		return false
	}
	t.Fatal(err)
	return false
}

// TestIncrementalStaleObjectKeepsAUsableCheckpoint: incremental
// checkpoints, retention 3. Checkpoint 1 is full; checkpoint 2 stores a
// few key groups of each sum task, which every later checkpoint
// references. One state object of checkpoint 2 is then damaged (garbage,
// or a stale object: another checkpoint's bytes under its key), and
// retention runs over more checkpoints, until it has deleted checkpoint
// 2's manifest. Every checkpoint from 2 on is unusable now; retention must
// still have kept checkpoint 1, which shares no damaged object, so that a
// failover (or a restart) restores it rather than end with
// ErrNoUsableCheckpoint, and the job (no transactional sink) ends with a
// failure-free run's state.
func TestIncrementalStaleObjectKeepsAUsableCheckpoint(t *testing.T) {
	stale := func(t *testing.T, store snapshots.Store, job string) []byte {
		data, err := store.Get(context.Background(), stateKey(t, store, job, 1, "sum#0"))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, tc := range []struct {
		name    string
		bytes   func(t *testing.T, store snapshots.Store, job string) []byte
		restart bool
	}{
		{name: "garbage, failover", bytes: func(*testing.T, snapshots.Store, string) []byte { return []byte("garbage, not a state") }},
		{name: "stale, failover", bytes: stale},
		{name: "stale, restart", bytes: stale, restart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			const n, keys, job = 6000, 1000, "incremental"
			var panicAt int64 = 5000
			if tc.restart {
				panicAt = 0
			}
			store := snapshots.NewMem()
			var ev events
			opts := func(ev *events) []actors.Option {
				return []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0),
					actors.WithIncrementalCheckpoints(1000), actors.WithInlineStateLimit(0), actors.WithRetainedCheckpoints(3),
					actors.WithListener(ev.listen)}
			}
			gate := testsrc.NewGate(2000)
			j, err := actors.Start(ctx, incrementalJob(n, keys, gate, panicAt), opts(&ev)...)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			gate.WaitReached(t, 2000)
			if id, err := j.Checkpoint(ctx); err != nil || id != 1 {
				t.Fatalf("checkpoint %d: %v, want 1", id, err)
			}
			gate.SetLimit(2001)
			gate.WaitReached(t, 2001)
			if id, err := j.Checkpoint(ctx); err != nil || id != 2 {
				t.Fatalf("checkpoint %d: %v, want 2", id, err)
			}
			key := stateKey(t, store, job, 2, "sum#0")
			if err := store.Put(ctx, key, tc.bytes(t, store, job)); err != nil {
				t.Fatal(err)
			}
			// Checkpoints until retention has deleted checkpoint 2's
			// manifest (a pass over a newest checkpoint of 5 or more):
			// each completion starts a pass unless one runs.
			newest := uint64(2)
			for !(newest >= 6 && !rfManifestExists(t, store, job, 2)) {
				if newest == 200 {
					t.Fatal("200 checkpoints taken, and retention never deleted checkpoint 2")
				}
				id, err := j.Checkpoint(ctx)
				if err != nil {
					t.Fatal(err)
				}
				newest = id
			}
			if !rfReferences(t, store, job, newest, "sum#0", key) {
				t.Fatalf("the newest checkpoint, %d, does not reference the damaged object %s: the test frDamages nothing that matters", newest, key)
			}
			if !rfManifestExists(t, store, job, 1) {
				t.Fatalf("retention deleted checkpoint 1, the only one without the damaged object %s, and kept %v", key, rfCompleteIDs(t, store, job))
			}
			t.Logf("checkpoints in the store after retention, up to %d: %v", newest, rfCompleteIDs(t, store, job))

			var ev2 *events
			if tc.restart {
				if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
					t.Fatal(err)
				}
				ev2 = &events{}
				if j, err = actors.Start(ctx, incrementalJob(n, keys, testsrc.NewGate(n), 0), opts(ev2)...); err != nil {
					t.Fatalf("Start: %v", err)
				}
				defer j.Stop()
			} else {
				ev2 = &ev
				gate.SetLimit(n) // record 5000 fails the sum once
			}
			if err := waitJob(t, j); err != nil {
				t.Fatalf("the job with a stale object under its incremental checkpoints: %v", err)
			}
			var from []uint64
			for _, e := range ev2.of(actors.EventRestoring) {
				from = append(from, e.Checkpoint)
			}
			if len(from) == 0 || from[len(from)-1] != 1 {
				t.Fatalf("restores from checkpoints %v; want the last from 1, the only one without the damaged object", from)
			}
			r, err := j.Checkpoints().LoadLatest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := sums(t, j.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
				t.Fatal("the final sums differ from those of a failure-free run")
			}
		})
	}
}

// rfCompleteIDs lists the ids of the complete checkpoints of job in store.
func rfCompleteIDs(t *testing.T, store snapshots.Store, job string) []uint64 {
	t.Helper()
	infos, err := snapshots.NewCheckpoints(store, job, nil).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, i := range infos {
		if i.Complete {
			ids = append(ids, i.ID)
		}
	}
	return ids
}
