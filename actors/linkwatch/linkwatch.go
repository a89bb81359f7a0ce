package linkwatch

import (
	"fmt"
	"time"
)

// Report is what a receiver says of one channel: what has arrived on it.
type Report struct {
	// Seq is the highest batch seq that has arrived.
	Seq uint64
	// Barrier is the highest checkpoint whose barrier has arrived.
	Barrier uint64
	// Ended says that the end of input has arrived.
	Ended bool
	// Watermark is the highest watermark seq (or idle status) that has
	// arrived: watermarks are not batches, but a lost last one stalls
	// event time downstream as surely as a lost batch stalls the data.
	Watermark uint64
}

// Timeout returns the link timeout for reports every heartbeat interval i
// and a heartbeat timeout T: T + 2i, so that a node that is gone
// altogether is lost by its heartbeat first (which knows the node, and
// leaves it out of the next placement), but at most 2T - i, so that a lost
// link is detected within 2T (the timeout plus a tick). It is 0, no watch,
// when either is not positive.
func Timeout(i, T time.Duration) time.Duration {
	if i <= 0 || T <= 0 {
		return 0
	}
	return max(min(T+2*i, 2*T-i), i)
}

// Sender is the sending side's judgement of one channel.
type Sender struct {
	timeout time.Duration
	sent    Report // what was sent
	heard   Report // what the last report said had arrived
	// progress is when the receiver last showed progress (or when there
	// was last nothing to wait for); report is when a report last came
	// (or when there was last nothing to wait for).
	progress, report time.Time
	// wmProgress is when the watermarks last showed progress: the last
	// one sent arrived, a newer one arrived, or a batch sent before the
	// last one did (wmBehind is the seq of the last batch sent before it).
	// Barriers and batches that keep arriving do not hide a lost last
	// watermark.
	wmProgress time.Time
	wmBehind   uint64
	started    bool
}

// NewSender returns the judgement of a channel whose link is lost after
// timeout without progress.
func NewSender(timeout time.Duration) *Sender {
	if timeout <= 0 {
		panic("linkwatch: the timeout must be positive")
	}
	return &Sender{timeout: timeout}
}

// Timeout returns the sender's timeout.
func (s *Sender) Timeout() time.Duration { return s.timeout }

// SentBatch records that batch seq was sent.
func (s *Sender) SentBatch(seq uint64) { s.sent.Seq = max(s.sent.Seq, seq) }

// SentBarrier records that the barrier of checkpoint id was sent.
func (s *Sender) SentBarrier(id uint64) { s.sent.Barrier = max(s.sent.Barrier, id) }

// SentWatermark records that watermark seq (a watermark or an idle
// status) was sent.
func (s *Sender) SentWatermark(seq uint64) {
	s.sent.Watermark = max(s.sent.Watermark, seq)
	s.wmBehind = s.sent.Seq
}

// SentEnd records that the end of input was sent.
func (s *Sender) SentEnd() { s.sent.Ended = true }

// Heard takes a report of the receiver that arrived at now. Reports may
// arrive out of order or twice: what has arrived only grows.
func (s *Sender) Heard(now time.Time, r Report) {
	s.start(now)
	s.report = now
	if r.Seq > s.heard.Seq || r.Barrier > s.heard.Barrier || r.Watermark > s.heard.Watermark || (r.Ended && !s.heard.Ended) {
		s.progress = now
	}
	if r.Watermark > s.heard.Watermark || r.Seq > s.heard.Seq && s.heard.Seq < s.wmBehind {
		s.wmProgress = now
	}
	s.heard.Seq = max(s.heard.Seq, r.Seq)
	s.heard.Barrier = max(s.heard.Barrier, r.Barrier)
	s.heard.Watermark = max(s.heard.Watermark, r.Watermark)
	s.heard.Ended = s.heard.Ended || r.Ended
}

func (s *Sender) start(now time.Time) {
	if !s.started {
		s.started, s.progress, s.report, s.wmProgress = true, now, now, now
	}
}

// Pending reports whether something sent has not arrived, as far as the
// reports say.
func (s *Sender) Pending() bool {
	return s.sent.Seq > s.heard.Seq || s.sent.Barrier > s.heard.Barrier || s.sent.Watermark > s.heard.Watermark ||
		(s.sent.Ended && !s.heard.Ended)
}

// Restart restarts the clocks at now: the caller could not watch (a tick
// it handled late), so it judges nothing until a full timeout from now.
func (s *Sender) Restart(now time.Time) {
	s.started, s.progress, s.report, s.wmProgress = true, now, now, now
}

// Check judges the link at now; waiting says that batches wait for the
// receiver's credit. It returns a non-nil error saying what was not
// received, or not heard, for how long, when the link is lost.
func (s *Sender) Check(now time.Time, waiting bool) error {
	s.start(now)
	if s.sent.Watermark <= s.heard.Watermark {
		s.wmProgress = now // no watermark to wait for
	} else if d := now.Sub(s.wmProgress); d > s.timeout {
		return fmt.Errorf("watermark %d, sent, has not arrived (the last arrived is %d) for %v", s.sent.Watermark, s.heard.Watermark, d.Round(time.Millisecond))
	}
	pending := s.Pending()
	if !pending {
		s.progress = now // nothing to wait for
	}
	if !pending && !waiting {
		s.report = now
		return nil
	}
	if pending {
		if d := now.Sub(s.progress); d > s.timeout {
			return fmt.Errorf("%s for %v", s.pendingText(), d.Round(time.Millisecond))
		}
	}
	if d := now.Sub(s.report); d > s.timeout {
		return fmt.Errorf("the receiver has not reported for %v while batches wait for its credit", d.Round(time.Millisecond))
	}
	return nil
}

func (s *Sender) pendingText() string {
	switch {
	case s.sent.Seq > s.heard.Seq:
		if s.sent.Seq == s.heard.Seq+1 {
			return fmt.Sprintf("batch %d, sent, has not arrived", s.sent.Seq)
		}
		return fmt.Sprintf("batches %d..%d, sent, have not arrived", s.heard.Seq+1, s.sent.Seq)
	case s.sent.Barrier > s.heard.Barrier:
		return fmt.Sprintf("the barrier of checkpoint %d, sent, has not arrived", s.sent.Barrier)
	case s.sent.Watermark > s.heard.Watermark:
		return fmt.Sprintf("watermark %d, sent, has not arrived (the last arrived is %d)", s.sent.Watermark, s.heard.Watermark)
	default:
		return "the end of input, sent, has not arrived"
	}
}
