package baseline

import (
	"maps"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/snapflow/snapflow/internal/benchwork"
)

// sink counts the records and records their latency, once per batch. When
// every worker has ended it delivers the Result on done.
type sink struct {
	cfg   Config
	ins   []input[benchwork.Output]
	meter *Meter
	tss   []int64
	sums  map[uint64]uint64
	ended int
	done  chan<- Result
}

func newSink(cfg Config, done chan<- Result) *sink {
	return &sink{cfg: cfg, meter: NewMeter(), tss: make([]int64, 0, cfg.BatchSize), sums: make(map[uint64]uint64), done: done}
}

func (s *sink) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wiring:
		s.ins = make([]input[benchwork.Output], len(m.workers))
		for i, w := range m.workers {
			s.ins[i] = newInput[benchwork.Output](w, 0, s.cfg.Credits)
		}
	case *batchMsg[benchwork.Output]:
		s.tss = s.tss[:0]
		for _, o := range m.items {
			s.tss = append(s.tss, o.TS)
		}
		s.meter.Observe(time.Now().UnixNano(), s.tss)
		s.ins[m.ch].consume(ctx, m)
	case *endMsg:
		maps.Copy(s.sums, m.sums) // the workers' keys are disjoint
		s.ended++
		if s.ended == len(s.ins) {
			s.done <- s.meter.Result(s.sums)
		}
	}
}
