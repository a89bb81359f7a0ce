package coordinator

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// failOnce triggers a manual checkpoint and declines it, returning the
// actions of the decline.
func failOnce(c *Coordinator, now time.Time, req uint64) []Action {
	acts := c.RequestCheckpoint(now, req)
	id := acts[0].Checkpoint
	return c.Decline(now, decline(id, "a", "boom"))
}

func failJobs(acts []Action) []Action {
	var out []Action
	for _, a := range acts {
		if a.Kind == FailJob {
			out = append(out, a)
		}
	}
	return out
}

func TestTolerableFailures(t *testing.T) {
	tests := []struct {
		tolerable int
		failAt    int // 1-based failure that fails the job; 0 for never
	}{
		{tolerable: 0, failAt: 1},
		{tolerable: 2, failAt: 3},
		{tolerable: -1, failAt: 0},
	}
	for _, tt := range tests {
		c := New(Config{TolerableFailures: tt.tolerable}, []string{"a"}, 1)
		for i := 1; i <= 20; i++ {
			fj := failJobs(failOnce(c, at(time.Duration(i)*time.Second), uint64(i)))
			if i == tt.failAt {
				if len(fj) != 1 || !errors.Is(fj[0].Err, ErrTooManyFailures) ||
					!strings.Contains(fj[0].Err.Error(), "declined by task a: boom") {
					t.Fatalf("tolerable %d, failure %d: FailJob = %v", tt.tolerable, i, fj)
				}
				break
			}
			if len(fj) != 0 {
				t.Fatalf("tolerable %d, failure %d: unexpected %v", tt.tolerable, i, fj)
			}
		}
		if tt.failAt == 0 && c.Stats().ConsecutiveFailures != 20 {
			t.Fatalf("tolerable -1: %+v", c.Stats())
		}
	}
}

func TestFailureCounterResetsOnSuccess(t *testing.T) {
	c := New(Config{TolerableFailures: 2}, []string{"a"}, 1)
	for i := range 2 {
		expect(t, failJobs(failOnce(c, at(0), uint64(i))))
	}
	c.RequestCheckpoint(at(0), 10)
	c.Ack(at(0), ack(3, "a"))
	c.ManifestWritten(at(0), 3, nil)
	if n := c.Stats().ConsecutiveFailures; n != 0 {
		t.Fatalf("ConsecutiveFailures after success = %d", n)
	}
	for i := range 2 {
		expect(t, failJobs(failOnce(c, at(0), uint64(20+i))))
	}
	expect(t, failJobs(failOnce(c, at(0), 30)),
		`FailJob reason="declined by task a: boom" err="coordinator: too many failed checkpoints: 3 in a row, 2 tolerated; last: declined by task a: boom"`)
}

func TestFailJobOnceAndTriggeringStops(t *testing.T) {
	c := New(Config{Interval: time.Second}, []string{"a"}, 1)
	expect(t, c.Tick(at(0)))
	expect(t, c.Tick(at(time.Second)), "Trigger chk=1")
	expect(t, c.Decline(at(time.Second), decline(1, "a", "x")),
		`Aborted chk=1 reason="declined by task a: x"`,
		`FailJob reason="declined by task a: x" err="coordinator: too many failed checkpoints: 1 in a row, 0 tolerated; last: declined by task a: x"`)
	if _, ok := c.NextTrigger(); ok {
		t.Fatal("NextTrigger armed after FailJob")
	}
	expect(t, c.Tick(at(time.Hour)))
	expect(t, c.RequestCheckpoint(at(time.Hour), 1)) // queued until Reset
	acts := c.Reset(at(time.Hour))
	expect(t, acts, `RequestDone req=1 err="coordinator: job failover: request 1 not triggered"`)
	if s := c.Stats(); s.ConsecutiveFailures != 0 {
		t.Fatalf("Stats() after Reset = %+v, want the count restarted", s)
	}
	expect(t, c.Tick(at(time.Hour+time.Second)), "Trigger chk=2")
	expect(t, failJobs(c.Decline(at(time.Hour+time.Second), decline(2, "a", "y"))),
		`FailJob reason="declined by task a: y" err="coordinator: too many failed checkpoints: 1 in a row, 0 tolerated; last: declined by task a: y"`)
}
