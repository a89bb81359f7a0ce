package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
)

// frDamage is a way to damage a task's state object in a checkpoint. It
// returns the key it damaged and its bytes before.
type frDamage struct {
	name string
	// headsIntact: the manifest and the state's head still verify, so the
	// damage shows only when a task streams its key groups (after Start).
	headsIntact bool
	apply       func(t *testing.T, store snapshots.Store, job string, id uint64, task string) (key string, original []byte)
}

var frDamages = []frDamage{
	{name: "garbage object", apply: func(t *testing.T, store snapshots.Store, job string, id uint64, task string) (string, []byte) {
		key := stateKey(t, store, job, id, task)
		original, err := store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(context.Background(), key, []byte("garbage, not a state")); err != nil {
			t.Fatal(err)
		}
		return key, original
	}},
	{name: "missing object", apply: func(t *testing.T, store snapshots.Store, job string, id uint64, task string) (string, []byte) {
		key := stateKey(t, store, job, id, task)
		original, err := store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Delete(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		return key, original
	}},
	{name: "garbage manifest", apply: func(t *testing.T, store snapshots.Store, job string, id uint64, _ string) (string, []byte) {
		key := snapshots.ManifestKey(job, id)
		original, err := store.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Put(context.Background(), key, []byte("garbage, not a manifest")); err != nil {
			t.Fatal(err)
		}
		return key, original
	}},
	{name: "one key group", headsIntact: true, apply: func(t *testing.T, store snapshots.Store, job string, id uint64, task string) (string, []byte) {
		h := snapshotstest.StateHandle(t, store, snapshots.ManifestKey(job, id), task)
		if len(h.GetKeyGroups()) == 0 {
			t.Fatalf("checkpoint %d holds no key groups for %s", id, task)
		}
		original, err := store.Get(context.Background(), h.GetKey())
		if err != nil {
			t.Fatal(err)
		}
		data := append([]byte(nil), original...)
		sec := h.GetKeyGroups()[len(h.GetKeyGroups())/2]
		if sec.GetKey() != "" {
			t.Fatalf("key group %d of %s lies in another object, %s", sec.GetKeyGroup(), task, sec.GetKey())
		}
		data[sec.GetOffset()+sec.GetLength()-1] ^= 0xff // the last byte of one key group's entries
		if err := store.Put(context.Background(), h.GetKey(), data); err != nil {
			t.Fatal(err)
		}
		return h.GetKey(), original
	}},
}

// frCheckRefusal checks that err is the refusal to fall back past a damaged
// checkpoint of a job with the file sink "out": it wraps
// ErrFallbackRefused, names the damaged object and the sink, and says
// what to do.
func frCheckRefusal(t *testing.T, err error, key string) {
	t.Helper()
	if !errors.Is(err, snapshots.ErrFallbackRefused) {
		t.Fatalf("error %v, want one wrapping snapshots.ErrFallbackRefused", err)
	}
	msg := err.Error()
	for _, want := range []string{key, `"out"`, "WithStartOver"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the refusal does not name %s: %v", want, err)
		}
	}
}

// TestFileSinkDamagedNewestCheckpointRefusedAtStart: a job with the file
// sink takes two checkpoints (after records 0..999 and 0..1999) and stops;
// a state object of the newest is damaged. Starting the job again must not
// fall back to the older checkpoint, whose replay would commit 1000..1999
// again: it fails with an error wrapping ErrFallbackRefused that names the
// damaged object and the sink, and commits nothing. A whole garbage object
// is found by Start itself; a damaged key group (the heads intact) only by
// the tasks' restore, so the job fails instead of ending nil. Once the
// object is put back, as the error advises, the job resumes from the
// newest checkpoint and its committed output holds every record once.
func TestFileSinkDamagedNewestCheckpointRefusedAtStart(t *testing.T) {
	for _, d := range frDamages {
		t.Run(d.name, func(t *testing.T) {
			const n = 6000
			job := "refused-start"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &events{})...)
			if err != nil {
				t.Fatal(err)
			}
			_, newer := twoCheckpoints(t, j, gate)
			if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
				t.Fatalf("Stop: %v", err)
			}
			key, original := d.apply(t, store, job, newer, "count#1")

			var ev events
			j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), rpOpts(t, store, &ev)...)
			switch {
			case err == nil && !d.headsIntact:
				_ = j2.Stop()
				t.Fatalf("Start succeeded with the newest checkpoint damaged (%s)", d.name)
			case err == nil:
				err = waitJob(t, j2)
				var je *actors.JobError
				if !errors.As(err, &je) {
					t.Fatalf("Wait: %v, want a JobError", err)
				}
			}
			t.Logf("refusal: %v", err)
			frCheckRefusal(t, err, key)
			for _, r := range ev.of(actors.EventRestoring) {
				if r.Checkpoint != newer {
					t.Fatalf("the job restored checkpoint %d; it must restore none but the newest, %d", r.Checkpoint, newer)
				}
			}
			if r := ev.of(actors.EventRunning); len(r) > 0 && r[0].Checkpoint != newer {
				t.Fatalf("the job ran from checkpoint %d, want none or the newest, %d", r[0].Checkpoint, newer)
			}
			if ev.count(actors.EventCheckpointCompleted) > 0 {
				t.Fatalf("the refused job completed %d checkpoints", ev.count(actors.EventCheckpointCompleted))
			}
			committedOnce(t, out, 1000, 2000)

			// Put the object back: the job resumes from the newest
			// checkpoint, and ends exactly once.
			if err := store.Put(context.Background(), key, original); err != nil {
				t.Fatal(err)
			}
			rpRestartExact(t, job, n, out, store, newer)
		})
	}
}

// TestFileSinkDamagedNewestCheckpointRefusedOnFailover: the same damage
// made while the job runs, after its two checkpoints; then a task fails.
// The failover must not fall back to the older checkpoint: the job fails
// (Wait never returns nil) with an error wrapping ErrFallbackRefused that
// names the damaged object, and the committed output holds no record
// twice. Putting the object back and starting again ends exactly once.
func TestFileSinkDamagedNewestCheckpointRefusedOnFailover(t *testing.T) {
	for _, d := range frDamages {
		t.Run(d.name, func(t *testing.T) {
			const n = 6000
			job := "refused-failover"
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
			key, original := d.apply(t, store, job, newer, "count#1")
			gate.SetLimit(n) // record 2500 fails the count once
			err = waitJob(t, j)
			var je *actors.JobError
			if !errors.As(err, &je) {
				t.Fatalf("Wait: %v, want a JobError", err)
			}
			t.Logf("refusal: %v", err)
			frCheckRefusal(t, err, key)
			for _, r := range ev.of(actors.EventRestoring) {
				if r.Checkpoint == older {
					t.Fatalf("the failover restored the older checkpoint %d, past the damaged %d", older, newer)
				}
			}
			if c := ev.of(actors.EventCheckpointCompleted); len(c) != 2 {
				t.Fatalf("%d checkpoints completed, want the 2 the test took", len(c))
			}
			committedOnce(t, out, 1000, 2000)

			if err := store.Put(context.Background(), key, original); err != nil {
				t.Fatal(err)
			}
			rpRestartExact(t, job, n, out, store, newer)
		})
	}
}

// TestFileSinkDamagedFinalCheckpointRefused: a job with the file sink runs
// to the end (its final checkpoint committed every record), and a state
// object of its final checkpoint is then damaged. Starting it again must
// neither fall back to the checkpoint before and run the finished job's
// tail again (committing it twice) nor succeed: Start fails with an error
// wrapping ErrFallbackRefused that names the damaged object, and the
// committed output still holds every record once.
func TestFileSinkDamagedFinalCheckpointRefused(t *testing.T) {
	for _, d := range frDamages {
		t.Run(d.name, func(t *testing.T) {
			const n = 6000
			job := "refused-final"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			gate := testsrc.NewGate(1000)
			var ev events
			j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &ev)...)
			if err != nil {
				t.Fatal(err)
			}
			gate.WaitReached(t, 1000)
			if _, err := j.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(n)
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			var final uint64
			for _, c := range ev.of(actors.EventCheckpointCompleted) {
				if c.Final {
					final = c.Checkpoint
				}
			}
			if final == 0 {
				t.Fatal("no final checkpoint completed")
			}
			seen, _ := readParts(t, out)
			exactlyOnce(t, seen, n)
			key, _ := d.apply(t, store, job, final, "count#1")

			var ev2 events
			j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), rpOpts(t, store, &ev2)...)
			if err == nil {
				werr := waitJob(t, j2)
				t.Fatalf("Start succeeded with the final checkpoint damaged (the job then ended with %v, having run from %+v)", werr, ev2.of(actors.EventRunning))
			}
			t.Logf("refusal: %v", err)
			frCheckRefusal(t, err, key)
			seen, _ = readParts(t, out)
			exactlyOnce(t, seen, n)
		})
	}
}

// TestFileSinkDeletedSavepointUnderRecoveryPointRefused: a savepoint the
// job runs on after is also written as a checkpoint (pointing at the
// savepoint's objects), so the file sink commits at it. Deleting that
// savepoint leaves the newest checkpoint unusable: Start must not fall
// back to the checkpoint before it, whose replay would commit again what
// the savepoint's completion committed; it fails with ErrFallbackRefused,
// and the committed output holds no record twice.
func TestFileSinkDeletedSavepointUnderRecoveryPointRefused(t *testing.T) {
	const n = 6000
	job := "refused-savepoint"
	out := t.TempDir()
	store, err := snapshots.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gate := testsrc.NewGate(1000)
	j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, gate, 0), actors.WithStore(store),
		actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	older, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(2000)
	gate.WaitReached(t, 2000)
	id, err := j.Savepoint(context.Background(), "mid")
	if err != nil {
		t.Fatal(err)
	}
	// The savepoint is the newest checkpoint: whether or not its commit
	// reached the sinks before the stop, they commit at it.
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	if !rfManifestExists(t, store, job, id) {
		t.Fatalf("the savepoint %d was not written as a checkpoint", id)
	}
	if err := j.Checkpoints().DeleteSavepoint(context.Background(), "mid"); err != nil {
		t.Fatal(err)
	}
	var ev events
	j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), actors.WithStore(store),
		actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)), actors.WithListener(ev.listen))
	if err == nil {
		werr := waitJob(t, j2)
		seen, _ := readParts(t, out)
		var dup int
		for _, c := range seen {
			if c > 1 {
				dup++
			}
		}
		t.Fatalf("Start succeeded with the savepoint under the newest checkpoint %d deleted: the job ran from %+v (older checkpoint %d), ended with %v, and committed %d values twice or more",
			id, ev.of(actors.EventRunning), older, werr, dup)
	}
	t.Logf("refusal: %v", err)
	if !errors.Is(err, snapshots.ErrFallbackRefused) || !strings.Contains(err.Error(), `"out"`) {
		t.Fatalf("Start: %v, want an error wrapping ErrFallbackRefused naming the sink", err)
	}
	committedOnce(t, out, 1000, 2000)
}
