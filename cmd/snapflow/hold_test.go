package main

import (
	"slices"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// putOrigin records o as the origin of job wc in f's store.
func putOrigin(t *testing.T, f *fixture, o *messages.Origin) {
	t.Helper()
	if err := snapshots.NewCheckpoints(f.store, "wc", nil).PutOrigin(t.Context(), o); err != nil {
		t.Fatal(err)
	}
}

// The job was started from its checkpoint 1 and has completed no
// checkpoint of its own (ids from 4): recovery restores checkpoint 1, so
// deleting it is refused without --force, although checkpoint 2 is newer.
func TestDeleteOriginCheckpointRefused(t *testing.T) {
	f := newDirFixture(t, "wc")
	putOrigin(t, f, &messages.Origin{CheckpointId: 1, FirstId: 4})
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitFailed,
		"refusing to delete checkpoint 1 of job wc: it is the job's origin", "id 4 or above", "--force")
	if got := ids(t, f); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("left %q, want every checkpoint", got)
	}
	runCLI("checkpoints", "delete", "--store", f.url, "--force", "1").want(t, exitOK)
	if got := ids(t, f); !slices.Equal(got, []string{"2", "3"}) {
		t.Errorf("left %q after --force", got)
	}
}

// Once the job has a usable checkpoint of its own, its origin may go.
func TestDeleteOriginCheckpointOnceOwn(t *testing.T) {
	f := newDirFixture(t, "wc")
	putOrigin(t, f, &messages.Origin{CheckpointId: 1, FirstId: 2})
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitOK)
}

// The job was started from savepoint v1 (or stopped there) and has no
// checkpoint of its own: deleting v1 is refused without --force.
func TestDeleteOriginSavepointRefused(t *testing.T) {
	f, _ := newSavepointFixture(t, newDirFixture)
	putOrigin(t, f, &messages.Origin{Savepoint: "v1", CheckpointId: 7, FirstId: 8})
	runCLI("savepoints", "delete", "--store", f.url, "v1").want(t, exitFailed,
		"refusing to delete savepoint v1 of job wc: it is the job's origin", "--force")
	runCLI("savepoints", "verify", "--store", f.url, "v1").want(t, exitOK)
	runCLI("savepoints", "delete", "--store", f.url, "old").want(t, exitOK) // not the origin
	runCLI("savepoints", "delete", "--store", f.url, "--force", "v1").want(t, exitOK)
}

// While a live holder (a running job) holds the job's lease, the delete
// commands refuse, naming it, and delete nothing; once it lets the job go
// they delete, and leave the lease released.
func TestDeleteRefusedWhileHeld(t *testing.T) {
	f, _ := newSavepointFixture(t, newDirFixture)
	job := snapshots.NewCheckpoints(f.store, "wc", nil)
	l, err := job.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "running-job"})
	if err != nil {
		t.Fatal(err)
	}
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitFailed,
		"refusing to delete checkpoint 1 of job wc while the job runs", l.GetHolder())
	runCLI("savepoints", "delete", "--store", f.url, "old").want(t, exitFailed,
		"refusing to delete savepoint old of job wc while the job runs", l.GetHolder())
	if got := ids(t, f); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("left %q, want every checkpoint", got)
	}
	runCLI("savepoints", "verify", "--store", f.url, "old").want(t, exitOK)
	if err := job.ReleaseLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	runCLI("checkpoints", "delete", "--store", f.url, "1").want(t, exitOK)
	runCLI("savepoints", "delete", "--store", f.url, "old").want(t, exitOK)
	// The CLI released the lease it took: a job claims it.
	again := snapshots.NewCheckpoints(f.store, "wc", nil)
	if _, err := again.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "next-run"}); err != nil {
		t.Fatalf("a job after the deletes: %v", err)
	}
	if err := again.ReleaseLease(t.Context()); err != nil {
		t.Fatal(err)
	}
}
