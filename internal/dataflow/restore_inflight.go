package dataflow

import (
	"fmt"
	"maps"
	"slices"

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
	kgs     []int
}

// remapInFlight finds the channel state of a checkpoint again in p, whose
// topology or parallelism differs from the checkpoint's, and sets each
// task's TaskRestore.InFlight. A channel that p still has, on an edge of
// the same partitioning into an operator of the same parallelism, keeps
// its items where they were: the receiver's input items as its input, the
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
// their stored watermarks and their senders send new ones). Items of a
// forward or broadcast edge, of an edge p no longer has, or stored without
// their channel (by an older version) are refused through add, naming the
// edge.
func remapInFlight(p *Plan, old map[string]*storedOperator, ids []string, cur map[string]*newOperator, r *Restore,
	add func(err error, format string, args ...any)) {
	m := &inFlightRemap{p: p, r: r, old: old, cur: cur, chans: map[channelKey]int{}, refused: map[edgeKey]bool{},
		next: map[edgeKey]int{}, dropped: map[edgeKey]int{}, add: add}
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
	for _, e := range slices.SortedFunc(maps.Keys(m.dropped), compareEdgeKeys) {
		r.DroppedWatermarks = append(r.DroppedWatermarks, fmt.Sprintf("%s->%s (input %d): %d", e.from, e.to, e.edge, m.dropped[e]))
	}
}

func compareEdgeKeys(a, b edgeKey) int {
	switch {
	case a.to != b.to:
		if a.to < b.to {
			return -1
		}
		return 1
	case a.edge != b.edge:
		return a.edge - b.edge
	case a.from < b.from:
		return -1
	case a.from > b.from:
		return 1
	}
	return 0
}

// place decides where item it of the checkpoint goes in the new plan.
func (m *inFlightRemap) place(it *messages.InFlight) {
	k := keyOf(it)
	ek := edgeKey{from: k.from, to: k.to, edge: k.edge}
	if m.refused[ek] {
		return
	}
	recv := m.cur[k.to]
	var e *edge
	if recv != nil && len(recv.tasks) > 0 && recv.tasks[0].node != nil {
		if ins := recv.tasks[0].node.inputs; k.edge < len(ins) && ins[k.edge].from.uid == k.from {
			e = ins[k.edge]
		}
	}
	if e == nil {
		m.refuse(ek, "the channels from operator %q to operator %q (its input %d) hold records in flight, but the job has no such edge: restore the checkpoint into the topology that took it, or change the topology from a savepoint (always aligned)",
			k.from, k.to, k.edge)
		return
	}
	was, now := Partition(it.GetPartition()), resolvePartition(e)
	oldRecv := 0
	if o := m.old[k.to]; o != nil {
		oldRecv = len(o.tasks)
	}
	if ch, ok := m.chans[k]; ok && was == now && oldRecv == len(recv.tasks) {
		c := m.p.Channels[ch]
		if it.GetOutput() {
			m.give(c.From, it, true, c.FromOutput)
		} else {
			m.give(c.To, it, false, c.ToInput)
		}
		return
	}
	if redistributable := func(p Partition) bool { return p == PartitionHash || p == PartitionRebalance }; !redistributable(was) || !redistributable(now) {
		m.refuse(ek, "the edge from operator %q to operator %q (%s when the checkpoint was taken, %s now) holds records in flight, which cannot be redistributed over the %d tasks of %q (from %d): only keyed (hash) and rebalance edges can be; keep the parallelism, or rescale from a savepoint (always aligned)",
			k.from, k.to, was, now, len(recv.tasks), k.to, oldRecv)
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
	parts := splitByTask(it, m.kgs, ts, m.p.MaxParallelism, len(recv.tasks))
	for s, part := range parts {
		if part != nil {
			t := recv.tasks[s]
			m.give(t.Index, part, false, input(t))
		}
	}
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
