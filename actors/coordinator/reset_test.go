package coordinator

import (
	"errors"
	"testing"
	"time"
)

func TestReset(t *testing.T) {
	c := New(Config{Interval: 10 * time.Second, TolerableFailures: 5}, []string{"a", "b"}, 1)
	c.Tick(at(0))
	expect(t, failJobs(failOnce(c, at(time.Second), 1))) // one failure: chk 1
	expect(t, c.Tick(at(11*time.Second)), "Trigger chk=2")
	c.RequestCheckpoint(at(12*time.Second), 7)
	c.Ack(at(12*time.Second), ack(2, "a"))
	acts := c.Reset(at(15 * time.Second))
	expect(t, acts,
		`Aborted chk=2 reason="job failover"`,
		`RequestDone req=7 err="coordinator: job failover: request 7 not triggered"`)
	if !errors.Is(acts[1].Err, ErrFailover) {
		t.Fatalf("RequestDone error %v does not wrap ErrFailover", acts[1].Err)
	}
	if s := c.Stats(); s.ConsecutiveFailures != 1 || s.Aborted != 2 {
		t.Fatalf("Stats() = %+v: Reset must abort without counting a failure", s)
	}
	if _, ok := c.Pending(); ok {
		t.Fatal("pending after Reset")
	}
	// Late messages for the aborted checkpoint are ignored.
	expect(t, c.Ack(at(16*time.Second), ack(2, "b")))
	// Timing restarts from the reset; ids keep increasing.
	if next, _ := c.NextTrigger(); !next.Equal(at(25 * time.Second)) {
		t.Fatalf("NextTrigger() = t0+%v, want t0+25s", next.Sub(t0))
	}
	expect(t, c.Tick(at(25*time.Second)), "Trigger chk=3")
}

func TestResetFailsPendingRequests(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	expect(t, c.Reset(at(time.Second)),
		`Aborted chk=1 reason="job failover"`,
		`RequestDone req=1 chk=1 err="coordinator: job failover: checkpoint 1 aborted"`)
	expect(t, c.Reset(at(time.Second))) // nothing left
}

func TestResetForgetsFinish(t *testing.T) {
	c := New(Config{Interval: time.Second}, []string{"a"}, 1)
	expect(t, c.Finish(at(0)), "Trigger chk=1 final")
	expect(t, c.Reset(at(time.Second)), `Aborted chk=1 final reason="job failover"`)
	// Periodic checkpoints resume: the sources replay.
	expect(t, c.Tick(at(2*time.Second)), "Trigger chk=2")
	c.Ack(at(2*time.Second), ack(2, "a"))
	c.ManifestWritten(at(2*time.Second), 2, nil)
	expect(t, c.Finish(at(3*time.Second)), "Trigger chk=3 final")
}

// TestResetWhileWritingIsInDoubt: a failover during the manifest write does
// not abort the checkpoint, whose manifest may still land: it is handed to
// the shell with its manual requests, counted neither way.
func TestResetWhileWritingIsInDoubt(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 4)
	expect(t, c.Ack(at(0), ack(1, "a")), "WriteManifest chk=1 acks=[a]")
	c.RequestCheckpoint(at(0), 5) // queued behind checkpoint 1
	expect(t, c.Reset(at(time.Second)),
		"InDoubt chk=1 reqs=[4]",
		`RequestDone req=5 err="coordinator: job failover: request 5 not triggered"`)
	if s := c.Stats(); s.Aborted != 0 || s.Completed != 0 {
		t.Fatalf("Stats() = %+v: an in-doubt checkpoint is neither aborted nor completed", s)
	}
	// The write's late outcome is the shell's business now.
	expect(t, c.ManifestWritten(at(2*time.Second), 1, nil))
	expect(t, c.RequestCheckpoint(at(3*time.Second), 6), "Trigger chk=2")
}
