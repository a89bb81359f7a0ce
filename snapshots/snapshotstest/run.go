package snapshotstest

import (
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// newStoreFunc returns a new, empty store for one test. It may register cleanup
// with t; the suite closes the store itself.
type newStoreFunc func(t *testing.T) snapshots.Store

type test struct {
	name string
	fn   func(t *testing.T, newStore newStoreFunc)
}

// Run runs the conformance suite. Each subtest gets fresh, empty stores from
// newStore, runs in parallel with the others and closes its stores when it
// ends. Run it with -race.
func Run(t *testing.T, newStore func(t *testing.T) snapshots.Store) {
	t.Helper()
	open := func(t *testing.T) snapshots.Store {
		t.Helper()
		s := newStore(t)
		if s == nil {
			t.Fatal("newStore returned nil")
		}
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("Close %s: %v", s, err)
			}
		})
		return s
	}
	for _, group := range []struct {
		name  string
		tests []test
	}{{"Store", storeTests}, {"Create", createTests}, {"Checkpoints", checkpointTests}, {"Lease", leaseTests}, {"Savepoints", savepointTests}, {"KeyGroups", append(keyGroupTests, streamTests...)}, {"Incremental", incrementalTests}, {"Inline", inlineTests}, {"DiskFiles", diskFileTests}} {
		t.Run(group.name, func(t *testing.T) {
			for _, tc := range group.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, open)
				})
			}
		})
	}
}
