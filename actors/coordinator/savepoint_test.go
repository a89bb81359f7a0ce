package coordinator

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// TestSavepointOwnCheckpoint: a savepoint gets a checkpoint of its own,
// ahead of queued checkpoint requests, marked in every action.
func TestSavepointOwnCheckpoint(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	expect(t, c.RequestCheckpoint(at(0), 1), "Trigger chk=1")
	expect(t, c.RequestCheckpoint(at(0), 2))
	expect(t, c.RequestSavepoint(at(0), 3))
	c.Ack(at(0), ack(1, "a"))
	expect(t, c.ManifestWritten(at(0), 1, nil), "Completed chk=1", "RequestDone req=1 chk=1", "Trigger chk=2 savepoint=3")
	expect(t, c.Ack(at(0), ack(2, "a")), "WriteManifest chk=2 savepoint=3 acks=[a]")
	expect(t, c.ManifestWritten(at(0), 2, nil), "Completed chk=2 savepoint=3", "RequestDone req=3 chk=2", "Trigger chk=3")
	if s := c.Stats(); s.LastCompleted != 1 {
		t.Errorf("LastCompleted = %d: a savepoint counted as the last checkpoint", s.LastCompleted)
	}
}

// TestSavepointFailureNotCounted: failed savepoints never fail the job,
// whatever the tolerance.
func TestSavepointFailureNotCounted(t *testing.T) {
	c := New(Config{TolerableFailures: 0}, []string{"a"}, 1)
	for i := uint64(1); i <= 3; i++ {
		expect(t, c.RequestSavepoint(at(0), i), fmt.Sprintf("Trigger chk=%d savepoint=%d", i, i))
		acts := c.Decline(at(0), decline(i, "a", "no"))
		for _, a := range acts {
			if a.Kind == FailJob {
				t.Fatalf("savepoint %d failing failed the job: %s", i, format(acts))
			}
		}
		if acts[0].Kind != Aborted || acts[0].Savepoint != i || acts[1].Kind != RequestDone || !errors.Is(acts[1].Err, ErrAborted) {
			t.Fatalf("actions %s", format(acts))
		}
	}
	// A checkpoint failing still counts.
	c.RequestCheckpoint(at(0), 9)
	var failed bool
	for _, a := range c.Decline(at(0), decline(4, "a", "no")) {
		failed = failed || a.Kind == FailJob
	}
	if !failed {
		t.Error("a failed checkpoint with no tolerance did not fail the job")
	}
}

// TestSavepointDoesNotResetFailures: a completed savepoint does not hide
// checkpoints that keep failing.
func TestSavepointDoesNotResetFailures(t *testing.T) {
	c := New(Config{TolerableFailures: 1}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	c.Decline(at(0), decline(1, "a", "no")) // 1 in a row: tolerated
	c.RequestSavepoint(at(0), 2)
	c.Ack(at(0), ack(2, "a"))
	expect(t, c.ManifestWritten(at(0), 2, nil), "Completed chk=2 savepoint=2", "RequestDone req=2 chk=2")
	c.RequestCheckpoint(at(0), 3)
	var failed bool
	for _, a := range c.Decline(at(0), decline(3, "a", "no")) {
		failed = failed || a.Kind == FailJob
	}
	if !failed {
		t.Errorf("two checkpoints failed in a row around a savepoint, one tolerated, and the job goes on: %+v", c.Stats())
	}
}

// TestSavepointAfterFinish: once the sources have ended, a savepoint is
// refused, queued ones included.
func TestSavepointAfterFinish(t *testing.T) {
	c := New(Config{Interval: time.Hour}, []string{"a"}, 1)
	expect(t, c.RequestCheckpoint(at(0), 1), "Trigger chk=1")
	c.RequestSavepoint(at(0), 2)
	acts := c.Finish(at(0))
	if len(acts) != 1 || acts[0].Kind != RequestDone || acts[0].Request != 2 || !errors.Is(acts[0].Err, ErrFinishing) {
		t.Fatalf("Finish with a queued savepoint: %s", format(acts))
	}
	acts = c.RequestSavepoint(at(0), 3)
	if len(acts) != 1 || !errors.Is(acts[0].Err, ErrFinishing) {
		t.Fatalf("savepoint after Finish: %s", format(acts))
	}
}

// TestSavepointFailover: a failover aborts the pending savepoint and fails
// the queued ones.
func TestSavepointFailover(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	c.RequestSavepoint(at(0), 1)
	c.RequestSavepoint(at(0), 2)
	acts := c.Reset(at(0))
	expect(t, acts, `Aborted chk=1 savepoint=1 reason="job failover"`,
		`RequestDone req=1 chk=1 err="coordinator: job failover: checkpoint 1 aborted"`,
		`RequestDone req=2 err="coordinator: job failover: request 2 not triggered"`)
}
