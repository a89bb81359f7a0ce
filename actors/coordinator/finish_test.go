package coordinator

import (
	"testing"
	"time"
)

func TestFinishWhenIdle(t *testing.T) {
	c := New(Config{Interval: time.Hour, MinPause: time.Hour}, []string{"a"}, 1)
	c.Tick(at(0))
	expect(t, c.Finish(at(time.Second)), "Trigger chk=1 final")
	expect(t, c.Finish(at(time.Second))) // idempotent
	expect(t, c.Ack(at(time.Second), ack(1, "a")), "WriteManifest chk=1 final acks=[a]")
	expect(t, c.ManifestWritten(at(time.Second), 1, nil), "Completed chk=1 final")
	if _, ok := c.NextTrigger(); ok {
		t.Fatal("NextTrigger armed after the final checkpoint")
	}
	expect(t, c.Tick(at(10*time.Hour)))
	// A request after the final checkpoint is answered by it.
	expect(t, c.RequestCheckpoint(at(10*time.Hour), 5), "RequestDone req=5 chk=1")
}

func TestFinishWhilePending(t *testing.T) {
	c := New(Config{Interval: time.Second, MinPause: time.Hour}, []string{"a"}, 1)
	c.Tick(at(0))
	expect(t, c.Tick(at(time.Hour)), "Trigger chk=1")
	expect(t, c.Finish(at(time.Hour)))
	expect(t, c.RequestCheckpoint(at(time.Hour), 3)) // queued, joins the final
	c.Ack(at(time.Hour), ack(1, "a"))
	expect(t, c.ManifestWritten(at(time.Hour), 1, nil), "Completed chk=1", "Trigger chk=2 final")
	expect(t, c.RequestCheckpoint(at(time.Hour), 4)) // joins the pending final
	c.Ack(at(time.Hour), ack(2, "a"))
	expect(t, c.ManifestWritten(at(time.Hour), 2, nil),
		"Completed chk=2 final", "RequestDone req=3 chk=2", "RequestDone req=4 chk=2")
}

func TestFinalRetried(t *testing.T) {
	c := New(Config{Timeout: time.Minute, TolerableFailures: -1}, []string{"a", "b"}, 1)
	expect(t, c.Finish(at(0)), "Trigger chk=1 final")
	expect(t, c.Decline(at(time.Second), decline(1, "b", "busy")),
		`Aborted chk=1 final reason="declined by task b: busy"`)
	// The retry waits FinalRetryPause, not a tight loop.
	expect(t, c.Tick(at(time.Second+FinalRetryPause-time.Millisecond)))
	expect(t, c.Tick(at(time.Second+FinalRetryPause)), "Trigger chk=2 final")
	expect(t, c.Tick(at(time.Minute+time.Second+FinalRetryPause)),
		`Aborted chk=2 final reason="timed out after 1m0s, waiting for 2 tasks: a, b"`)
	expect(t, c.Tick(at(time.Minute+time.Second+2*FinalRetryPause)), "Trigger chk=3 final")
	c.Ack(at(time.Hour), ack(3, "a"))
	expect(t, c.Ack(at(time.Hour), ack(3, "b")), "WriteManifest chk=3 final acks=[a,b]")
	expect(t, c.ManifestWritten(at(time.Hour), 3, nil), "Completed chk=3 final")
}

func TestFinalRetryStopsAtFailJob(t *testing.T) {
	c := New(Config{TolerableFailures: 1}, []string{"a"}, 1)
	expect(t, c.Finish(at(0)), "Trigger chk=1 final")
	expect(t, c.Decline(at(0), decline(1, "a", "x")),
		`Aborted chk=1 final reason="declined by task a: x"`)
	expect(t, c.Tick(at(FinalRetryPause)), "Trigger chk=2 final")
	expect(t, c.Decline(at(FinalRetryPause), decline(2, "a", "x")),
		`Aborted chk=2 final reason="declined by task a: x"`,
		`FailJob reason="declined by task a: x" err="coordinator: too many failed checkpoints: 2 in a row, 1 tolerated; last: declined by task a: x"`)
}
