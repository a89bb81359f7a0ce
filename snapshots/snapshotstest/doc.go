// Package snapshotstest is the conformance suite of snapshots.Store.
//
// Every Store implementation runs it from its tests, as with
// testing/fstest.TestFS:
//
//	func TestDir(t *testing.T) {
//		snapshotstest.Run(t, func(t *testing.T) snapshots.Store {
//			s, err := snapshots.NewDir(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			return s
//		})
//	}
//
// The suite checks the Store contract (atomic overwrite, not-found errors,
// sorted prefix listing, idempotent delete, key rules, concurrency and
// cancellation) and then the behaviour of snapshots.Checkpoints on top of
// the store: recovery from the newest usable checkpoint, fallback on
// corrupt or missing objects, the error when no complete checkpoint is
// usable, retention of the newest usable checkpoints, the truth of a
// manifest write that failed (through a wrapper that injects faults around
// the store), the cleanup of aborted checkpoints and verification; and
// last the coordinator lease: claims, checks, corrupt lease objects, a
// lease that the checkpoint scans and deletions leave alone, and the
// window between a check and a manifest write; and savepoints: the round
// trip, a manifest never overwritten, loads that refuse a corrupt or
// missing object rather than fall back, self-contained manifests, listing,
// verification and deletion, savepoints that checkpoint scans, retention
// and cleanup leave alone, the origin marker, retention of an origin
// checkpoint, LoadLatestSince and LoadCheckpoint.
//
// StateHandle reads a task's state handle out of a stored manifest, for
// tests elsewhere that damage or inspect a checkpoint's objects.
//
// The guide is docs/stores.md in the repository.
package snapshotstest
