package baseline

import (
	"github.com/asynkron/protoactor-go/actor"

	"github.com/snapflow/snapflow/internal/benchwork"
)

// worker keeps a sum per key: it adds every record of its partition into its
// key's sum and emits the running sum.
type worker struct {
	cfg  Config
	idx  int
	sums map[uint64]uint64
	in   input[benchwork.Record]
	out  output[benchwork.Output]

	pending     []*batchMsg[benchwork.Record] // received, not yet processed (output backlogged)
	head        int
	inputEnded  bool
	finished    bool
	lingerArmed bool
	linger      *timer
}

func newWorker(cfg Config, idx int) *worker {
	return &worker{cfg: cfg, idx: idx, sums: make(map[uint64]uint64)}
}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *wiring:
		w.in = newInput[benchwork.Record](m.source, w.idx, w.cfg.Credits)
		w.out = newOutput[benchwork.Output](m.sink, w.idx, w.cfg.BatchSize, w.cfg.Credits)
		w.linger = newTimer(ctx, theLinger)
	case *batchMsg[benchwork.Record]:
		w.pending = append(w.pending, m)
		w.drain(ctx)
	case *creditMsg[benchwork.Output]:
		w.out.onCredit(ctx, m)
		w.drain(ctx)
	case *endMsg:
		w.inputEnded = true
		w.drain(ctx)
	case *lingerMsg:
		w.lingerArmed = false
		w.out.flush(ctx)
	case *actor.Stopping:
		w.linger.close()
	}
}

// drain processes the received batches while the output has credit, and
// ends the output once the input has ended and everything is processed.
func (w *worker) drain(ctx actor.Context) {
	for w.head < len(w.pending) && !w.out.backlogged() {
		b := w.pending[w.head]
		w.pending[w.head] = nil
		w.head++
		w.process(ctx, b)
		w.in.consume(ctx, b)
	}
	if w.head < len(w.pending) {
		return
	}
	w.pending, w.head = w.pending[:0], 0
	if w.inputEnded && !w.finished {
		w.finished = true
		w.out.finish(ctx, &endMsg{ch: w.idx, sums: w.sums})
		return
	}
	if !w.lingerArmed && !w.finished && w.out.dirty() {
		w.lingerArmed = true
		w.linger.arm(w.cfg.Linger)
	}
}

func (w *worker) process(ctx actor.Context, b *batchMsg[benchwork.Record]) {
	for _, r := range b.items {
		sum := benchwork.Add(w.sums[r.Key], r)
		w.sums[r.Key] = sum
		w.out.add(ctx, benchwork.Output{Key: r.Key, Sum: sum, TS: r.TS})
	}
}
