package snapshotstest

import (
	"context"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// StateHandle returns the handle of task's state object in the manifest
// stored at key manifest, for tests that damage or inspect that object. A
// manifest that cannot be read, or that names no state object of task (an
// inline state, or none), fails t.
func StateHandle(t testing.TB, store snapshots.Store, manifest, task string) *messages.StateHandle {
	t.Helper()
	data, err := store.Get(context.Background(), manifest)
	if err != nil {
		t.Fatal(err)
	}
	m := &messages.Manifest{}
	if err := snapshots.DecodeObject(data, snapshots.KindManifest, m); err != nil {
		t.Fatal(err)
	}
	for _, e := range m.GetTasks() {
		if e.GetTaskId() == task {
			if e.GetState().GetKey() == "" || len(e.GetState().GetInline()) > 0 {
				t.Fatalf("%s: the state of %s is inline", manifest, task)
			}
			return e.GetState()
		}
	}
	t.Fatalf("%s names no state of %s", manifest, task)
	return nil
}
