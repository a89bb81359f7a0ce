package linkwatch_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/linkwatch"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

const timeout = 5 * time.Second

func TestQuietLinkNeverLost(t *testing.T) {
	s := linkwatch.NewSender(timeout)
	for i := range 100 {
		if err := s.Check(at(time.Duration(i)*time.Second), false); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
}

func TestSlowReceiverNotLost(t *testing.T) {
	// Everything sent has arrived, batches wait for credit, and reports
	// keep coming: backpressure, not a lost link.
	s := linkwatch.NewSender(timeout)
	s.SentBatch(32)
	for i := range 60 {
		now := at(time.Duration(i) * time.Second)
		s.Heard(now, linkwatch.Report{Seq: 32})
		if err := s.Check(now, true); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
}

func TestLostBatchUnderBackpressure(t *testing.T) {
	// Batch 8 is lost; reports keep saying 7 arrived.
	s := linkwatch.NewSender(timeout)
	s.SentBatch(8)
	var lostAt time.Duration
	for i := range 20 {
		d := time.Duration(i) * time.Second
		s.Heard(at(d), linkwatch.Report{Seq: 7})
		if err := s.Check(at(d), true); err != nil {
			if !strings.Contains(err.Error(), "batch 8, sent, has not arrived") {
				t.Fatalf("error %q", err)
			}
			lostAt = d
			break
		}
	}
	if lostAt <= timeout || lostAt > 2*timeout {
		t.Fatalf("lost detected at %v, want within (%v, %v]", lostAt, timeout, 2*timeout)
	}
}

func TestSilentReceiver(t *testing.T) {
	for _, c := range []struct {
		name    string
		sent    func(*linkwatch.Sender)
		waiting bool
		want    string
	}{
		{"batches in flight", func(s *linkwatch.Sender) { s.SentBatch(3) }, false, "batches 2..3"},
		{"waiting for credit", func(s *linkwatch.Sender) { s.SentBatch(1) }, true, "has not reported"},
		{"a barrier", func(s *linkwatch.Sender) { s.SentBatch(1); s.SentBarrier(4) }, false, "checkpoint 4"},
		{"the end", func(s *linkwatch.Sender) { s.SentBatch(1); s.SentEnd() }, false, "the end of input"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := linkwatch.NewSender(timeout)
			s.Heard(at(0), linkwatch.Report{Seq: 1})
			c.sent(s)
			if err := s.Check(at(timeout), c.waiting); err != nil {
				t.Fatalf("lost at the timeout: %v", err)
			}
			err := s.Check(at(timeout+time.Second), c.waiting)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("after the timeout: %v, want %q", err, c.want)
			}
		})
	}
}

func TestProgressRestartsTheClock(t *testing.T) {
	s := linkwatch.NewSender(timeout)
	for i := range 60 {
		d := time.Duration(i) * time.Second
		s.SentBatch(uint64(i + 2)) // always one in flight
		s.Heard(at(d), linkwatch.Report{Seq: uint64(i + 1)})
		if err := s.Check(at(d), false); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
}

func TestLateTickRestarts(t *testing.T) {
	s := linkwatch.NewSender(timeout)
	s.SentBatch(2)
	s.Heard(at(0), linkwatch.Report{Seq: 1})
	s.Restart(at(time.Minute)) // the sender's actor was busy for a minute
	if err := s.Check(at(time.Minute+time.Second), false); err != nil {
		t.Fatalf("after a late tick: %v", err)
	}
	if err := s.Check(at(time.Minute+timeout+time.Second), false); err == nil {
		t.Fatal("not lost a full timeout after the late tick")
	}
}

func TestReportsOutOfOrder(t *testing.T) {
	s := linkwatch.NewSender(timeout)
	s.SentBatch(5)
	s.SentEnd()
	s.Heard(at(0), linkwatch.Report{Seq: 5, Ended: true})
	s.Heard(at(time.Second), linkwatch.Report{Seq: 3}) // an older report, late
	if s.Pending() {
		t.Fatal("an older report undid what had arrived")
	}
	if err := s.Check(at(time.Hour), false); err != nil {
		t.Fatal(err)
	}
}

func TestTimeout(t *testing.T) {
	for _, c := range []struct{ i, T, want time.Duration }{
		{time.Second, 5 * time.Second, 7 * time.Second},                // the defaults: T + 2i
		{200 * time.Millisecond, time.Second, 1400 * time.Millisecond}, // the example's tests
		{time.Second, 2 * time.Second, 3 * time.Second},                // 2T - i caps T + 2i
		{0, time.Second, 0},
		{time.Second, 0, 0},
	} {
		got := linkwatch.Timeout(c.i, c.T)
		if got != c.want {
			t.Errorf("Timeout(%v, %v) = %v, want %v", c.i, c.T, got, c.want)
		}
		if got > 0 && (got <= c.T || got+c.i > 2*c.T) {
			t.Errorf("Timeout(%v, %v) = %v: want above T, and detection (timeout + i) within 2T", c.i, c.T, got)
		}
	}
}

// A lost last watermark (or idle status) is a lost link too: nothing waits
// for credit behind it, and no later message shows it missing, yet event
// time stalls downstream. A later watermark that arrives makes up for a
// lost earlier one: watermarks are not deltas.
func TestLostLastWatermark(t *testing.T) {
	s := linkwatch.NewSender(timeout)
	s.SentBatch(4)
	s.SentWatermark(3)
	var lostAt time.Duration
	for i := range 20 {
		d := time.Duration(i) * time.Second
		s.Heard(at(d), linkwatch.Report{Seq: 4, Watermark: 2})
		if err := s.Check(at(d), false); err != nil {
			if !strings.Contains(err.Error(), "watermark 3, sent, has not arrived") {
				t.Fatalf("error %q", err)
			}
			lostAt = d
			break
		}
	}
	if lostAt <= timeout || lostAt > 2*timeout {
		t.Fatalf("lost detected at %v, want within (%v, %v]", lostAt, timeout, 2*timeout)
	}

	s = linkwatch.NewSender(timeout)
	s.SentWatermark(5)
	for i := range 20 {
		d := time.Duration(i) * time.Second
		s.Heard(at(d), linkwatch.Report{Watermark: 5}) // 4 was lost, 5 arrived
		if err := s.Check(at(d), false); err != nil {
			t.Fatalf("tick %d: %v", i, err)
		}
	}
}

// Barriers that keep arriving after a lost watermark do not hide it.
func TestLostWatermarkBehindBarriers(t *testing.T) {
	s := linkwatch.NewSender(timeout)
	s.SentBatch(4)
	s.SentWatermark(3)
	var lostAt time.Duration
	for i := range 20 {
		d := time.Duration(i) * time.Second
		s.SentBarrier(uint64(i + 1))
		s.Heard(at(d), linkwatch.Report{Seq: 4, Watermark: 2, Barrier: uint64(i + 1)})
		if err := s.Check(at(d), false); err != nil {
			if !strings.Contains(err.Error(), "watermark 3, sent, has not arrived") {
				t.Fatalf("error %q", err)
			}
			lostAt = d
			break
		}
	}
	if lostAt <= timeout || lostAt > 2*timeout {
		t.Fatalf("lost detected at %v, want within (%v, %v]", lostAt, timeout, 2*timeout)
	}
}
