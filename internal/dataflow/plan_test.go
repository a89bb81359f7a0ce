package dataflow

import (
	"fmt"
	"strings"
	"testing"
)

// describe prints every exported field of a plan, for comparing plans.
func describe(p *Plan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "job %s maxp %d fingerprint %s\n", p.Job, p.MaxParallelism, p.Fingerprint)
	for _, t := range p.Tasks {
		fmt.Fprintf(&b, "task %d %s %s %s sub %d/%d in %v out %v kg [%d,%d)\n", t.Index, t.ID, t.Operator, t.Kind,
			t.Subtask, t.Parallelism, t.Inputs, t.Outputs, t.KeyGroupStart, t.KeyGroupEnd)
		for _, r := range t.Routes {
			fmt.Fprintf(&b, "  route %+v\n", r)
		}
	}
	for _, c := range p.Channels {
		fmt.Fprintf(&b, "channel %+v\n", c)
	}
	return b.String()
}

// wideGraph has every kind of edge: forward, rebalance, broadcast, key-by,
// default edges, and a union.
func wideGraph(p int) *Graph {
	g := New("wide", MaxParallelism(16))
	a := Sequence(g, "a", 1, 100, Parallelism(p))
	b := Generate(g, "b", 10, func(i int64) int64 { return -i }, Parallelism(2))
	u := Map(Union(Forward(a), Rebalance(b)), "u", id64, Parallelism(p))
	bc := Map(Broadcast(u), "bc", id64, Parallelism(2))
	k := Process(KeyBy(bc, id64), "k", func(*KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
		return func(_ *Context[int64], v int64, out *Collector[int64]) error { out.Emit(v); return nil }
	}, Parallelism(4))
	Sink(k, "sink", discard[int64])
	return g
}

func TestPlanDeterministic(t *testing.T) {
	g := wideGraph(3)
	p1, p2 := mustPlan(t, g), mustPlan(t, g)
	if d1, d2 := describe(p1), describe(p2); d1 != d2 {
		t.Errorf("planning one graph twice differs:\n%s\n---\n%s", d1, d2)
	}
	p3 := mustPlan(t, wideGraph(3))
	if d1, d3 := describe(p1), describe(p3); d1 != d3 {
		t.Errorf("planning two equal graphs differs:\n%s\n---\n%s", d1, d3)
	}
}

func TestPlanTaskIDs(t *testing.T) {
	p := mustPlan(t, wideGraph(3))
	var ids []string
	for i, task := range p.Tasks {
		if task.Index != i {
			t.Errorf("task %s has Index %d, want %d", task.ID, task.Index, i)
		}
		if want := fmt.Sprintf("%s#%d", task.Operator, task.Subtask); task.ID != want {
			t.Errorf("task ID %q, want %q", task.ID, want)
		}
		if p.Task(task.ID) != task {
			t.Errorf("Task(%q) does not return the task", task.ID)
		}
		ids = append(ids, task.ID)
	}
	want := "a#0 a#1 a#2 b#0 b#1 u#0 u#1 u#2 bc#0 bc#1 k#0 k#1 k#2 k#3 sink#0"
	if got := strings.Join(ids, " "); got != want {
		t.Errorf("task ids = %s, want %s", got, want)
	}
	if p.Task("nope#0") != nil {
		t.Error("Task of an unknown id is not nil")
	}
}

// checkWiring checks that Inputs, Outputs, Routes and Channels agree.
func checkWiring(t *testing.T, p *Plan) {
	t.Helper()
	seenIn := make([]int, len(p.Channels))
	for _, task := range p.Tasks {
		for i, id := range task.Inputs {
			ch := p.Channels[id]
			if ch.To != task.Index || ch.ToInput != i {
				t.Errorf("task %s input %d is channel %+v", task.ID, i, ch)
			}
			seenIn[id]++
		}
		for o, id := range task.Outputs {
			if ch := p.Channels[id]; ch.From != task.Index || ch.FromOutput != o {
				t.Errorf("task %s output %d is channel %+v", task.ID, o, ch)
			}
		}
		next := 0
		for _, r := range task.Routes {
			if r.First != next {
				t.Errorf("task %s route to %s starts at output %d, want %d", task.ID, r.To, r.First, next)
			}
			for _, id := range task.Outputs[r.First : r.First+r.Targets] {
				if ch := p.Channels[id]; ch.Partition != r.Partition || p.Tasks[ch.To].Operator != r.To {
					t.Errorf("task %s route %+v has channel %+v", task.ID, r, ch)
				}
			}
			next += r.Targets
		}
		if next != len(task.Outputs) {
			t.Errorf("task %s routes cover %d outputs of %d", task.ID, next, len(task.Outputs))
		}
	}
	for id, n := range seenIn {
		if n != 1 {
			t.Errorf("channel %d is the input of %d tasks, want 1", id, n)
		}
		if p.Channels[id].ID != id {
			t.Errorf("channel %d has ID %d", id, p.Channels[id].ID)
		}
	}
}

func TestPlanChannels(t *testing.T) {
	const p = 3
	plan := mustPlan(t, wideGraph(p))
	checkWiring(t, plan)
	count := map[string]int{} // "from->to partition"
	for _, ch := range plan.Channels {
		count[fmt.Sprintf("%s->%s %s", plan.Tasks[ch.From].Operator, plan.Tasks[ch.To].Operator, ch.Partition)]++
	}
	want := map[string]int{
		"a->u forward":      p,     // task i to task i
		"b->u rebalance":    2 * p, // every pair
		"u->bc broadcast":   p * 2,
		"bc->k hash":        2 * 4,
		"k->sink rebalance": 4 * 1, // default edge, parallelisms differ
	}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("channels = %v, want %v", count, want)
	}
	for _, ch := range plan.Channels {
		from, to := plan.Tasks[ch.From], plan.Tasks[ch.To]
		if ch.Partition == PartitionForward && from.Subtask != to.Subtask {
			t.Errorf("forward channel %+v joins subtask %d to %d", ch, from.Subtask, to.Subtask)
		}
	}
}

func TestPlanDefaultPartition(t *testing.T) {
	for _, tt := range []struct {
		from, to int
		want     Partition
	}{
		{1, 1, PartitionForward},
		{3, 3, PartitionForward},
		{1, 3, PartitionRebalance},
		{3, 2, PartitionRebalance},
	} {
		g := New("job")
		Sink(Sequence(g, "src", 1, 2, Parallelism(tt.from)), "sink", discard[int64], Parallelism(tt.to))
		p := mustPlan(t, g)
		checkWiring(t, p)
		for _, ch := range p.Channels {
			if ch.Partition != tt.want {
				t.Errorf("%d -> %d: channel partition %s, want %s", tt.from, tt.to, ch.Partition, tt.want)
			}
		}
		n := tt.from * tt.to
		if tt.want == PartitionForward {
			n = tt.from
		}
		if len(p.Channels) != n {
			t.Errorf("%d -> %d: %d channels, want %d", tt.from, tt.to, len(p.Channels), n)
		}
	}
}

func TestPlanUnionOfTwoSources(t *testing.T) {
	g := New("job")
	a := Sequence(g, "a", 1, 2, Parallelism(2))
	b := Sequence(g, "b", 1, 2)
	Sink(Union(a, b), "sink", discard[int64], Parallelism(2))
	p := mustPlan(t, g)
	checkWiring(t, p)
	for _, id := range []string{"sink#0", "sink#1"} {
		task := mustTask(t, p, id)
		var from []string
		for _, c := range task.Inputs {
			from = append(from, p.Tasks[p.Channels[c].From].ID)
		}
		// a -> sink is forward (same parallelism), b -> sink rebalance.
		want := fmt.Sprintf("a#%d b#0", task.Subtask)
		if got := strings.Join(from, " "); got != want {
			t.Errorf("%s inputs come from %s, want %s", id, got, want)
		}
	}
}

// TestPlanInputsInEdgeOrder checks that a task's inputs list its input edges
// in order even when two edges join the same pair of tasks.
func TestPlanInputsInEdgeOrder(t *testing.T) {
	g := New("job")
	a := Sequence(g, "a", 1, 2, Parallelism(2))
	Sink(Union(Forward(a), Rebalance(a)), "sink", discard[int64], Parallelism(2))
	p := mustPlan(t, g)
	checkWiring(t, p)
	for _, id := range []string{"sink#0", "sink#1"} {
		task := mustTask(t, p, id)
		var got []string
		for _, c := range task.Inputs {
			ch := p.Channels[c]
			got = append(got, fmt.Sprintf("%s %s", p.Tasks[ch.From].ID, ch.Partition))
		}
		want := []string{fmt.Sprintf("a#%d forward", task.Subtask), "a#0 rebalance", "a#1 rebalance"}
		if strings.Join(got, ", ") != strings.Join(want, ", ") {
			t.Errorf("%s inputs = %v, want %v", id, got, want)
		}
	}
}

func TestKeyGroupRange(t *testing.T) {
	for maxP := 1; maxP <= 130; maxP++ {
		for par := 1; par <= maxP; par++ {
			owner := make([]int, maxP)
			for i := range owner {
				owner[i] = -1
			}
			prevEnd := 0
			for s := 0; s < par; s++ {
				start, end := KeyGroupRange(maxP, par, s)
				if start != prevEnd || end < start || end > maxP {
					t.Fatalf("KeyGroupRange(%d, %d, %d) = [%d, %d) after %d", maxP, par, s, start, end, prevEnd)
				}
				if end == start {
					t.Fatalf("KeyGroupRange(%d, %d, %d) is empty", maxP, par, s)
				}
				for kg := start; kg < end; kg++ {
					owner[kg] = s
				}
				prevEnd = end
			}
			if prevEnd != maxP {
				t.Fatalf("max %d, parallelism %d: ranges end at %d", maxP, par, prevEnd)
			}
			for kg, s := range owner {
				if got := TaskForKeyGroup(maxP, par, kg); got != s {
					t.Fatalf("TaskForKeyGroup(%d, %d, %d) = %d, but subtask %d owns it", maxP, par, kg, got, s)
				}
			}
		}
	}
}

func TestPlanKeyGroupsOfTasks(t *testing.T) {
	p := mustPlan(t, wideGraph(3))
	for _, task := range p.Tasks {
		start, end := KeyGroupRange(p.MaxParallelism, task.Parallelism, task.Subtask)
		if task.KeyGroupStart != start || task.KeyGroupEnd != end {
			t.Errorf("task %s owns [%d,%d), want [%d,%d)", task.ID, task.KeyGroupStart, task.KeyGroupEnd, start, end)
		}
	}
}

func TestPlanFingerprint(t *testing.T) {
	base := mustPlan(t, wideGraph(3)).Fingerprint
	if base == "" {
		t.Fatal("empty fingerprint")
	}
	if fp := mustPlan(t, wideGraph(3)).Fingerprint; fp != base {
		t.Errorf("fingerprint of an equal graph %s, want %s", fp, base)
	}
	if fp := mustPlan(t, wideGraph(2)).Fingerprint; fp == base {
		t.Error("fingerprint does not change with parallelism")
	}
	// Same operators and parallelisms, another partitioning.
	edge := func(partition func(Stream[int64]) Stream[int64]) string {
		g := New("job")
		Sink(partition(Sequence(g, "src", 1, 2, Parallelism(2))), "sink", discard[int64], Parallelism(2))
		return mustPlan(t, g).Fingerprint
	}
	fwd, bc := edge(Forward[int64]), edge(Broadcast[int64])
	if fwd == bc {
		t.Error("fingerprint does not change with the partitioning")
	}
	if def := edge(func(s Stream[int64]) Stream[int64] { return s }); def != fwd {
		t.Error("a default edge between equal parallelisms is not fingerprinted as forward")
	}
}

func TestKindAndPartitionStrings(t *testing.T) {
	for v, want := range map[fmt.Stringer]string{
		KindSource: "source", KindOperator: "operator", KindSink: "sink", Kind(9): "kind(9)",
		PartitionForward: "forward", PartitionRebalance: "rebalance", PartitionBroadcast: "broadcast",
		PartitionHash: "hash", Partition(0): "partition(0)",
	} {
		if got := v.String(); got != want {
			t.Errorf("String() = %q, want %q", got, want)
		}
	}
}
