package coordinator

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
)

func TestAckAllTasks(t *testing.T) {
	c := New(Config{}, []string{"a", "b", "c"}, 7)
	expect(t, c.RequestCheckpoint(at(0), 1), "Trigger chk=7")
	expect(t, c.Ack(at(1), ack(7, "c")))
	expect(t, c.Ack(at(2), ack(7, "a")))
	acts := c.Ack(at(3), ack(7, "b"))
	expect(t, acts, "WriteManifest chk=7 acks=[a,b,c]")
	if id, ok := c.Pending(); !ok || id != 7 {
		t.Fatalf("Pending() = %d, %v; want 7, true", id, ok)
	}
	expect(t, c.ManifestWritten(at(4), 7, nil), "Completed chk=7", "RequestDone req=1 chk=7")
	if _, ok := c.Pending(); ok {
		t.Fatal("still pending after Completed")
	}
	want := Stats{Triggered: 1, Completed: 1, LastCompleted: 7}
	if got := c.Stats(); got != want {
		t.Fatalf("Stats() = %+v, want %+v", got, want)
	}
}

func TestAckIgnored(t *testing.T) {
	tests := []struct {
		name string
		ack  *messages.AckCheckpoint
	}{
		{"duplicate", ack(1, "a")},
		{"unknown task", ack(1, "z")},
		{"stale id", ack(0, "b")},
		{"future id", ack(2, "b")},
		{"nil", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Config{}, []string{"a", "b"}, 1)
			expect(t, c.RequestCheckpoint(at(0), 1), "Trigger chk=1")
			expect(t, c.Ack(at(1), ack(1, "a")))
			expect(t, c.Ack(at(2), tt.ack))
			expect(t, c.Ack(at(3), ack(1, "b")), "WriteManifest chk=1 acks=[a,b]")
		})
	}
}

func TestAckOutsideCheckpoint(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	expect(t, c.Ack(at(0), ack(1, "a"))) // none pending
	expect(t, c.RequestCheckpoint(at(0), 1), "Trigger chk=1")
	expect(t, c.Ack(at(1), ack(1, "a")), "WriteManifest chk=1 acks=[a]")
	expect(t, c.Ack(at(2), ack(1, "a"))) // already writing
	expect(t, c.ManifestWritten(at(3), 1, nil), "Completed chk=1", "RequestDone req=1 chk=1")
	expect(t, c.Ack(at(4), ack(1, "a"))) // completed
}

func TestAcksKeepBodies(t *testing.T) {
	c := New(Config{}, []string{"a", "b"}, 1)
	c.RequestCheckpoint(at(0), 1)
	b := &messages.AckCheckpoint{CheckpointId: 1, TaskId: "b", StateBytes: 42}
	a := &messages.AckCheckpoint{CheckpointId: 1, TaskId: "a", StateBytes: 7}
	c.Ack(at(1), b)
	acts := c.Ack(at(2), a)
	if len(acts) != 1 || len(acts[0].Acks) != 2 || acts[0].Acks[0] != a || acts[0].Acks[1] != b {
		t.Fatalf("WriteManifest acks = %v, want [a b] in task order", acts)
	}
}

func TestNoTasks(t *testing.T) {
	c := New(Config{}, nil, 1)
	expect(t, c.RequestCheckpoint(at(0), 9), "Trigger chk=1", "WriteManifest chk=1 acks=[]")
	expect(t, c.ManifestWritten(at(1), 1, nil), "Completed chk=1", "RequestDone req=9 chk=1")
}

func TestDecline(t *testing.T) {
	c := New(Config{TolerableFailures: -1}, []string{"a", "b"}, 1)
	expect(t, c.RequestCheckpoint(at(0), 5), "Trigger chk=1")
	expect(t, c.Decline(at(1), decline(0, "a", "stale")))
	expect(t, c.Decline(at(1), decline(1, "z", "unknown")))
	expect(t, c.Decline(at(1), nil))
	acts := c.Decline(at(2), decline(1, "b", "disk full"))
	expect(t, acts,
		`Aborted chk=1 reason="declined by task b: disk full"`,
		`RequestDone req=5 chk=1 err="coordinator: checkpoint aborted: checkpoint 1: declined by task b: disk full"`)
	if !errors.Is(acts[1].Err, ErrAborted) {
		t.Fatalf("RequestDone error %v does not wrap ErrAborted", acts[1].Err)
	}
	if s := c.Stats(); s.Aborted != 1 || s.ConsecutiveFailures != 1 {
		t.Fatalf("Stats() = %+v, want 1 abort, 1 failure", s)
	}
	expect(t, c.Decline(at(3), decline(1, "a", "late"))) // already aborted
}

func TestDeclineAfterAllAcked(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	expect(t, c.Ack(at(1), ack(1, "a")), "WriteManifest chk=1 acks=[a]")
	expect(t, c.Decline(at(2), decline(1, "a", "too late")))
	expect(t, c.ManifestWritten(at(3), 1, nil), "Completed chk=1", "RequestDone req=1 chk=1")
}

func TestManifestWritten(t *testing.T) {
	c := New(Config{TolerableFailures: -1}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	expect(t, c.ManifestWritten(at(1), 1, nil)) // not all acked yet
	c.Ack(at(1), ack(1, "a"))
	expect(t, c.ManifestWritten(at(2), 2, nil)) // wrong id
	expect(t, c.ManifestWritten(at(3), 1, errors.New("bucket gone")),
		`Aborted chk=1 reason="write manifest: bucket gone"`,
		`RequestDone req=1 chk=1 err="coordinator: checkpoint aborted: checkpoint 1: write manifest: bucket gone"`)
	if s := c.Stats(); s.ConsecutiveFailures != 1 || s.Completed != 0 {
		t.Fatalf("Stats() = %+v, want one failure", s)
	}
	expect(t, c.ManifestWritten(at(4), 1, nil)) // already aborted
}

func TestTimeout(t *testing.T) {
	c := New(Config{Timeout: time.Minute, TolerableFailures: -1}, []string{"a", "b"}, 1)
	expect(t, c.RequestCheckpoint(at(time.Second), 1), "Trigger chk=1")
	if next, ok := c.NextTrigger(); !ok || !next.Equal(at(time.Minute+time.Second)) {
		t.Fatalf("NextTrigger() = %v, %v; want the deadline", next, ok)
	}
	expect(t, c.Tick(at(time.Minute+time.Second-1)))
	expect(t, c.Tick(at(time.Minute+time.Second)),
		`Aborted chk=1 reason="timed out after 1m0s, waiting for 2 tasks: a, b"`,
		`RequestDone req=1 chk=1 err="coordinator: checkpoint aborted: checkpoint 1: timed out after 1m0s, waiting for 2 tasks: a, b"`)
	if _, ok := c.NextTrigger(); ok {
		t.Fatal("NextTrigger with nothing to do")
	}
}

func TestDefaultTimeout(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	expect(t, c.Tick(at(DefaultTimeout-1)))
	acts := c.Tick(at(DefaultTimeout))
	if len(acts) == 0 || acts[0].Kind != Aborted {
		t.Fatalf("Tick at the default timeout = %v, want Aborted", acts)
	}
}

func TestNoTimeoutWhileWritingManifest(t *testing.T) {
	c := New(Config{Timeout: time.Second}, []string{"a"}, 1)
	c.RequestCheckpoint(at(0), 1)
	c.Ack(at(time.Millisecond), ack(1, "a"))
	if _, ok := c.NextTrigger(); ok {
		t.Fatal("NextTrigger armed while the manifest is being written")
	}
	expect(t, c.Tick(at(time.Hour)))
	expect(t, c.ManifestWritten(at(time.Hour), 1, nil), "Completed chk=1", "RequestDone req=1 chk=1")
}

// TestTimeoutNamesMissingTasks: a timed-out checkpoint names the tasks that
// did not acknowledge it, the first eight of them, and counts the rest.
func TestTimeoutNamesMissingTasks(t *testing.T) {
	var tasks []string
	for i := range 12 {
		tasks = append(tasks, fmt.Sprintf("t%02d", i))
	}
	c := New(Config{Timeout: time.Minute, TolerableFailures: -1}, tasks, 1)
	expect(t, c.RequestCheckpoint(at(0), 1), "Trigger chk=1")
	c.Ack(at(1), ack(1, "t00"))
	c.Ack(at(1), ack(1, "t05"))
	expect(t, c.Tick(at(time.Minute)),
		`Aborted chk=1 reason="timed out after 1m0s, waiting for 10 tasks: t01, t02, t03, t04, t06, t07, t08, t09 and 2 more"`,
		`RequestDone req=1 chk=1 err="coordinator: checkpoint aborted: checkpoint 1: timed out after 1m0s, waiting for 10 tasks: t01, t02, t03, t04, t06, t07, t08, t09 and 2 more"`)
}
