package actors_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
)

// TestReplayIncrementalDamageSweep: incremental checkpoints (a key group
// stored again at least every 2, 3 or 1000 checkpoints), retention 3, no
// transactional sink. Checkpoint 1 is full; each later one follows 7 more
// records, which change 7 keys. Once checkpoint d completes, its sum#0
// object is replaced by garbage; more checkpoints follow, with retention
// running after each. Then a task fails (or the job is stopped and
// started again): whatever retention deleted meanwhile, the job must
// restore a checkpoint whose objects verify, never end with
// ErrNoUsableCheckpoint, and end with the sums of a failure-free run.
func TestReplayIncrementalDamageSweep(t *testing.T) {
	const n, keys, job = 4000, 1000, "incremental"
	const panicAt = 3000 // beyond every checkpoint's records
	type sweep struct {
		every   int
		damaged uint64
		after   int
		restart bool
	}
	var cases []sweep
	for _, every := range []int{2, 3, 1000} {
		for _, d := range []uint64{2, 3, 5} {
			for _, after := range []int{1, 3, 6} {
				cases = append(cases, sweep{every, d, after, false})
			}
			cases = append(cases, sweep{every, d, 6, true})
		}
	}
	for _, c := range cases {
		name := fmt.Sprintf("rewrite every %d, damaged %d, %d after, failover", c.every, c.damaged, c.after)
		if c.restart {
			name = fmt.Sprintf("rewrite every %d, damaged %d, %d after, restart", c.every, c.damaged, c.after)
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			store := snapshots.NewMem()
			opts := func(ev *events) []actors.Option {
				return []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0),
					actors.WithIncrementalCheckpoints(c.every), actors.WithInlineStateLimit(0), actors.WithRetainedCheckpoints(3),
					actors.WithListener(ev.listen)}
			}
			var ev events
			fail := int64(panicAt)
			if c.restart {
				fail = 0
			}
			limit := int64(2000)
			gate := testsrc.NewGate(limit)
			j, err := actors.Start(ctx, incrementalJob(n, keys, gate, fail), opts(&ev)...)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			var damaged string
			last := c.damaged + uint64(c.after)
			for want := uint64(1); want <= last; want++ {
				gate.WaitReached(t, limit)
				id, err := j.Checkpoint(ctx)
				if err != nil || id != want {
					t.Fatalf("checkpoint %d: %v, want %d", id, err, want)
				}
				if id == c.damaged {
					damaged = stateKey(t, store, job, id, "sum#0")
					if err := store.Put(ctx, damaged, []byte("garbage, not a state")); err != nil {
						t.Fatal(err)
					}
				}
				limit += 7
				gate.SetLimit(limit)
			}
			t.Logf("damaged %s; complete checkpoints in the store: %v", damaged, rpCompleteIDs(t, store, job))

			run := &ev
			if c.restart {
				if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
					t.Fatal(err)
				}
				run = &events{}
				if j, err = actors.Start(ctx, incrementalJob(n, keys, testsrc.NewGate(n), 0), opts(run)...); err != nil {
					t.Fatalf("Start: %v", err)
				}
				defer j.Stop()
			} else {
				gate.SetLimit(n) // record 3000 fails the sum once
			}
			if err := waitJob(t, j); err != nil {
				t.Fatalf("the job with a damaged object under its incremental checkpoints: %v", err)
			}
			// A failover restores (EventRestoring); a start runs from a
			// checkpoint (EventRunning): never from none, which would lose
			// the sums of the records before it.
			kind := actors.EventRestoring
			if c.restart {
				kind = actors.EventRunning
			}
			var from []uint64
			for _, e := range run.of(kind) {
				if e.Checkpoint == 0 {
					t.Fatalf("the job ran from no checkpoint: %+v", e)
				}
				from = append(from, e.Checkpoint)
			}
			if len(from) == 0 {
				t.Fatal("the job restored nothing")
			}
			t.Logf("restored from %v", from)
			r, err := j.Checkpoints().LoadLatest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if !r.Manifest.GetFinal() {
				t.Fatalf("the newest checkpoint, %d, is not the final one", r.Manifest.GetCheckpointId())
			}
			if got := sums(t, j.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
				t.Fatal("the final sums differ from those of a failure-free run")
			}
		})
	}
}

// TestReplayRetainFewDamagedNewest: full checkpoints, retention keeping
// one or two; checkpoints 1 to 4 complete, with retention after each,
// and a state object of the newest is then damaged. Retention counts the
// newest usable (this process wrote it), so it must still have kept a
// checkpoint that shares no object with it: a failover (or a restart)
// restores an older checkpoint, and the job (no transactional sink) ends
// with the sums of a failure-free run.
func TestReplayRetainFewDamagedNewest(t *testing.T) {
	const n, keys, job = 4000, 1000, "incremental"
	for _, keep := range []int{1, 2} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprintf("keep %d, restart %v", keep, restart), func(t *testing.T) {
				ctx := context.Background()
				store := snapshots.NewMem()
				opts := func(ev *events) []actors.Option {
					return []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0),
						actors.WithInlineStateLimit(0), actors.WithRetainedCheckpoints(keep), actors.WithListener(ev.listen)}
				}
				var fail int64 = 3000
				if restart {
					fail = 0
				}
				var ev events
				limit := int64(2000)
				gate := testsrc.NewGate(limit)
				j, err := actors.Start(ctx, incrementalJob(n, keys, gate, fail), opts(&ev)...)
				if err != nil {
					t.Fatal(err)
				}
				defer j.Stop()
				const last = 4
				for want := uint64(1); want <= last; want++ {
					gate.WaitReached(t, limit)
					if id, err := j.Checkpoint(ctx); err != nil || id != want {
						t.Fatalf("checkpoint %d: %v, want %d", id, err, want)
					}
					limit += 7
					gate.SetLimit(limit)
				}
				key := stateKey(t, store, job, last, "sum#1")
				if err := store.Put(ctx, key, []byte("garbage, not a state")); err != nil {
					t.Fatal(err)
				}
				run := &ev
				kind := actors.EventRestoring
				if restart {
					if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
						t.Fatal(err)
					}
					run, kind = &events{}, actors.EventRunning
					if j, err = actors.Start(ctx, incrementalJob(n, keys, testsrc.NewGate(n), 0), opts(run)...); err != nil {
						t.Fatalf("Start: %v", err)
					}
					defer j.Stop()
				} else {
					gate.SetLimit(n) // record 3000 fails the sum once
				}
				if err := waitJob(t, j); err != nil {
					t.Fatalf("the job whose newest checkpoint is damaged: %v", err)
				}
				var from []uint64
				for _, e := range run.of(kind) {
					from = append(from, e.Checkpoint)
				}
				if len(from) == 0 || from[len(from)-1] == 0 || from[len(from)-1] >= last {
					t.Fatalf("restored from %v; want the last from a checkpoint before the damaged %d", from, last)
				}
				r, err := j.Checkpoints().LoadLatest(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !r.Manifest.GetFinal() {
					t.Fatalf("the newest checkpoint, %d, is not the final one", r.Manifest.GetCheckpointId())
				}
				if got := sums(t, j.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
					t.Fatal("the final sums differ from those of a failure-free run")
				}
			})
		}
	}
}

// TestReplayIncrementalFileSinkRefused: the file sink job with
// incremental checkpoints and retention 3. Checkpoint 1 follows 0..999,
// checkpoint 2 0..1999; a state object of checkpoint 2 is then damaged,
// and four more checkpoints follow without new records, each referencing
// it, with retention after each. A task then fails:
// the failover must refuse to fall back (its sinks committed 0..1999) with
// an error wrapping ErrFallbackRefused that names the object, not end with
// ErrNoUsableCheckpoint, and leave no record twice in the committed files;
// once the object is back, a start resumes from the newest checkpoint and
// ends exactly once.
func TestReplayIncrementalFileSinkRefused(t *testing.T) {
	ctx := context.Background()
	const n = 5000
	const job = "replay-incremental"
	out := t.TempDir()
	store := snapshots.NewMem()
	opts := func(ev *events) []actors.Option {
		return append(rpOpts(t, store, ev), actors.WithIncrementalCheckpoints(1000), actors.WithRetainedCheckpoints(3))
	}
	var ev events
	gate := testsrc.NewGate(1000)
	j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 2500), opts(&ev)...)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	_, second := twoCheckpoints(t, j, gate)
	key := stateKey(t, store, job, second, "count#1")
	original, err := store.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, key, []byte("garbage, not a state")); err != nil {
		t.Fatal(err)
	}
	newest := second
	for newest < second+4 {
		if newest, err = j.Checkpoint(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("complete checkpoints in the store: %v (checkpoint %d's manifest there: %v)", rpCompleteIDs(t, store, job), second,
		manifestPresent(t, store, snapshots.ManifestKey(job, second)))
	h := snapshotstest.StateHandle(t, store, snapshots.ManifestKey(job, newest), "count#1")
	refs := h.GetKey() == key
	for _, s := range h.GetKeyGroups() {
		refs = refs || s.GetKey() == key
	}
	if !refs {
		t.Fatalf("the newest checkpoint, %d, does not reference the damaged %s: the test damages nothing that matters", newest, key)
	}
	gate.SetLimit(n) // record 2500 fails the count once
	err = waitJob(t, j)
	t.Logf("refusal: %v", err)
	if errors.Is(err, snapshots.ErrNoUsableCheckpoint) {
		t.Fatalf("the job ended with no usable checkpoint: %v", err)
	}
	rpRefusedNaming(t, err, key)
	for _, r := range ev.of(actors.EventRestoring) {
		if r.Checkpoint < newest {
			t.Fatalf("the failover restored checkpoint %d, before the newest, %d", r.Checkpoint, newest)
		}
	}
	committedOnce(t, out, 1000, 2000)

	if err := store.Put(ctx, key, original); err != nil {
		t.Fatal(err)
	}
	rpRestartExactWith(t, job, n, out, newest, opts)
}

// manifestPresent reports whether the object at key exists.
func manifestPresent(t *testing.T, store snapshots.Store, key string) bool {
	t.Helper()
	_, err := store.Get(context.Background(), key)
	if errors.Is(err, snapshots.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatal(err)
	}
	return true
}

// rpCompleteIDs lists the ids of the complete checkpoints of job in store.
func rpCompleteIDs(t *testing.T, store snapshots.Store, job string) []uint64 {
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
