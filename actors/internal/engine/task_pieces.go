package engine

import (
	"time"

	"github.com/snapflow/snapflow/actors/align"
	"github.com/snapflow/snapflow/internal/dataflow"
)

// Pieces of batches. In the modes where barriers overtake the mailbox
// (task_priority.go), a barrier still waits for the batch being processed
// when it arrives. A task whose records are slow (a sink that waits on an
// external system, say) therefore processes its batches in pieces that
// take about pieceTarget each, and puts the rest of a batch back at the
// head of its queue: drain looks at the mailbox between pieces, and a
// barrier that arrived meanwhile goes first. Unaligned, the rest is then
// unprocessed input, stored as channel state like any queued batch. The
// task learns the cost of a record from what it processes
// (internal/pieces); fast records go whole, so the pieces cost two clock
// reads per batch.

// pieceTarget is the time a piece of a batch should take.
const pieceTarget = 500 * time.Microsecond

// processBatch processes the n records of Process action a, and reports
// whether the batch is done: false when it processed a piece of it and
// put the rest back at the head of t.ready (its credit then waits for the
// last piece).
func (t *task) processBatch(a align.Action[*batchMsg], n int) bool {
	m := a.Data
	if t.prio == nil {
		t.ctr.in.Add(uint64(n)) // before the batch goes back to its pool
		t.runBatch(a.Input, m.data, m.ts)
		return true
	}
	k := t.pieces.Len(n)
	data, ts := m.data, m.ts
	var rest any
	var restTS []int64
	if k < n {
		data, rest = t.sh.plan.ChannelCodec(t.plan.Inputs[a.Input]).Split(m.data, k)
		if ts != nil {
			ts, restTS = dataflow.SplitTimestamps(ts, k)
		}
	}
	t.ctr.in.Add(uint64(k))
	start := time.Now()
	t.runBatch(a.Input, data, ts)
	t.pieces.Observe(k, time.Since(start))
	if k == n {
		return true
	}
	r := *m
	r.data, r.ts = rest, restTS
	a.Data = &r
	t.head-- // drain took a from here
	t.ready[t.head] = a
	return false
}

// runBatch hands a batch to the operator, which takes it (and returns it
// to its pool).
func (t *task) runBatch(input int, data any, ts []int64) {
	if err := t.inst.ProcessBatch(input, data, ts); err != nil {
		t.fail(err)
	}
	dataflow.ReleaseTimestamps(ts)
}
