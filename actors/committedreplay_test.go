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

// These tests damage, in other ways than a state object of the newest
// checkpoint, what a job with the file sink resumes from, and check that
// no start or failover replays output its sinks committed: the newest
// checkpoint's manifest, a source's or a sink's state, a deleted object;
// a finished job's final checkpoint; the savepoint a stopped job resumes
// from; a savepoint written as the job's newest checkpoint.

// rpHarm is a way to damage one object.
type rpHarm struct {
	name string
	// apply damages the object at key, whose manifest is at manifest and
	// describes it as the state of task ("" when key is a manifest).
	apply func(t *testing.T, store snapshots.Store, manifest, task, key string)
}

func rpPutBytes(t *testing.T, store snapshots.Store, key string, f func([]byte) []byte) {
	t.Helper()
	data, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Put(context.Background(), key, f(append([]byte(nil), data...))); err != nil {
		t.Fatal(err)
	}
}

var (
	rpGarbage = rpHarm{"garbage", func(t *testing.T, store snapshots.Store, _, _, key string) {
		rpPutBytes(t, store, key, func([]byte) []byte { return []byte("garbage, not an object") })
	}}
	rpTruncated = rpHarm{"truncated", func(t *testing.T, store snapshots.Store, _, _, key string) {
		rpPutBytes(t, store, key, func(b []byte) []byte { return b[:len(b)/2] })
	}}
	rpLastByte = rpHarm{"last byte", func(t *testing.T, store snapshots.Store, _, _, key string) {
		rpPutBytes(t, store, key, func(b []byte) []byte { b[len(b)-1] ^= 0xff; return b })
	}}
	rpDeleted = rpHarm{"deleted", func(t *testing.T, store snapshots.Store, _, _, key string) {
		if err := store.Delete(context.Background(), key); err != nil {
			t.Fatal(err)
		}
	}}
	// rpKeyGroup flips a byte inside one key group's entries: the heads
	// verify, the key group does not.
	rpKeyGroup = rpHarm{"one key group", func(t *testing.T, store snapshots.Store, manifest, task, key string) {
		h := snapshotstest.StateHandle(t, store, manifest, task)
		if len(h.GetKeyGroups()) == 0 {
			t.Fatalf("%s: the state of %s holds no key groups", manifest, task)
		}
		sec := h.GetKeyGroups()[len(h.GetKeyGroups())/2]
		if sec.GetKey() != "" && sec.GetKey() != key {
			t.Fatalf("key group %d of %s lies in another object, %s", sec.GetKeyGroup(), task, sec.GetKey())
		}
		rpPutBytes(t, store, key, func(b []byte) []byte { b[sec.GetOffset()+sec.GetLength()-1] ^= 0xff; return b })
	}}
)

func rpOpts(t *testing.T, store snapshots.Store, ev *events) []actors.Option {
	return []actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen)}
}

// rpRestartRefused starts job again (a plain start) and returns its error:
// Start's, or when Start succeeds, the job's end (a failed restore of its
// tasks), which must not be nil. No checkpoint but want may be restored.
func rpRestartRefused(t *testing.T, job string, n int64, out string, store snapshots.Store, want uint64) error {
	t.Helper()
	var ev events
	j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), rpOpts(t, store, &ev)...)
	if err == nil {
		err = waitJob(t, j)
		if err == nil {
			t.Fatal("the restart ended nil")
		}
	}
	for _, r := range ev.of(actors.EventRestoring) {
		if r.Checkpoint != want {
			t.Fatalf("the restart restored checkpoint %d (savepoint %q), want none but %d", r.Checkpoint, r.Savepoint, want)
		}
	}
	if c := ev.count(actors.EventCheckpointCompleted); c > 0 {
		t.Fatalf("the refused restart completed %d checkpoints", c)
	}
	t.Logf("refusal: %v", err)
	return err
}

// rpRestartExact starts job again and checks that it resumes from
// checkpoint from and ends with every record once in the committed files.
func rpRestartExact(t *testing.T, job string, n int64, out string, store snapshots.Store, from uint64) {
	t.Helper()
	rpRestartExactWith(t, job, n, out, from, func(ev *events) []actors.Option { return rpOpts(t, store, ev) })
}

// rpRestartExactWith is rpRestartExact with the job's options.
func rpRestartExactWith(t *testing.T, job string, n int64, out string, from uint64, opts func(*events) []actors.Option) {
	t.Helper()
	var ev events
	j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), opts(&ev)...)
	if err != nil {
		t.Fatalf("Start once the object is back: %v", err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != from {
		t.Fatalf("the repaired job ran from %+v, want checkpoint %d", r, from)
	}
	seen, hidden := readParts(t, out)
	exactlyOnce(t, seen, n)
	if len(hidden) > 0 {
		t.Errorf("in-progress files left: %v", hidden)
	}
}

// rpRefusedNaming checks that err wraps ErrFallbackRefused and names key.
func rpRefusedNaming(t *testing.T, err error, key string) {
	t.Helper()
	if !errors.Is(err, snapshots.ErrFallbackRefused) {
		t.Fatalf("error %v, want one wrapping snapshots.ErrFallbackRefused", err)
	}
	if !strings.Contains(err.Error(), key) {
		t.Errorf("the refusal does not name the damaged object %s", key)
	}
}

// rpRefusedUntilRepaired damages key (of checkpoint id's manifest, the
// state of task, or the manifest itself with task "") with harm, checks
// that a restart is refused naming key and that the committed files hold
// 0..committed-1 once and nothing at or above below, then puts key back
// and checks that a restart resumes from id and ends exactly once.
func rpRefusedUntilRepaired(t *testing.T, job string, n int64, out string, store snapshots.Store, id uint64, manifest, task, key string, harm rpHarm, committed, below int64) {
	t.Helper()
	original, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	harm.apply(t, store, manifest, task, key)
	err = rpRestartRefused(t, job, n, out, store, id)
	rpRefusedNaming(t, err, key)
	committedOnce(t, out, committed, below)
	if err := store.Put(context.Background(), key, original); err != nil {
		t.Fatal(err)
	}
	rpRestartExact(t, job, n, out, store, id)
}

// TestReplayDamagedNewestObjects: checkpoints after 0..999 and
// 0..1999, a stop, and then one object of the newest checkpoint damaged:
// its manifest, the count's state deleted or cut short, the source's
// state, a sink's state (its pending transactions). A plain start must
// fail with an error wrapping ErrFallbackRefused that names the object,
// restore no older checkpoint, and leave the committed output without a
// record twice; once the object is back, the job resumes from the newest
// checkpoint and ends exactly once.
func TestReplayDamagedNewestObjects(t *testing.T) {
	for _, tc := range []struct {
		task   string // "": the manifest
		rpHarm rpHarm
	}{
		{"", rpGarbage},
		{"", rpTruncated},
		{"", rpLastByte},
		{"count#1", rpDeleted},
		{"count#1", rpTruncated},
		{"source#0", rpGarbage},
		{"source#0", rpLastByte},
		{"out#0", rpGarbage},
		{"out#1", rpLastByte},
		{"out#1", rpDeleted},
	} {
		what := tc.task
		if what == "" {
			what = "manifest"
		}
		t.Run(what+", "+tc.rpHarm.name, func(t *testing.T) {
			ctx := context.Background()
			const n = 5000
			const job = "replay-objects"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &events{})...)
			if err != nil {
				t.Fatal(err)
			}
			_, newer := twoCheckpoints(t, j, gate)
			if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
				t.Fatalf("Stop: %v", err)
			}
			manifest := snapshots.ManifestKey(job, newer)
			key := manifest
			if tc.task != "" {
				key = stateKey(t, store, job, newer, tc.task)
			}
			rpRefusedUntilRepaired(t, job, n, out, store, newer, manifest, tc.task, key, tc.rpHarm, 1000, 2000)
		})
	}
}

// TestReplayDamagedFinalCheckpoint: a job with the file sink
// runs to its end (a checkpoint after 0..999, then the final one); a
// state object of its final checkpoint is then damaged. Starting the
// finished job again must not run its tail again from the older
// checkpoint, which would commit 1000..n-1 twice: Start fails (refusing
// the fallback, or saying the job finished), and the committed output
// still holds every record once.
func TestReplayDamagedFinalCheckpoint(t *testing.T) {
	for _, h := range []rpHarm{rpGarbage, rpDeleted, rpKeyGroup} {
		t.Run(h.name, func(t *testing.T) {
			ctx := context.Background()
			const n = 5000
			const job = "replay-final"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var ev events
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &ev)...)
			if err != nil {
				t.Fatal(err)
			}
			gate.WaitReached(t, 1000)
			if _, err := j.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(n)
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			final := ev.of(actors.EventCheckpointCompleted)
			last := final[len(final)-1]
			if !last.Final {
				t.Fatalf("the last completed checkpoint, %d, is not final", last.Checkpoint)
			}
			seen, _ := readParts(t, out)
			exactlyOnce(t, seen, n)

			manifest := snapshots.ManifestKey(job, last.Checkpoint)
			key := stateKey(t, store, job, last.Checkpoint, "count#1")
			h.apply(t, store, manifest, "count#1", key)
			err = rpRestartRefused(t, job, n, out, store, last.Checkpoint)
			if !errors.Is(err, snapshots.ErrFallbackRefused) && !errors.Is(err, actors.ErrAlreadyFinished) {
				t.Fatalf("restart of the finished job with its final checkpoint damaged: %v, want ErrFallbackRefused or ErrAlreadyFinished", err)
			}
			if errors.Is(err, snapshots.ErrFallbackRefused) && !strings.Contains(err.Error(), key) {
				t.Errorf("the refusal does not name the damaged object %s", key)
			}
			seen, _ = readParts(t, out)
			exactlyOnce(t, seen, n)
		})
	}
}

// TestReplayDamagedOriginSavepoint: a job with the file sink
// stops with a savepoint "sp" after 0..1999 (its sinks commit there, and
// it is the job's origin); a state object of the savepoint is then
// damaged, or the savepoint deleted. A plain start must fail rather than
// restore the job's checkpoint before the savepoint (0..999), whose replay
// would commit 1000..1999 again; once the object is back, the job resumes
// from the savepoint and ends exactly once.
func TestReplayDamagedOriginSavepoint(t *testing.T) {
	for _, h := range []rpHarm{rpGarbage, rpKeyGroup, rpDeleted, {name: "savepoint deleted"}} {
		t.Run(h.name, func(t *testing.T) {
			ctx := context.Background()
			const n = 5000
			const job = "replay-origin"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &events{})...)
			if err != nil {
				t.Fatal(err)
			}
			gate.WaitReached(t, 1000)
			if _, err := j.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(2000)
			gate.WaitReached(t, 2000)
			sp := stopWithSavepoint(t, j, "sp")
			committedOnce(t, out, 2000, 2000)

			manifest := snapshots.SavepointManifestKey(job, "sp")
			key := savepointStateKey(t, store, job, "sp", "count#1")
			original, err := store.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if h.apply == nil {
				if err := snapshots.NewCheckpoints(store, job, nil).DeleteSavepoint(ctx, "sp"); err != nil {
					t.Fatal(err)
				}
			} else {
				h.apply(t, store, manifest, "count#1", key)
			}
			err = rpRestartRefused(t, job, n, out, store, sp)
			if h.apply != nil && !strings.Contains(err.Error(), key) {
				t.Errorf("the error does not name the damaged object %s", key)
			}
			if !strings.Contains(err.Error(), `"sp"`) {
				t.Errorf("the error does not name the savepoint the job resumes from")
			}
			committedOnce(t, out, 2000, 2000)
			if h.apply == nil {
				return
			}
			if err := store.Put(ctx, key, original); err != nil {
				t.Fatal(err)
			}
			rpRestartExact(t, job, n, out, store, sp)
		})
	}
}

// TestReplayDamagedSavepointCheckpoint: a savepoint "sp" taken
// while the job runs (not a stop) is written as the job's newest
// checkpoint too, pointing at the savepoint's objects, and the file sinks
// commit at it. A state object of the savepoint is then damaged, or the
// savepoint deleted (`snapflow savepoints delete`): after a stop, a plain
// start, and while the job runs, a failover, must fail with an error
// wrapping ErrFallbackRefused rather than restore the checkpoint before
// it, whose replay would commit 1000..1999 again.
func TestReplayDamagedSavepointCheckpoint(t *testing.T) {
	for _, tc := range []struct {
		rpHarm   rpHarm
		failover bool
	}{
		{rpGarbage, false},
		{rpKeyGroup, false},
		{rpHarm{name: "savepoint deleted"}, false},
		{rpGarbage, true},
		{rpHarm{name: "savepoint deleted"}, true},
	} {
		name := tc.rpHarm.name + ", start"
		if tc.failover {
			name = tc.rpHarm.name + ", failover"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const n = 5000
			const job = "replay-savepoint"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var failAt int64
			if tc.failover {
				failAt = 2500
			}
			var ev events
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, failAt), rpOpts(t, store, &ev)...)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			gate.WaitReached(t, 1000)
			older, err := j.Checkpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(2000)
			gate.WaitReached(t, 2000)
			sp, err := j.Savepoint(ctx, "sp")
			if err != nil {
				t.Fatal(err)
			}
			m, err := j.Checkpoints().ReadManifest(ctx, sp)
			if err != nil {
				t.Fatalf("the savepoint's checkpoint %d: %v", sp, err)
			}
			key := snapshotstest.StateHandle(t, store, snapshots.ManifestKey(job, sp), "count#1").GetKey()
			if !strings.HasPrefix(key, snapshots.SavepointPrefix(job, "sp")) {
				t.Fatalf("checkpoint %d (%v) keeps the count's state at %s, not in the savepoint", sp, m.GetSavepoint(), key)
			}
			harmIt := func() {
				if tc.rpHarm.apply == nil {
					if err := snapshots.NewCheckpoints(store, job, nil).DeleteSavepoint(ctx, "sp"); err != nil {
						t.Fatal(err)
					}
					return
				}
				tc.rpHarm.apply(t, store, snapshots.SavepointManifestKey(job, "sp"), "count#1", key)
			}
			if tc.failover {
				harmIt()
				gate.SetLimit(n) // record 2500 fails the count once
				err = waitJob(t, j)
				t.Logf("refusal: %v", err)
				for _, r := range ev.of(actors.EventRestoring) {
					if r.Checkpoint == older {
						t.Fatalf("the failover restored checkpoint %d, before the savepoint's %d", older, sp)
					}
				}
				if err == nil {
					t.Fatal("the job ended nil")
				}
			} else {
				if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
					t.Fatalf("Stop: %v", err)
				}
				harmIt()
				err = rpRestartRefused(t, job, n, out, store, sp)
			}
			if tc.rpHarm.apply == nil { // any of its objects may be found missing first
				key = snapshots.SavepointPrefix(job, "sp")
			}
			rpRefusedNaming(t, err, key)
			committedOnce(t, out, 1000, 2000)
		})
	}
}

// TestReplayDamagedFirstOwnCheckpoint: a job with the file sink stops
// with a savepoint "sp" after 0..1999 (its origin), is started again
// (plainly, so from the savepoint), completes its first checkpoint of its
// own after 0..2999 and stops; a state object of that checkpoint is then
// damaged. A plain start must fail with an error wrapping
// ErrFallbackRefused rather than resume from the origin savepoint, whose
// replay would commit 2000..2999 again; once the object is back the job
// resumes from its checkpoint and ends exactly once.
func TestReplayDamagedFirstOwnCheckpoint(t *testing.T) {
	ctx := context.Background()
	const n = 5000
	const job = "replay-own"
	out := t.TempDir()
	store, err := snapshots.NewDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	gate := testsrc.NewGate(2000)
	j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &events{})...)
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 2000)
	sp := stopWithSavepoint(t, j, "sp")

	var ev events
	sub := ev.subscribe()
	gate = testsrc.NewGate(3000)
	j, err = actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 0), rpOpts(t, store, &ev)...)
	if err != nil {
		t.Fatal(err)
	}
	if r := waitFor(t, sub, "the job running", func(e actors.Event) bool { return e.Kind == actors.EventRunning }); r.Savepoint != "sp" {
		t.Fatalf("the plain start after the stop ran from %+v, want savepoint sp", r)
	}
	gate.WaitReached(t, 3000)
	own, err := j.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if own <= sp {
		t.Fatalf("the job's own checkpoint %d is not after its savepoint's %d", own, sp)
	}
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Stop: %v", err)
	}
	key := stateKey(t, store, job, own, "count#0")
	rpRefusedUntilRepaired(t, job, n, out, store, own, snapshots.ManifestKey(job, own), "count#0", key, rpGarbage, 2000, 3000)
}

// TestReplayDamagedAfterFailover: a job with the file sink completes
// checkpoints after 0..999 and 0..1999, fails over once (restoring the
// newest, which verifies), and only then is a state object of that
// checkpoint damaged, or (heads intact) one key group of it; the job then
// fails over again. Having restored and verified the checkpoint once must
// not let the second failover take the damage for sound, nor fall back
// to the older checkpoint: the job either restores state that matches
// the checkpoint (held from the first restore) and ends exactly once, or
// fails with an error wrapping ErrFallbackRefused leaving no record twice.
func TestReplayDamagedAfterFailover(t *testing.T) {
	for _, h := range []rpHarm{rpGarbage, rpKeyGroup, rpDeleted} {
		t.Run(h.name, func(t *testing.T) {
			ctx := context.Background()
			const n = 5000
			const job = "replay-twice"
			out := t.TempDir()
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var ev events
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, 2500, 3500), rpOpts(t, store, &ev)...)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			older, newer := twoCheckpoints(t, j, gate)
			sub := ev.subscribe()
			gate.SetLimit(3000) // record 2500 fails the count
			waitFor(t, sub, "the restore", func(e actors.Event) bool { return e.Kind == actors.EventRestoring })
			waitFor(t, sub, "the job running again", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
			if r := ev.of(actors.EventRestoring); r[0].Checkpoint != newer {
				t.Fatalf("the first failover restored checkpoint %d, want %d", r[0].Checkpoint, newer)
			}
			key := stateKey(t, store, job, newer, "count#1")
			h.apply(t, store, snapshots.ManifestKey(job, newer), "count#1", key)
			gate.SetLimit(n) // record 3500 fails the count
			err = waitJob(t, j)
			t.Logf("the job ended: %v", err)
			for _, r := range ev.of(actors.EventRestoring) {
				if r.Checkpoint == older {
					t.Fatalf("a failover restored checkpoint %d, before the newest, %d", older, newer)
				}
			}
			if err != nil {
				rpRefusedNaming(t, err, key)
				committedOnce(t, out, 1000, 2000)
				return
			}
			seen, hidden := readParts(t, out)
			exactlyOnce(t, seen, n)
			if len(hidden) > 0 {
				t.Errorf("in-progress files left: %v", hidden)
			}
		})
	}
}
