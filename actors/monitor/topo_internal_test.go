package monitor

import (
	"fmt"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/topology"
)

func testPlan(t *testing.T) *dataflow.Plan {
	t.Helper()
	g := topology.New("topo")
	nums := topology.Generate(g, "gen", 10, func(i int64) int64 { return i })
	sums := topology.Process(topology.KeyBy(nums, func(v int64) int64 { return v % 3 }), "sum",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			n := topology.Value[int64](s, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				c, _ := n.Get()
				n.Set(c + v)
				return nil
			}
		}, topology.Parallelism(2), topology.OperatorID("summer"))
	topology.Sink(sums, "out", func(int64) error { return nil })
	p, err := dataflow.NewPlan(g)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The graph read from a plan: operators by id with kind, parallelism and
// keyed state, tasks pointing at their operator's id, and edges between
// operator ids with their partitioning.
func TestTopoFromPlan(t *testing.T) {
	top := newTopo(testPlan(t))
	if got := fmt.Sprint(top.operators); got != "[{gen gen source 1 false 0 0 0 0} {summer sum operator 2 true 0 0 0 0} {out out sink 1 false 0 0 0 0}]" {
		t.Errorf("operators: %s", got)
	}
	if got := fmt.Sprint(top.edges); got != "[{gen summer hash} {summer out rebalance}]" {
		t.Errorf("edges: %s", got)
	}
	var tasks []string
	for _, tk := range top.tasks {
		tasks = append(tasks, fmt.Sprintf("%s/%s/%d", tk.ID, tk.Operator, tk.Subtask))
	}
	if got := fmt.Sprint(tasks); got != "[gen#0/gen/0 sum#0/summer/0 sum#1/summer/1 out#0/out/0]" {
		t.Errorf("tasks: %s", got)
	}
}

// The placement of a cluster's tasks gives each task its worker's id.
func TestPlacement(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	m.topo = newTopo(testPlan(t))
	m.handle(actors.Event{Kind: actors.EventPlaced, Epoch: 1,
		Placement: "gen#0,sum#1 -> w1@127.0.0.1:4001; sum#0,out#0 -> w2@127.0.0.1:4002"}, 0)
	var got []string
	for _, tk := range m.Job().Tasks {
		got = append(got, tk.ID+"@"+tk.Node)
	}
	if fmt.Sprint(got) != "[gen#0@w1 sum#0@w2 sum#1@w1 out#0@w2]" {
		t.Errorf("tasks placed: %v", got)
	}
	m.handle(actors.Event{Kind: actors.EventPlaced, Epoch: 2, Placement: "gen#0,sum#0,sum#1,out#0 -> w2@127.0.0.1:4002"}, 0)
	if tk := m.Job().Tasks[0]; tk.Node != "w2" {
		t.Errorf("after the second placement gen#0 is on %q", tk.Node)
	}
}

// Lost workers beyond Options.Timeline are forgotten, the oldest first;
// live ones stay.
func TestNodesBounded(t *testing.T) {
	m, err := New(Options{Timeline: 2})
	if err != nil {
		t.Fatal(err)
	}
	m.handle(actors.Event{Kind: actors.EventNodeJoined, Node: "live@h:1"}, 0)
	for i := range 5 {
		w := fmt.Sprintf("w%d@h:%d", i, i)
		m.handle(actors.Event{Kind: actors.EventNodeJoined, Node: w}, 0)
		m.handle(actors.Event{Kind: actors.EventNodeLost, Node: w}, 0)
	}
	if got := fmt.Sprint(m.Job().Nodes); got != "[{live h:1 up} {w3 h:3 lost} {w4 h:4 lost}]" {
		t.Errorf("nodes: %s", got)
	}
}

func TestRing(t *testing.T) {
	r := newRing[int](3)
	for i := 1; i <= 7; i++ {
		r.push(i)
		var got []int
		for j := range r.len() {
			got = append(got, *r.at(j))
		}
		want := []int{}
		for v := i; v > 0 && len(want) < 3; v-- {
			want = append(want, v)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after pushing 1..%d: %v, want %v", i, got, want)
		}
	}
}
