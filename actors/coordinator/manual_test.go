package coordinator

import (
	"errors"
	"testing"
	"time"
)

func TestManualWhenIdleIgnoresIntervalAndMinPause(t *testing.T) {
	c := New(Config{Interval: time.Hour, MinPause: time.Hour}, []string{"a"}, 1)
	expect(t, c.Tick(at(0)))
	expect(t, c.RequestCheckpoint(at(time.Second), 1), "Trigger chk=1")
	c.Ack(at(2*time.Second), ack(1, "a"))
	expect(t, c.ManifestWritten(at(2*time.Second), 1, nil), "Completed chk=1", "RequestDone req=1 chk=1")
	expect(t, c.RequestCheckpoint(at(3*time.Second), 2), "Trigger chk=2")
	// The manual trigger pushed the periodic one back.
	c.Ack(at(4*time.Second), ack(2, "a"))
	c.ManifestWritten(at(4*time.Second), 2, nil)
	if next, _ := c.NextTrigger(); !next.Equal(at(time.Hour + 4*time.Second)) {
		t.Fatalf("NextTrigger() = t0+%v, want t0+1h0m4s", next.Sub(t0))
	}
}

func TestManualWhilePending(t *testing.T) {
	c := New(Config{Interval: time.Second, MinPause: time.Hour}, []string{"a"}, 1)
	c.Tick(at(0))
	expect(t, c.Tick(at(time.Hour)), "Trigger chk=1")
	expect(t, c.RequestCheckpoint(at(time.Hour), 10))
	expect(t, c.RequestCheckpoint(at(time.Hour), 11))
	if id, _ := c.Pending(); id != 1 {
		t.Fatalf("Pending() = %d, want 1", id)
	}
	c.Ack(at(time.Hour), ack(1, "a"))
	// The queued requests are triggered at once, ignoring MinPause, and
	// share one checkpoint.
	expect(t, c.ManifestWritten(at(time.Hour), 1, nil), "Completed chk=1", "Trigger chk=2")
	c.Ack(at(time.Hour), ack(2, "a"))
	expect(t, c.ManifestWritten(at(time.Hour), 2, nil),
		"Completed chk=2", "RequestDone req=10 chk=2", "RequestDone req=11 chk=2")
}

func TestManualQueuedBehindAbort(t *testing.T) {
	c := New(Config{TolerableFailures: -1}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	c.RequestCheckpoint(at(0), 2)
	expect(t, c.Decline(at(0), decline(1, "a", "no")),
		`Aborted chk=1 reason="declined by task a: no"`,
		`RequestDone req=1 chk=1 err="coordinator: checkpoint aborted: checkpoint 1: declined by task a: no"`,
		"Trigger chk=2")
}

func TestManualAborted(t *testing.T) {
	c := New(Config{Timeout: time.Second, TolerableFailures: -1}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 42)
	acts := c.Tick(at(time.Second))
	if len(acts) != 2 || acts[1].Kind != RequestDone || acts[1].Request != 42 || acts[1].Checkpoint != 1 {
		t.Fatalf("actions = %v", acts)
	}
	if err := acts[1].Err; !errors.Is(err, ErrAborted) || errors.Is(err, ErrFailover) {
		t.Fatalf("RequestDone error = %v, want ErrAborted", err)
	}
}
