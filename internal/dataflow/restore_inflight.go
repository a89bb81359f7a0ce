package dataflow

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// LabelInFlight records in it, an item of channel state of channel ch (a
// channel id as in Channels), which channel it belongs to: the sender's and
// receiver's operator ids and subtasks, the edge and its partitioning. A
// restore into another topology or parallelism finds the channel again by
// them (see PlanRestore).
func (p *Plan) LabelInFlight(ch int, it *messages.InFlight) {
	c := &p.Channels[ch]
	from, to := p.Tasks[c.From], p.Tasks[c.To]
	it.FromOperatorId, it.FromSubtask = from.OperatorID, uint32(from.Subtask)
	it.ToOperatorId, it.ToSubtask = to.OperatorID, uint32(to.Subtask)
	it.Edge, it.Partition = uint32(c.Edge), uint32(c.Partition)
	it.RecordType = p.codecs[ch].recordType()
}

// inFlightInPlace reports whether every labelled item of channel state in
// old names, by its index, the channel of p it was recorded on (its
// sender's and receiver's operator ids and subtasks, and its edge): a
// checkpoint of the same fingerprint can then be restored as it is. A
// topology with the same fingerprint may still number its channels
// otherwise (the inputs of a union in another order, say).
func inFlightInPlace(p *Plan, old map[string]*storedOperator, ids []string) bool {
	for _, id := range ids {
		for _, t := range old[id].tasks {
			task := p.Task(t.id)
			for _, it := range t.st.GetInFlight() {
				if it.GetFromOperatorId() == "" {
					continue // older: nothing to compare
				}
				if task == nil {
					return false
				}
				chans := task.Inputs
				if it.GetOutput() {
					chans = task.Outputs
				}
				if int(it.GetChannel()) >= len(chans) {
					return false
				}
				c := p.Channels[chans[it.GetChannel()]]
				from, to := p.Tasks[c.From], p.Tasks[c.To]
				if keyOf(it) != (channelKey{from: from.OperatorID, to: to.OperatorID, fromSub: from.Subtask, toSub: to.Subtask, edge: c.Edge}) {
					return false
				}
			}
		}
	}
	return true
}

// channelKey names a channel across plans: its edge (the receiving
// operator's id and the edge's index among its inputs), the sender's
// operator id and the two subtasks.
type channelKey struct {
	from, to       string
	fromSub, toSub int
	edge           int
}

func keyOf(it *messages.InFlight) channelKey {
	return channelKey{from: it.GetFromOperatorId(), to: it.GetToOperatorId(), fromSub: int(it.GetFromSubtask()),
		toSub: int(it.GetToSubtask()), edge: int(it.GetEdge())}
}

// edgeKey names an edge across plans.
type edgeKey struct {
	from, to string
	edge     int
}

// inFlightRemap is the state of remapInFlight: the new plan's channels by
// key, and what it has decided and refused.
type inFlightRemap struct {
	p       *Plan
	r       *Restore
	old     map[string]*storedOperator
	cur     map[string]*newOperator
	chans   map[channelKey]int
	refused map[edgeKey]bool
	next    map[edgeKey]int // rebalance: the receiver of the next item
	add     func(err error, format string, args ...any)
	// dropped counts the watermarks of redistributed channels, by edge.
	dropped map[edgeKey]int
	// allowDrop: the records on their way to an operator the job no longer
	// has are dropped with it (WithAllowNonRestoredState); gone counts
	// them by operator.
	allowDrop bool
	gone      map[string]int
	maxP      int // the checkpoint's max parallelism
	kgs       []int
}

// remapInFlight finds the channel state of a checkpoint again in p, whose
// topology or parallelism differs from the checkpoint's (or which numbers
// the channels otherwise), and sets each task's TaskRestore.InFlight. The
// channels of an edge whose partitioning is the same and whose two ends
// keep their parallelism (and, keyed, the max parallelism) keep their
// items where they were: the receiver's input items as its input, the
// sender's output items as its output. Any other channel's items go to
// the receivers of its edge in p, as their input, each channel's input
// items (which its receiver had) before its output items (which its
// sender had still queued), so that every record keeps its place after the
// ones its sender sent before it:
//
//   - on a hash edge, record by record to the task that owns the record's
//     key group;
//   - on a rebalance edge, item by item round robin.
//
// The watermarks of those channels are dropped (they belong to a sender
// and receiver pair that no longer exists; the restored tasks resume from
// their stored watermarks and their senders send new ones). Deciding per
// edge, not per channel, keeps a sender's queued records ahead of those
// its key groups' new owner sends, and a kept watermark from overtaking
// redistributed records. Items of a forward or broadcast edge that is not
// kept, of an
// edge p no longer has or whose record type changed, or stored without
// their channel (by an older version) are refused through add, naming the
// edge; those on their way to an operator p no longer has are dropped with
// its state when allowDrop (WithAllowNonRestoredState).
func remapInFlight(p *Plan, old map[string]*storedOperator, ids []string, cur map[string]*newOperator, r *Restore,
	maxP int, allowDrop bool, add func(err error, format string, args ...any)) {
	m := &inFlightRemap{p: p, r: r, old: old, cur: cur, chans: map[channelKey]int{}, refused: map[edgeKey]bool{},
		next: map[edgeKey]int{}, dropped: map[edgeKey]int{}, add: add, allowDrop: allowDrop, gone: map[string]int{}, maxP: maxP}
	for id, c := range p.Channels {
		from, to := p.Tasks[c.From], p.Tasks[c.To]
		m.chans[channelKey{from: from.OperatorID, to: to.OperatorID, fromSub: from.Subtask, toSub: to.Subtask, edge: c.Edge}] = id
	}
	r.inFlightRemapped = true
	older := false
	for _, id := range ids {
		for _, t := range old[id].tasks {
			for _, it := range t.st.GetInFlight() {
				if it.GetFromOperatorId() == "" {
					add(nil, "task %s: the checkpoint is unaligned and holds records in flight stored by an older snapflow, without the channels they belong to: restore it into the same topology and parallelism, or rescale from a savepoint (always aligned)", t.id)
					older = true
					break
				}
			}
		}
	}
	if older {
		return
	}
	// Input items first, then output items: a channel's receiver had
	// received what its sender still had queued after it.
	for _, output := range []bool{false, true} {
		for _, id := range ids {
			if !output && slices.Contains(r.Dropped, id) {
				continue // its operator is gone, with what it had received
			}
			for _, t := range old[id].tasks {
				for _, it := range t.st.GetInFlight() {
					if it.GetOutput() == output {
						m.place(it)
					}
				}
			}
		}
	}
	for _, op := range slices.Sorted(maps.Keys(m.gone)) {
		r.DroppedInFlight = append(r.DroppedInFlight, fmt.Sprintf("to %s: %d items", op, m.gone[op]))
	}
	for _, e := range slices.SortedFunc(maps.Keys(m.dropped), compareEdgeKeys) {
		r.DroppedWatermarks = append(r.DroppedWatermarks, fmt.Sprintf("%s->%s (input %d): %d", e.from, e.to, e.edge, m.dropped[e]))
	}
}

func compareEdgeKeys(a, b edgeKey) int {
	return cmp.Or(strings.Compare(a.to, b.to), cmp.Compare(a.edge, b.edge), strings.Compare(a.from, b.from))
}

// place decides where item it of the checkpoint goes in the new plan.
func (m *inFlightRemap) place(it *messages.InFlight) {
	k := keyOf(it)
	ek := edgeKey{from: k.from, to: k.to, edge: k.edge}
	if m.refused[ek] {
		return
	}
	recv := m.cur[k.to]
	if recv == nil && m.allowDrop {
		// The receiver is gone, with its state (WithAllowNonRestoredState):
		// so are the records on their way to it.
		m.gone[k.to]++
		return
	}
	var e *edge
	if recv != nil && len(recv.tasks) > 0 && recv.tasks[0].node != nil {
		// The edge of the same index, from the same operator; or else the
		// one edge from that operator (the receiver may take its inputs in
		// another order).
		ins, found := recv.tasks[0].node.inputs, -1
		if k.edge < len(ins) && ins[k.edge].from.uid == k.from {
			found = k.edge
		} else {
			for i, in := range ins {
				if in.from.uid == k.from {
					if found >= 0 {
						found = -1 // two: which is unknown
						break
					}
					found = i
				}
			}
		}
		if found >= 0 {
			e, k.edge = ins[found], found // k names the channel in the new plan from here on
		}
	}
	if e == nil {
		m.refuse(ek, "the channels from operator %q to operator %q (its input %d) hold records in flight, but the job has no such edge: restore the checkpoint into the topology that took it, or change the topology from a savepoint (always aligned)",
			k.from, k.to, k.edge)
		return
	}
	if was, now := it.GetRecordType(), e.codec.recordType(); was != "" && was != now {
		m.refuse(ek, "the channels from operator %q to operator %q hold records in flight of type %s, but the edge now carries %s: restore the checkpoint into the job that took it, or change the type from a savepoint (always aligned)",
			k.from, k.to, was, now)
		return
	}
	was, now := Partition(it.GetPartition()), resolvePartition(e)
	oldSend, oldRecv, newSend := 0, 0, 0
	if o := m.old[k.from]; o != nil {
		oldSend = len(o.tasks)
	}
	if o := m.old[k.to]; o != nil {
		oldRecv = len(o.tasks)
	}
	if s := m.cur[k.from]; s != nil {
		newSend = len(s.tasks)
	}
	// Decided per edge: its channels stay as they were only when both ends
	// keep their parallelism (and a keyed edge its key groups). Otherwise a
	// kept channel's watermark could overtake the redistributed records of
	// another, and a sender's queued records could follow the records that
	// its key groups' new owner sends.
	kept := was == now && oldSend == newSend && oldRecv == len(recv.tasks) && (now != PartitionHash || m.maxP == m.p.MaxParallelism)
	if ch, ok := m.chans[k]; ok && kept {
		c := m.p.Channels[ch]
		if it.GetOutput() {
			m.give(c.From, it, true, c.FromOutput)
		} else {
			m.give(c.To, it, false, c.ToInput)
		}
		return
	}
	if redistributable := func(p Partition) bool { return p == PartitionHash || p == PartitionRebalance }; !redistributable(was) || !redistributable(now) {
		m.refuse(ek, "the edge from operator %q (%d tasks, %d in the checkpoint) to operator %q (%d tasks, %d in the checkpoint), %s when the checkpoint was taken and %s now, holds records in flight, which only keyed (hash) and rebalance edges can redistribute: keep both parallelisms, or rescale from a savepoint (always aligned)",
			k.from, newSend, oldSend, k.to, len(recv.tasks), oldRecv, was, now)
		return
	}
	if it.GetIsWatermark() {
		m.dropped[ek]++
		return
	}
	sender := k.fromSub
	if s := m.cur[k.from]; s != nil && len(s.tasks) > 0 {
		sender %= len(s.tasks)
	}
	input := func(t *TaskPlan) int { // the receiver's input from sender on e
		return m.p.Channels[m.chans[channelKey{from: k.from, to: k.to, fromSub: sender, toSub: t.Subtask, edge: k.edge}]].ToInput
	}
	if now == PartitionRebalance {
		t := recv.tasks[m.next[ek]%len(recv.tasks)]
		m.next[ek]++
		m.give(t.Index, it, false, input(t))
		return
	}
	var err error
	rb := &messages.RecordBatch{Data: it.GetData(), Ends: it.GetEnds()}
	if m.kgs, err = e.codec.keyGroups(rb, e.keyGroup, m.kgs[:0]); err != nil {
		m.refuse(ek, "the records in flight from operator %q to operator %q cannot be redistributed: %v", k.from, k.to, err)
		return
	}
	var ts []int64
	if len(it.GetTimestamps()) > 0 {
		if ts, err = DecodeTimestamps(it.GetTimestamps(), len(it.GetEnds())); err != nil {
			m.refuse(ek, "the records in flight from operator %q to operator %q cannot be redistributed: %v", k.from, k.to, err)
			return
		}
	}
	if ts != nil && m.late(k, recv, ts, m.kgs) {
		return
	}
	parts := splitByTask(it, m.kgs, ts, m.p.MaxParallelism, len(recv.tasks))
	for s, part := range parts {
		if part != nil {
			t := recv.tasks[s]
			m.give(t.Index, part, false, input(t))
		}
	}
}

// late refuses, and reports, records with event times ts and key groups
// kgs on their way to task k.toSub of the checkpoint's receiving operator,
// which are redistributed over recv's tasks, when a record could be late
// after the restore and was not before: a rescaled task resumes from the
// highest watermark of the stored tasks whose key groups it takes (so that
// no window fires twice; see resumeWatermark), which may be past the
// watermark of the task the record was on its way to.
func (m *inFlightRemap) late(k channelKey, recv *newOperator, ts []int64, kgs []int) bool {
	before := int64(math.MinInt64)
	if o := m.old[k.to]; o != nil && k.toSub < len(o.tasks) {
		before = storedWatermark(o.tasks[k.toSub])
	}
	for i, t := range ts {
		s := TaskForKeyGroup(m.p.MaxParallelism, len(recv.tasks), kgs[i])
		w := m.r.tasks[recv.tasks[s].Index].Watermark
		if w == nil || *w <= before || t > *w || t <= before {
			continue
		}
		m.refuse(edgeKey{from: k.from, to: k.to, edge: k.edge}, "operator %q: the checkpoint holds records in flight to its task %d, whose watermark was %s, with event times up to %s, and its rescaled task %d resumes from watermark %s (the highest of the stored tasks' whose key groups it takes, so that no window fires twice): a record on time before the rescale (event time %s) could be late after it. Rescale from a savepoint (always aligned), or keep its parallelism",
			k.to, k.toSub, formatWatermark(before), formatWatermark(slices.Max(ts)), s, formatWatermark(*w), formatWatermark(t))
		return true
	}
	return false
}

func formatWatermark(w int64) string {
	if w == math.MinInt64 {
		return "none"
	}
	return strconv.FormatInt(w, 10)
}

// splitByTask splits the records of item it, whose key groups are kgs and
// timestamps ts (nil: none), into one item per receiving task of a hash
// edge over n tasks (nil for a task that gets none), keeping their order.
// The records' bytes are copied, not decoded again.
func splitByTask(it *messages.InFlight, kgs []int, ts []int64, maxP, n int) []*messages.InFlight {
	parts := make([]*messages.InFlight, n)
	var stamps [][]int64
	if ts != nil {
		stamps = make([][]int64, n)
	}
	data, ends := it.GetData(), it.GetEnds()
	start := uint32(0)
	for i, end := range ends {
		s := TaskForKeyGroup(maxP, n, kgs[i])
		p := parts[s]
		if p == nil {
			p = &messages.InFlight{}
			parts[s] = p
		}
		p.Data = append(p.Data, data[start:end]...)
		p.Ends = append(p.Ends, uint32(len(p.Data)))
		if ts != nil {
			stamps[s] = append(stamps[s], ts[i])
		}
		start = end
	}
	for s, p := range parts {
		if p != nil && ts != nil {
			p.Timestamps = EncodeTimestamps(stamps[s])
		}
	}
	return parts
}

// give appends a copy of it, placed on channel ch of task i (an output
// index when output), to what task i replays.
func (m *inFlightRemap) give(i int, it *messages.InFlight, output bool, ch int) {
	tr := &m.r.tasks[i]
	tr.InFlight = append(tr.InFlight, &messages.InFlight{
		Output: output, Channel: uint32(ch), Data: it.GetData(), Ends: it.GetEnds(), Timestamps: it.GetTimestamps(),
		IsWatermark: it.GetIsWatermark(), Watermark: it.GetWatermark(), Idle: it.GetIdle(),
	})
}

func (m *inFlightRemap) refuse(ek edgeKey, format string, args ...any) {
	m.refused[ek] = true
	m.add(nil, format, args...)
}
