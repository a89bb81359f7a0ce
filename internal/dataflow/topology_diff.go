package dataflow

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// describeTopology returns the description of the topology that fingerprint
// covers, in the same order, with the job's parameters.
func describeTopology(g *Graph, order []*node) *messages.Topology {
	t := &messages.Topology{MaxParallelism: uint32(g.maxParallelism), Params: g.Params()}
	for _, n := range order {
		t.Operators = append(t.Operators, &messages.TopologyOperator{
			Name: n.name, OperatorId: n.uid, Kind: n.kind.String(), Parallelism: uint32(n.parallelism), Keyed: n.keyedState,
		})
		for _, e := range n.outputs {
			t.Edges = append(t.Edges, &messages.TopologyEdge{From: n.name, To: e.to.name, Partition: resolvePartition(e).String()})
		}
	}
	return t
}

// Topology describes the plan for a manifest or a worker's registration:
// what the fingerprint covers, and the parameters. The message is shared:
// do not modify it.
func (p *Plan) Topology() *messages.Topology { return p.topology }

// TopologyDiff names what differs from topology old to topology new: the
// max parallelism, operators added or removed, an operator's parallelism,
// kind, id or keyed state, edges added or removed, and parameters added,
// removed or changed (name, old and new value), in that order. It returns
// nil when either description is missing (a manifest or a node that
// predates them) or when they do not differ.
func TopologyDiff(old, new *messages.Topology) []string {
	if old == nil || new == nil {
		return nil
	}
	var d []string
	if a, b := old.GetMaxParallelism(), new.GetMaxParallelism(); a != b {
		d = append(d, fmt.Sprintf("max parallelism from %d to %d", a, b))
	}
	d = append(d, operatorsDiff(old.GetOperators(), new.GetOperators())...)
	d = append(d, edgesDiff(old.GetEdges(), new.GetEdges())...)
	return append(d, paramsDiff(old.GetParams(), new.GetParams())...)
}

func operatorsDiff(old, new []*messages.TopologyOperator) []string {
	var d []string
	byName := func(ops []*messages.TopologyOperator, name string) *messages.TopologyOperator {
		i := slices.IndexFunc(ops, func(o *messages.TopologyOperator) bool { return o.GetName() == name })
		if i < 0 {
			return nil
		}
		return ops[i]
	}
	for _, o := range old {
		if byName(new, o.GetName()) == nil {
			d = append(d, fmt.Sprintf("operator %q removed", o.GetName()))
		}
	}
	for _, n := range new {
		o := byName(old, n.GetName())
		if o == nil {
			d = append(d, fmt.Sprintf("operator %q added (%s, parallelism %d)", n.GetName(), n.GetKind(), n.GetParallelism()))
			continue
		}
		if a, b := o.GetParallelism(), n.GetParallelism(); a != b {
			d = append(d, fmt.Sprintf("operator %q: parallelism from %d to %d", n.GetName(), a, b))
		}
		if a, b := o.GetKind(), n.GetKind(); a != b {
			d = append(d, fmt.Sprintf("operator %q: kind from %s to %s", n.GetName(), a, b))
		}
		if a, b := o.GetOperatorId(), n.GetOperatorId(); a != b {
			d = append(d, fmt.Sprintf("operator %q: id from %q to %q", n.GetName(), a, b))
		}
		if a, b := o.GetKeyed(), n.GetKeyed(); a != b {
			d = append(d, fmt.Sprintf("operator %q: keyed state from %t to %t", n.GetName(), a, b))
		}
	}
	return d
}

func edgesDiff(old, new []*messages.TopologyEdge) []string {
	name := func(e *messages.TopologyEdge) string {
		return fmt.Sprintf("edge %q->%q (%s)", e.GetFrom(), e.GetTo(), e.GetPartition())
	}
	count := map[string]int{} // new minus old, by edge
	var order []string        // first seen first: old's edges, then new's
	for i, es := range [][]*messages.TopologyEdge{old, new} {
		for _, e := range es {
			k := name(e)
			if _, seen := count[k]; !seen {
				order = append(order, k)
			}
			count[k] += 2*i - 1
		}
	}
	var d []string
	for _, k := range order {
		c, what := count[k], " added"
		if c < 0 {
			c, what = -c, " removed"
		}
		switch {
		case c == 1:
			d = append(d, k+what)
		case c > 1:
			d = append(d, fmt.Sprintf("%s%s %d times", k, what, c))
		}
	}
	return d
}

func paramsDiff(old, new map[string]string) []string {
	var d []string
	keys := slices.Sorted(maps.Keys(old))
	for k := range new {
		if _, ok := old[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		a, inOld := old[k]
		b, inNew := new[k]
		switch {
		case !inNew:
			d = append(d, fmt.Sprintf("parameter %q removed (was %q)", k, a))
		case !inOld:
			d = append(d, fmt.Sprintf("parameter %q added (%q)", k, b))
		case a != b:
			d = append(d, fmt.Sprintf("parameter %q from %q to %q", k, a, b))
		}
	}
	return d
}

// TopologyChange returns, for a refusal, what differs from old (described
// as from) to new (described as to), or "" when that is not known (see
// TopologyDiff): "from the checkpoint to this job: operator "sum":
// parallelism from 2 to 3; parameter "records" from "10" to "20"".
func TopologyChange(old, new *messages.Topology, from, to string) string {
	d := TopologyDiff(old, new)
	if len(d) == 0 {
		return ""
	}
	return fmt.Sprintf("from %s to %s: %s", from, to, strings.Join(d, "; "))
}
