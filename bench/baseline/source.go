package baseline

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/snapflow/snapflow/internal/benchwork"
)

// pollBatches is how many batches the source generates per poll message, so
// that credits arriving in its mailbox are taken between polls.
const pollBatches = 16

// source generates records, a batch at a time stamped with one clock read,
// and partitions them by key over the workers.
type source struct {
	cfg  Config
	gen  benchwork.Generator
	buf  []benchwork.Record
	next uint64 // the next record to generate
	t0   int64  // when the first record was generated (pacing origin)
	outs []output[benchwork.Record]

	polling     bool // a poll message is on its way (or the pacing timer is armed)
	done        bool // every output is ending
	lingerArmed bool
	linger      *timer
	pace        *timer
}

func newSource(cfg Config) *source {
	return &source{cfg: cfg, gen: benchwork.NewGenerator(cfg.Keys, cfg.RecordSize), buf: make([]benchwork.Record, cfg.BatchSize)}
}

func (s *source) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wiring:
		s.outs = make([]output[benchwork.Record], len(m.workers))
		for i, w := range m.workers {
			s.outs[i] = newOutput[benchwork.Record](w, 0, s.cfg.BatchSize, s.cfg.Credits)
		}
		s.linger = newTimer(ctx, theLinger)
		s.pace = newTimer(ctx, thePoll)
		s.schedule(ctx)
	case *pollMsg:
		s.polling = false
		s.poll(ctx)
	case *creditMsg[benchwork.Record]:
		s.outs[m.ch].onCredit(ctx, m)
		s.schedule(ctx)
	case *lingerMsg:
		s.lingerArmed = false
		for i := range s.outs {
			s.outs[i].flush(ctx)
		}
	case *stopMsg:
		s.finish(ctx)
	case *actor.Stopping:
		s.linger.close()
		s.pace.close()
	}
}

// poll generates up to pollBatches batches while every output has credit
// and, under a rate limit, the next batch is due.
func (s *source) poll(ctx actor.Context) {
	for range pollBatches {
		if s.done || s.backlogged() {
			break
		}
		now := time.Now().UnixNano()
		if s.cfg.Rate > 0 {
			if s.next == 0 {
				s.t0 = now
			}
			if due := s.t0 + int64(float64(s.next)*1e9/s.cfg.Rate); now < due {
				s.polling = true
				s.pace.arm(time.Duration(due - now))
				break
			}
		}
		n := uint64(s.cfg.BatchSize)
		if s.cfg.Records > 0 {
			n = min(n, uint64(s.cfg.Records)-s.next)
		}
		buf := s.buf[:n]
		s.gen.Fill(buf, s.next, now)
		s.next += n
		p := len(s.outs)
		for _, r := range buf {
			s.outs[benchwork.Partition(r.Key, p)].add(ctx, r)
		}
		if s.cfg.Records > 0 && s.next == uint64(s.cfg.Records) {
			s.finish(ctx)
		}
	}
	s.armLinger()
	s.schedule(ctx)
}

// schedule sends the source a poll when it may generate more.
func (s *source) schedule(ctx actor.Context) {
	if s.polling || s.done || s.outs == nil || s.backlogged() {
		return
	}
	s.polling = true
	ctx.Send(ctx.Self(), thePoll)
}

func (s *source) backlogged() bool {
	for i := range s.outs {
		if s.outs[i].backlogged() {
			return true
		}
	}
	return false
}

func (s *source) armLinger() {
	if s.lingerArmed || s.done {
		return
	}
	for i := range s.outs {
		if s.outs[i].dirty() {
			s.lingerArmed = true
			s.linger.arm(s.cfg.Linger)
			return
		}
	}
}

// finish flushes every output and ends it.
func (s *source) finish(ctx actor.Context) {
	if s.done || s.outs == nil {
		return
	}
	s.done = true
	for i := range s.outs {
		s.outs[i].finish(ctx, &endMsg{ch: 0})
	}
}
