package dataflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// flightShape is a job for the channel-state tests: src (a sequence) keyed
// by value modulo 13 into agg (a Map), then into sink over edge (nil: the
// default partitioning), and, with extra, a second sink of src's output
// first, which moves every channel index of src's outputs.
type flightShape struct {
	src, agg, sink int
	edge           func(Stream[int64]) Stream[int64]
	extra          bool
}

func (s flightShape) plan(t *testing.T) *Plan {
	g := New("flight", MaxParallelism(32))
	src := Sequence(g, "src", 0, 9, Parallelism(s.src))
	if s.extra {
		Sink(src, "audit", discard[int64], Parallelism(1))
	}
	agg := Map(KeyBy(src, func(v int64) int64 { return v % 13 }).Stream, "agg", func(v int64) int64 { return v }, Parallelism(s.agg))
	if s.edge != nil {
		agg = s.edge(agg)
	}
	Sink(agg, "sink", discard[int64], Parallelism(s.sink))
	return mustPlan(t, g)
}

// flightCheckpoint makes a checkpoint of p whose every channel holds
// records in flight: per channel, two batches its receiver had not
// processed, then a watermark, then one batch its sender still had queued.
// The records are unique, and increase along each channel. It returns the
// checkpoint and every record's channel key.
func flightCheckpoint(t *testing.T, p *Plan) (*messages.Manifest, map[string]*messages.TaskState, map[int64]channelKey) {
	states := map[string]*messages.TaskState{}
	state := func(task *TaskPlan) *messages.TaskState {
		if states[task.ID] == nil {
			states[task.ID] = &messages.TaskState{TaskId: task.ID, Operator: task.Operator, OperatorId: task.OperatorID, Subtask: uint32(task.Subtask)}
		}
		return states[task.ID]
	}
	where := map[int64]channelKey{}
	for id, c := range p.Channels {
		kg := channelKeyGroup(p, id)
		next := int64(id * 10000)
		batch := func(output bool, n int) *messages.InFlight {
			recs := make([]int64, n)
			ts := make([]int64, n)
			for i := range recs {
				// A keyed channel carries only records of its receiver's key groups.
				for kg != nil && TaskForKeyGroup(p.MaxParallelism, p.Tasks[c.To].Parallelism, kg(next)) != p.Tasks[c.To].Subtask {
					next++
				}
				recs[i], ts[i] = next, 5000+next
				next++
			}
			rb := &messages.RecordBatch{}
			if err := p.ChannelCodec(id).Encode(slices.Clone(recs), rb); err != nil {
				t.Fatal(err)
			}
			ch := c.ToInput
			if output {
				ch = c.FromOutput
			}
			it := &messages.InFlight{Output: output, Channel: uint32(ch), Data: rb.Data, Ends: rb.Ends, Timestamps: EncodeTimestamps(ts)}
			p.LabelInFlight(id, it)
			for _, r := range recs {
				where[r] = keyOf(it)
			}
			return it
		}
		wm := &messages.InFlight{Channel: uint32(c.ToInput), IsWatermark: true, Watermark: int64(id)}
		p.LabelInFlight(id, wm)
		to, from := state(p.Tasks[c.To]), state(p.Tasks[c.From])
		to.InFlight = append(to.InFlight, batch(false, 5), batch(false, 4), wm)
		from.InFlight = append(from.InFlight, batch(true, 6))
	}
	return checkpointFrom(p, states), states, where
}

// channelKeyGroup returns the key group function of channel id's edge
// (nil: not a hash edge).
func channelKeyGroup(p *Plan, id int) func(int64) int {
	c := p.Channels[id]
	for _, r := range p.Tasks[c.From].Routes {
		if c.FromOutput >= r.First && c.FromOutput < r.First+r.Targets && r.Partition == PartitionHash {
			return r.keyGroup.(keyGrouper[int64]).of
		}
	}
	return nil
}

// replayed is what one task of a restored plan replays.
type replayed struct {
	inputs  map[int][]int64 // records by input channel index
	outputs map[int][]int64 // by output index
	marks   int
}

func replays(t *testing.T, p *Plan, r *Restore, states map[string]*messages.TaskState) map[string]*replayed {
	out := map[string]*replayed{}
	for _, task := range p.Tasks {
		rp := &replayed{inputs: map[int][]int64{}, outputs: map[int][]int64{}}
		out[task.ID] = rp
		for _, it := range r.InFlight(task.Index, r.State(p, task.Index, states)) {
			if it.IsWatermark {
				rp.marks++
				continue
			}
			ch := task.Inputs
			if it.Output {
				ch = task.Outputs
			}
			b, err := p.ChannelCodec(ch[it.Channel]).Decode(&messages.RecordBatch{Data: it.Data, Ends: it.Ends})
			if err != nil {
				t.Fatalf("%s: %v", task.ID, err)
			}
			ts, err := DecodeTimestamps(it.Timestamps, len(it.Ends))
			if err != nil {
				t.Fatalf("%s: %v", task.ID, err)
			}
			for i, v := range b.([]int64) {
				if ts[i] != 5000+v {
					t.Errorf("%s: record %d carries timestamp %d", task.ID, v, ts[i])
				}
				if it.Output {
					rp.outputs[int(it.Channel)] = append(rp.outputs[int(it.Channel)], v)
				} else {
					rp.inputs[int(it.Channel)] = append(rp.inputs[int(it.Channel)], v)
				}
			}
		}
	}
	return out
}

// TestRemapInFlight restores an unaligned checkpoint into other
// parallelisms and topologies: every record in flight is replayed once;
// on a keyed edge, by the task that owns its key group; each old
// channel's records in their order, the receiver's before the sender's;
// and channels the new plan keeps as they were keep their items in place,
// watermarks included.
func TestRemapInFlight(t *testing.T) {
	cases := []struct {
		name     string
		from, to flightShape
		moved    []string // edges whose watermarks are dropped
	}{
		{"agg 2 to 3", flightShape{src: 2, agg: 2, sink: 3}, flightShape{src: 2, agg: 3, sink: 4}, []string{"agg->sink", "src->agg"}},
		{"agg 3 to 1", flightShape{src: 2, agg: 3, sink: 2}, flightShape{src: 2, agg: 1, sink: 2}, []string{"agg->sink", "src->agg"}},
		{"src 3 to 2", flightShape{src: 3, agg: 2, sink: 3}, flightShape{src: 2, agg: 2, sink: 3}, []string{"src->agg"}},
		{"sink 3 to 4", flightShape{src: 2, agg: 2, sink: 3}, flightShape{src: 2, agg: 2, sink: 4}, []string{"agg->sink"}},
		{"all at once", flightShape{src: 1, agg: 4, sink: 2}, flightShape{src: 3, agg: 2, sink: 5}, []string{"agg->sink", "src->agg"}},
		{"new operator", flightShape{src: 2, agg: 3, sink: 2}, flightShape{src: 2, agg: 3, sink: 2, extra: true}, nil},
		// The sender of a keyed edge rescaled, its receiver not: what the
		// old senders had queued goes to the receivers as input, ahead of
		// what the key groups' new owners send.
		{"keyed sink, agg 3 to 2", flightShape{src: 2, agg: 3, sink: 2, edge: keyedBy7}, flightShape{src: 2, agg: 2, sink: 2, edge: keyedBy7}, []string{"agg->sink", "src->agg"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p1, p2 := c.from.plan(t), c.to.plan(t)
			m, states, where := flightCheckpoint(t, p1)
			r, err := PlanRestore(p2, nil, m, states, RestoreOptions{Rescale: true})
			if err != nil {
				t.Fatal(err)
			}
			if !r.InFlightRemapped() {
				t.Fatal("the channel state was not remapped")
			}
			for _, e := range c.moved {
				if !strings.Contains(strings.Join(r.DroppedWatermarks, " "), e) {
					t.Errorf("dropped watermarks %q, want those of %s", r.DroppedWatermarks, e)
				}
			}
			if len(r.DroppedWatermarks) != len(c.moved) {
				t.Errorf("dropped watermarks %q, want those of %q", r.DroppedWatermarks, c.moved)
			}
			seen := map[int64]string{}
			par := func(p *Plan, op string) int { return mustTask(t, p, op+"#0").Parallelism }
			for id, rp := range replays(t, p2, r, states) {
				task := mustTask(t, p2, id)
				// Output stays queued at a sender only on an edge whose
				// both ends kept their parallelism.
				for ch := range rp.outputs {
					to := p2.Tasks[p2.Channels[task.Outputs[ch]].To].Operator
					if par(p1, task.Operator) != task.Parallelism || par(p1, to) != par(p2, to) {
						t.Errorf("%s replays output to %s, but the edge's parallelism changed (%d->%d, %d->%d)", id, to,
							par(p1, task.Operator), task.Parallelism, par(p1, to), par(p2, to))
					}
				}
				for side, part := range []map[int][]int64{rp.inputs, rp.outputs} {
					for _, recs := range part {
						last := map[channelKey]int64{}
						for _, v := range recs {
							if prev, ok := seen[v]; ok {
								t.Fatalf("record %d replayed by %s and %s", v, prev, id)
							}
							seen[v] = id
							if l, ok := last[where[v]]; ok && v < l {
								t.Errorf("%s replays record %d after %d, of the same old channel", id, v, l)
							}
							last[where[v]] = v
							if side == 0 && len(task.Inputs) > 0 {
								if kg := channelKeyGroup(p2, task.Inputs[0]); kg != nil {
									if s := TaskForKeyGroup(p2.MaxParallelism, task.Parallelism, kg(v)); s != task.Subtask {
										t.Errorf("%s replays record %d, whose key group subtask %d owns", id, v, s)
									}
								}
							}
						}
					}
				}
				if rp.marks > 0 && task.Operator == "src" {
					t.Errorf("%s replays %d watermarks", id, rp.marks)
				}
			}
			if len(seen) != len(where) {
				t.Errorf("%d records replayed, %d in flight", len(seen), len(where))
			}
		})
	}
}

func keyedBy7(s Stream[int64]) Stream[int64] {
	return KeyBy(s, func(v int64) int64 { return v % 7 }).Stream
}

// TestRemapInFlightKeepsChannels restores an unaligned checkpoint into a
// plan that only moved channel indices (a new operator): every item keeps
// its channel, on the same side, in order, with its watermark.
func TestRemapInFlightKeepsChannels(t *testing.T) {
	p1 := flightShape{src: 2, agg: 3, sink: 2}.plan(t)
	p2 := flightShape{src: 2, agg: 3, sink: 2, extra: true}.plan(t)
	m, states, _ := flightCheckpoint(t, p1)
	r, err := PlanRestore(p2, nil, m, states, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, task := range p1.Tasks {
		old := states[task.ID].GetInFlight()
		now := r.InFlight(mustTask(t, p2, task.ID).Index, nil)
		if len(now) != len(old) {
			t.Fatalf("%s replays %d items, stored %d", task.ID, len(now), len(old))
		}
		for i, it := range now {
			o := old[i]
			var was, is ChannelPlan
			if it.Output {
				was, is = p1.Channels[task.Outputs[o.Channel]], p2.Channels[mustTask(t, p2, task.ID).Outputs[it.Channel]]
			} else {
				was, is = p1.Channels[task.Inputs[o.Channel]], p2.Channels[mustTask(t, p2, task.ID).Inputs[it.Channel]]
			}
			if it.Output != o.Output || it.IsWatermark != o.IsWatermark || string(it.Data) != string(o.Data) ||
				p1.Tasks[was.From].ID != p2.Tasks[is.From].ID || p1.Tasks[was.To].ID != p2.Tasks[is.To].ID {
				t.Errorf("%s item %d: %s->%s output=%t, stored %s->%s output=%t", task.ID, i,
					p2.Tasks[is.From].ID, p2.Tasks[is.To].ID, it.Output, p1.Tasks[was.From].ID, p1.Tasks[was.To].ID, o.Output)
			}
		}
	}
	output := func(p *Plan) int { // src#0's output index to agg#0
		for _, c := range p.Channels {
			if p.Tasks[c.From].ID == "src#0" && p.Tasks[c.To].ID == "agg#0" {
				return c.FromOutput
			}
		}
		return -1
	}
	if output(p1) == output(p2) {
		t.Fatal("the new operator moved no channel: the test shows nothing")
	}
}

// TestRemapInFlightRefusals: what cannot be redistributed is refused,
// naming the edge.
func TestRemapInFlightRefusals(t *testing.T) {
	fwd := func(s Stream[int64]) Stream[int64] { return Forward(s) }
	cases := []struct {
		name     string
		from, to flightShape
		strip    bool // the items carry no channel (an older version)
		want     string
	}{
		{"forward", flightShape{src: 2, agg: 2, sink: 2, edge: fwd}, flightShape{src: 2, agg: 3, sink: 3, edge: fwd}, false,
			`edge from operator "agg" (3 tasks, 2 in the checkpoint) to operator "sink" (3 tasks, 2 in the checkpoint), forward when the checkpoint was taken and forward now`},
		{"implicit forward", flightShape{src: 2, agg: 2, sink: 2}, flightShape{src: 2, agg: 2, sink: 3}, false,
			`edge from operator "agg" (2 tasks, 2 in the checkpoint) to operator "sink" (3 tasks, 2 in the checkpoint), forward when the checkpoint was taken and rebalance now`},
		{"broadcast", flightShape{src: 2, agg: 2, sink: 2, edge: Broadcast[int64]}, flightShape{src: 2, agg: 2, sink: 3, edge: Broadcast[int64]}, false,
			`edge from operator "agg" (2 tasks, 2 in the checkpoint) to operator "sink" (3 tasks, 2 in the checkpoint), broadcast when the checkpoint was taken and broadcast now`},
		{"older checkpoint", flightShape{src: 2, agg: 2, sink: 3}, flightShape{src: 2, agg: 3, sink: 3}, true,
			"stored by an older snapflow"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p1, p2 := c.from.plan(t), c.to.plan(t)
			m, states, _ := flightCheckpoint(t, p1)
			if c.strip {
				for _, st := range states {
					for _, it := range st.InFlight {
						it.FromOperatorId = ""
					}
				}
			}
			_, err := PlanRestore(p2, nil, m, states, RestoreOptions{Rescale: true})
			if !errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a refusal naming %s", err, c.want)
			}
		})
	}
	t.Run("late after the rescale", func(t *testing.T) {
		p1, p2 := flightShape{src: 2, agg: 2, sink: 3}.plan(t), flightShape{src: 2, agg: 3, sink: 4}.plan(t)
		for _, w := range [][2]int64{{1e9, 1e9}, {1e9, 0}} {
			m, states, _ := flightCheckpoint(t, p1)
			states["agg#0"].Watermark, states["agg#1"].Watermark = &w[0], &w[1]
			_, err := PlanRestore(p2, nil, m, states, RestoreOptions{Rescale: true})
			switch {
			case w[0] == w[1] && err != nil:
				t.Fatalf("the same watermark on both stored tasks: %v", err)
			case w[0] != w[1] && (!errors.Is(err, ErrRestoreRefused) ||
				!strings.Contains(err.Error(), `operator "agg": the checkpoint holds records in flight to its task 1, whose watermark was 0, with event times up to`)):
				t.Fatalf("records in flight to agg#1 (watermark 0) restored at watermark 1e9: %v", err)
			}
		}
	})
	t.Run("record type changed", func(t *testing.T) {
		p1 := flightShape{src: 2, agg: 2, sink: 3}.plan(t)
		g := New("flight", MaxParallelism(32))
		src := Sequence(g, "src", 0, 9, Parallelism(2))
		agg := Map(KeyBy(src, func(v int64) int64 { return v % 13 }).Stream, "agg", func(v int64) float64 { return float64(v) }, Parallelism(2))
		Sink(agg, "sink", discard[float64], Parallelism(4))
		m, states, _ := flightCheckpoint(t, p1)
		_, err := PlanRestore(mustPlan(t, g), nil, m, states, RestoreOptions{Rescale: true})
		want := `the channels from operator "agg" to operator "sink" hold records in flight of type int64, but the edge now carries float64`
		if !errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("receiver dropped", func(t *testing.T) {
		p1 := flightShape{src: 2, agg: 2, sink: 3}.plan(t)
		g := New("flight", MaxParallelism(32))
		src := Sequence(g, "src", 0, 9, Parallelism(2))
		Sink(KeyBy(src, func(v int64) int64 { return v % 13 }).Stream, "agg", discard[int64], Parallelism(2))
		m, states, _ := flightCheckpoint(t, p1)
		_, err := PlanRestore(mustPlan(t, g), nil, m, states, RestoreOptions{Rescale: true})
		if !errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), `operator "sink": the checkpoint holds its records in flight`) {
			t.Fatalf("without AllowNonRestoredState: %v", err)
		}
		r, err := PlanRestore(mustPlan(t, g), nil, m, states, RestoreOptions{Rescale: true, AllowNonRestoredState: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(r.DroppedInFlight, " "); !strings.Contains(got, "to sink: 6 items") {
			t.Errorf("DroppedInFlight = %q, want agg's 6 output items to sink", r.DroppedInFlight)
		}
	})
	t.Run("edge gone", func(t *testing.T) {
		p1 := flightShape{src: 2, agg: 2, sink: 3}.plan(t)
		g := New("flight", MaxParallelism(32))
		src := Sequence(g, "src", 0, 9, Parallelism(2))
		agg := Map(KeyBy(src, func(v int64) int64 { return v % 13 }).Stream, "agg", func(v int64) int64 { return v }, Parallelism(2))
		Sink(agg, "out", discard[int64], Parallelism(3))
		Sink(src, "sink", discard[int64], Parallelism(3))
		m, states, _ := flightCheckpoint(t, p1)
		_, err := PlanRestore(mustPlan(t, g), nil, m, states, RestoreOptions{Rescale: true})
		want := fmt.Sprintf("the channels from operator %q to operator %q (its input 0) hold records in flight, but the job has no such edge", "agg", "sink")
		if !errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), want) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestRemapInFlightSameFingerprint: a job whose union takes its inputs in
// the other order has the same fingerprint but numbers the union's input
// channels otherwise: its channel state is found by channel, not by index.
func TestRemapInFlightSameFingerprint(t *testing.T) {
	build := func(swap bool) *Plan {
		g := New("flight", MaxParallelism(32))
		a := Sequence(g, "a", 0, 9, Parallelism(1))
		b := Sequence(g, "b", 100, 109, Parallelism(2))
		u := Union(a, b)
		if swap {
			u = Union(b, a)
		}
		Sink(Map(u, "m", func(v int64) int64 { return v }, Parallelism(1)), "sink", discard[int64], Parallelism(1))
		return mustPlan(t, g)
	}
	p1, p2 := build(false), build(true)
	if p1.Fingerprint != p2.Fingerprint {
		t.Skip("the fingerprint tells the two orders apart: nothing to check")
	}
	m, states, _ := flightCheckpoint(t, p1)
	r, err := PlanRestore(p2, nil, m, states, RestoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.InFlightRemapped() {
		t.Fatal("the channel state was restored by index")
	}
	task := mustTask(t, p2, "m#0")
	for _, it := range r.InFlight(task.Index, nil) {
		if it.Output {
			continue
		}
		c := p2.Channels[task.Inputs[it.Channel]]
		if it.IsWatermark {
			// flightCheckpoint's watermark of channel id is id: channel
			// ids of p1 differ from p2's, so compare the sender.
			continue
		}
		b, err := p2.ChannelCodec(task.Inputs[it.Channel]).Decode(&messages.RecordBatch{Data: it.Data, Ends: it.Ends})
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range b.([]int64) {
			// flightCheckpoint numbers records by p1's channel id.
			c1 := p1.Channels[int(v/10000)]
			if from := p1.Tasks[c1.From].ID; from != p2.Tasks[c.From].ID {
				t.Fatalf("record %d, sent by %s, is replayed on m's input from %s", v, from, p2.Tasks[c.From].ID)
			}
		}
	}
}
