package dataflow

import (
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// TestTopologyDiff: each kind of change is named, with both values, and
// descriptions that are missing (older manifests and nodes) give nothing.
func TestTopologyDiff(t *testing.T) {
	base := func() *messages.Topology {
		return &messages.Topology{
			MaxParallelism: 128,
			Operators: []*messages.TopologyOperator{
				{Name: "source", OperatorId: "source", Kind: "source", Parallelism: 2},
				{Name: "sum", OperatorId: "sum", Kind: "operator", Parallelism: 3, Keyed: true},
				{Name: "sink", OperatorId: "sink", Kind: "sink", Parallelism: 3},
			},
			Edges: []*messages.TopologyEdge{
				{From: "source", To: "sum", Partition: "hash"},
				{From: "sum", To: "sink", Partition: "forward"},
			},
			Params: map[string]string{"records": "600", "keys": "7"},
		}
	}
	for _, tc := range []struct {
		name   string
		change func(*messages.Topology)
		want   []string
	}{
		{"same", func(*messages.Topology) {}, nil},
		{"parallelism", func(n *messages.Topology) { n.Operators[1].Parallelism = 2 },
			[]string{`operator "sum": parallelism from 3 to 2`}},
		{"max parallelism", func(n *messages.Topology) { n.MaxParallelism = 256 },
			[]string{"max parallelism from 128 to 256"}},
		{"operator added", func(n *messages.Topology) {
			n.Operators = slices.Insert(n.Operators, 1, &messages.TopologyOperator{Name: "enrich", OperatorId: "enrich", Kind: "operator", Parallelism: 2})
			n.Edges = []*messages.TopologyEdge{{From: "source", To: "enrich", Partition: "forward"}, {From: "enrich", To: "sum", Partition: "hash"}, n.Edges[1]}
		}, []string{`operator "enrich" added (operator, parallelism 2)`, `edge "source"->"sum" (hash) removed`,
			`edge "source"->"enrich" (forward) added`, `edge "enrich"->"sum" (hash) added`}},
		{"operator removed", func(n *messages.Topology) {
			n.Operators = n.Operators[:2]
			n.Edges = n.Edges[:1]
		}, []string{`operator "sink" removed`, `edge "sum"->"sink" (forward) removed`}},
		{"partition", func(n *messages.Topology) { n.Edges[1].Partition = "rebalance" },
			[]string{`edge "sum"->"sink" (forward) removed`, `edge "sum"->"sink" (rebalance) added`}},
		{"kind, id and keyed state", func(n *messages.Topology) {
			n.Operators[2].Kind, n.Operators[1].OperatorId, n.Operators[1].Keyed = "operator", "sum-v2", false
		}, []string{`operator "sum": id from "sum" to "sum-v2"`, `operator "sum": keyed state from true to false`, `operator "sink": kind from sink to operator`}},
		{"parameters", func(n *messages.Topology) {
			n.Params = map[string]string{"records": "700", "rate": "10"}
		}, []string{`parameter "keys" removed (was "7")`, `parameter "rate" added ("10")`, `parameter "records" from "600" to "700"`}},
		{"a second edge between the same operators", func(n *messages.Topology) {
			n.Edges = append(n.Edges, &messages.TopologyEdge{From: "sum", To: "sink", Partition: "forward"})
		}, []string{`edge "sum"->"sink" (forward) added`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := base()
			tc.change(n)
			got := TopologyDiff(base(), n)
			if !slices.Equal(got, tc.want) {
				t.Errorf("TopologyDiff:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
	if d := TopologyDiff(nil, base()); d != nil {
		t.Errorf("TopologyDiff of a manifest without a description: %q, want nil", d)
	}
	if d := TopologyDiff(base(), nil); d != nil {
		t.Errorf("TopologyDiff against a node without a description: %q, want nil", d)
	}
	if c := TopologyChange(nil, base(), "the checkpoint", "this job"); c != "" {
		t.Errorf("TopologyChange without a description: %q, want empty", c)
	}
}

// TestPlanTopology: a plan describes what its fingerprint covers, so that
// two plans whose fingerprints differ have a difference to name.
func TestPlanTopology(t *testing.T) {
	build := func(p int, params map[string]string) *Plan {
		g := New("job", Params(params))
		src := Generate(g, "source", 10, func(i int64) int64 { return i })
		Sink(Map(src, "double", func(v int64) int64 { return 2 * v }, Parallelism(p)), "sink", func(int64) error { return nil })
		plan, err := NewPlan(g)
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	a, b := build(2, map[string]string{"n": "1"}), build(3, map[string]string{"n": "2"})
	if a.Fingerprint == b.Fingerprint {
		t.Fatal("the fingerprints do not differ")
	}
	got := TopologyChange(a.Topology(), b.Topology(), "the checkpoint", "this job")
	for _, want := range []string{"from the checkpoint to this job: ", `operator "double": parallelism from 2 to 3`, `parameter "n" from "1" to "2"`} {
		if !strings.Contains(got, want) {
			t.Errorf("TopologyChange = %q, want it to say %q", got, want)
		}
	}
	if d := TopologyDiff(a.Topology(), build(2, map[string]string{"n": "1"}).Topology()); d != nil {
		t.Errorf("TopologyDiff of one graph built twice: %q", d)
	}
}
