package dataflow

import (
	"maps"
	"math"
	"slices"

	"github.com/snapflow/snapflow/messages"
)

// A rescaled task of an operator that stores its watermark (a keyed
// process function: windows, event-time timers) resumes from the highest
// watermark of the stored tasks whose key groups it takes
// (resumeWatermark): a window or timer that fired in one of them must not
// fire again. A record that was on time at a stored task with a lower
// watermark is late at the rescaled task if its event time is not above
// the watermark that task resumes from. In an aligned
// checkpoint no such record exists: a stored watermark is a consistent
// cut, every record its sources read again follows it. Two kinds of
// checkpoint hold such records, and are checked here before any record
// flows (checkLateAfterRescale):
//
//   - an unaligned checkpoint's records in flight: those on the edge into
//     the rescaled operator are checked record by record against the task
//     they go to (inFlightRemap.late); those anywhere upstream of it, whose
//     task is not known before they get there (a map or a rebalance edge in
//     between, a non-keyed receiver), against the range of its stored
//     watermarks (lateUpstream);
//   - an at-least-once checkpoint, where a task snapshots after processing
//     what followed the barrier on its other inputs, so its watermark can
//     be ahead of records the sources read again; they are not stored, so
//     any rescaled task that would resume above a stored task it takes
//     state from is refused (lateAtLeastOnce).

// resumeWatermark is the watermark task t of rescaled operator op resumes
// from: the highest of the stored tasks' whose key groups it takes (of
// every stored task's when op holds no keyed state), nil when none stored
// one.
func resumeWatermark(op *storedOperator, t *TaskPlan) *int64 {
	var wm *int64
	for _, ot := range op.tasks {
		if op.keyed && (ot.start >= t.KeyGroupEnd || t.KeyGroupStart >= ot.end) {
			continue
		}
		if w := ot.st.GetWatermark(); ot.st != nil && ot.st.Watermark != nil && (wm == nil || w > *wm) {
			wm = &w
		}
	}
	return wm
}

// storedWatermark is stored task t's watermark, Min when it stored none.
func storedWatermark(t storedTask) int64 {
	if t.st == nil || t.st.Watermark == nil {
		return math.MinInt64
	}
	return t.st.GetWatermark()
}

// watermarkRange is what a rescaled operator's tasks resume from: the
// lowest stored watermark and the highest a task resumes from.
type watermarkRange struct{ lowest, highest int64 }

// checkLateAfterRescale refuses, through add, a checkpoint in which a
// record could be late after the rescale of an operator that was on time
// before it (see above).
func checkLateAfterRescale(p *Plan, m *messages.Manifest, old map[string]*storedOperator, ids []string,
	cur map[string]*newOperator, r *Restore, add func(err error, format string, args ...any)) {
	ranges := map[string]watermarkRange{}
	for _, id := range r.Rescaled {
		n := cur[id]
		if n == nil {
			continue
		}
		wr := watermarkRange{lowest: math.MaxInt64, highest: math.MinInt64}
		for _, t := range old[id].tasks {
			wr.lowest = min(wr.lowest, storedWatermark(t))
		}
		for _, t := range n.tasks {
			if w := r.tasks[t.Index].Watermark; w != nil {
				wr.highest = max(wr.highest, *w)
			}
		}
		if wr.highest > wr.lowest {
			ranges[id] = wr
		}
	}
	if len(ranges) == 0 {
		return
	}
	if m.GetAtLeastOnce() {
		lateAtLeastOnce(old, cur, r, slices.Sorted(maps.Keys(ranges)), add)
		return
	}
	lateUpstream(p, old, ids, ranges, add)
}

// lateAtLeastOnce refuses each operator of ids, rescaled from an
// at-least-once checkpoint, one of whose tasks would resume above the
// watermark of a stored task whose state it takes.
func lateAtLeastOnce(old map[string]*storedOperator, cur map[string]*newOperator, r *Restore, ids []string,
	add func(err error, format string, args ...any)) {
	for _, id := range ids {
		op := old[id]
	tasks:
		for _, t := range cur[id].tasks {
			after := r.tasks[t.Index].Watermark
			for _, ot := range op.tasks {
				if op.keyed && (ot.start >= t.KeyGroupEnd || t.KeyGroupStart >= ot.end) {
					continue
				}
				if before := storedWatermark(ot); after != nil && *after > before {
					add(nil, "operator %q: the checkpoint was taken at least once (actors.CheckpointAtLeastOnce), where a task's stored watermark can be ahead of records its sources read again, and its rescaled task %d would resume from watermark %s (the highest of the stored tasks' whose key groups it takes, so that no window fires twice) with the state of stored task %s, whose watermark was %s: a record on time before the rescale could be late after it. Rescale from a savepoint (always aligned) or an aligned or unaligned checkpoint, or keep parallelism %d",
						id, t.Subtask, formatWatermark(*after), ot.id, formatWatermark(before), len(op.tasks))
					break tasks
				}
			}
		}
	}
}

// lateUpstream refuses the edges whose records in flight are on their way
// to an operator of ranges further downstream (not on the edge into it:
// inFlightRemap.late checks those), with an event time above its lowest
// stored watermark and not above the highest its rescaled tasks resume
// from: such a record could have been on time at the stored task it was
// due at, and be late at the rescaled task it reaches. It names each edge
// once.
func lateUpstream(p *Plan, old map[string]*storedOperator, ids []string, ranges map[string]watermarkRange,
	add func(err error, format string, args ...any)) {
	down := p.downstreamOperators()
	refused := map[edgeKey]bool{}
	for _, id := range ids {
		for _, t := range old[id].tasks {
			for _, it := range t.st.GetInFlight() {
				ek := edgeKey{from: it.GetFromOperatorId(), to: it.GetToOperatorId(), edge: int(it.GetEdge())}
				if it.GetIsWatermark() || len(it.GetTimestamps()) == 0 || refused[ek] {
					continue
				}
				ts, err := DecodeTimestamps(it.GetTimestamps(), len(it.GetEnds()))
				if err != nil {
					refused[ek] = true
					add(err, "the records in flight from operator %q to operator %q: %v", ek.from, ek.to, err)
					continue
				}
				for _, to := range slices.Sorted(maps.Keys(down[ek.to])) {
					wr, ok := ranges[to]
					if !ok || to == ek.to {
						continue
					}
					if i := slices.IndexFunc(ts, func(t int64) bool { return t > wr.lowest && t <= wr.highest }); i >= 0 {
						refused[ek] = true
						add(nil, "the channels from operator %q to operator %q (its input %d) hold records in flight with event times up to %s, on their way to operator %q, whose stored tasks' watermarks were from %s to %s: its rescaled tasks resume from the highest of the stored tasks' whose key groups they take (so that no window fires twice), and a record on time before the rescale (event time %s) could be late after it. Rescale from a savepoint (always aligned), or keep the parallelism of %q",
							ek.from, ek.to, ek.edge, formatWatermark(slices.Max(ts)), to, formatWatermark(wr.lowest), formatWatermark(wr.highest), formatWatermark(ts[i]), to)
						break
					}
				}
			}
		}
	}
}

// downstreamOperators maps each operator id of p to the ids of the
// operators its records reach, itself included.
func (p *Plan) downstreamOperators() map[string]map[string]bool {
	next := map[string]map[string]bool{}
	for _, c := range p.Channels {
		from, to := p.Tasks[c.From].OperatorID, p.Tasks[c.To].OperatorID
		if next[from] == nil {
			next[from] = map[string]bool{}
		}
		next[from][to] = true
	}
	down := map[string]map[string]bool{}
	var visit func(id string, seen map[string]bool)
	visit = func(id string, seen map[string]bool) {
		if seen[id] {
			return
		}
		seen[id] = true
		for to := range next[id] {
			visit(to, seen)
		}
	}
	for _, t := range p.Tasks {
		if down[t.OperatorID] == nil {
			down[t.OperatorID] = map[string]bool{}
			visit(t.OperatorID, down[t.OperatorID])
		}
	}
	return down
}
