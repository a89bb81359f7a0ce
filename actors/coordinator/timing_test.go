package coordinator

import (
	"testing"
	"time"
)

func TestIntervalAndMinPause(t *testing.T) {
	s := time.Second
	tests := []struct {
		name     string
		cfg      Config
		duration time.Duration // how long each checkpoint takes
		want     []time.Duration
	}{
		{"interval", Config{Interval: 10 * s}, 2 * s, []time.Duration{10 * s, 20 * s, 30 * s}},
		{"min pause below interval", Config{Interval: 10 * s, MinPause: 5 * s}, 2 * s, []time.Duration{10 * s, 20 * s, 30 * s}},
		{"min pause after long checkpoint", Config{Interval: 10 * s, MinPause: 5 * s}, 8 * s, []time.Duration{10 * s, 23 * s, 36 * s}},
		{"min pause above interval", Config{Interval: s, MinPause: 3 * s}, s, []time.Duration{3 * s, 7 * s, 11 * s}},
		{"checkpoint longer than interval", Config{Interval: s}, 4 * s, []time.Duration{s, 5 * s, 9 * s}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(tt.cfg, []string{"a"}, 1)
			expect(t, c.Tick(at(0)))
			var done []Action // actions of the last completion
			for i, want := range tt.want {
				var trig Action
				if len(done) == 2 { // overdue: triggered at completion
					trig = done[1]
				} else {
					next, ok := c.NextTrigger()
					if !ok || !next.Equal(at(want)) {
						t.Fatalf("checkpoint %d: NextTrigger() = t0+%v, %v; want t0+%v", i+1, next.Sub(t0), ok, want)
					}
					expect(t, c.Tick(next.Add(-1)))
					acts := c.Tick(next)
					if len(acts) != 1 {
						t.Fatalf("checkpoint %d: Tick at NextTrigger = %v", i+1, acts)
					}
					trig = acts[0]
				}
				if trig.Kind != Trigger || !trig.Timestamp.Equal(at(want)) {
					t.Fatalf("checkpoint %d: %v at t0+%v, want Trigger at t0+%v", i+1, trig, trig.Timestamp.Sub(t0), want)
				}
				id := trig.Checkpoint
				end := trig.Timestamp.Add(tt.duration)
				c.Ack(end, ack(id, "a"))
				done = c.ManifestWritten(end, id, nil)
				if len(done) == 0 || done[0].Kind != Completed || done[0].Checkpoint != id {
					t.Fatalf("checkpoint %d: ManifestWritten = %v", i+1, done)
				}
			}
		})
	}
}

func TestIntervalZeroDisablesPeriodic(t *testing.T) {
	c := New(Config{}, []string{"a"}, 1)
	if _, ok := c.NextTrigger(); ok {
		t.Fatal("NextTrigger armed without an interval")
	}
	expect(t, c.Tick(at(0)))
	expect(t, c.Tick(at(24*time.Hour)))
}

func TestNextTriggerStartsClock(t *testing.T) {
	c := New(Config{Interval: time.Minute}, []string{"a"}, 1)
	if next, ok := c.NextTrigger(); !ok || !next.IsZero() {
		t.Fatalf("NextTrigger() before the first step = %v, %v; want zero, true", next, ok)
	}
	expect(t, c.Tick(at(time.Hour)))
	if next, ok := c.NextTrigger(); !ok || !next.Equal(at(time.Hour+time.Minute)) {
		t.Fatalf("NextTrigger() = %v, %v", next, ok)
	}
}

func TestAbortRespectsMinPause(t *testing.T) {
	c := New(Config{Interval: time.Second, MinPause: 10 * time.Second, TolerableFailures: -1}, []string{"a"}, 1)
	c.Tick(at(0))
	expect(t, c.Tick(at(10*time.Second)), "Trigger chk=1")
	c.Decline(at(12*time.Second), decline(1, "a", "x"))
	next, _ := c.NextTrigger()
	if !next.Equal(at(22 * time.Second)) {
		t.Fatalf("NextTrigger() after abort = t0+%v, want t0+22s", next.Sub(t0))
	}
}
