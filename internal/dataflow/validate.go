package dataflow

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by every validation error.
var ErrInvalid = errors.New("topology: invalid graph")

// ValidationError lists every problem found in a graph, each naming its operator.
type ValidationError struct {
	Job      string
	Problems []string
}

// Error implements error.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("topology: job %q is invalid:\n  - %s", e.Job, strings.Join(e.Problems, "\n  - "))
}

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

func errorf(format string, args ...any) error {
	return fmt.Errorf("topology: "+format, args...)
}

// Validate reports every structural problem of the graph at once as a
// *ValidationError, or nil when the graph can be planned. Besides the
// structure it checks what a snapshot store must hold: job and operator
// names that fit a store key (see MaxNameLength) and a max parallelism of at
// most MaxParallelismLimit.
func (g *Graph) Validate() error {
	var ps []string
	add := func(format string, args ...any) { ps = append(ps, fmt.Sprintf(format, args...)) }
	if g.name == "" {
		add("the job has an empty name")
	} else if why := nameProblem(g.name, false); why != "" {
		add("job name %q %s", g.name, why)
	}
	if g.maxParallelism < 1 || g.maxParallelism > MaxParallelismLimit {
		add("topology.MaxParallelism(%d): the max parallelism must be between 1 and %d", g.maxParallelism, MaxParallelismLimit)
	}
	if len(g.nodes) == 0 {
		add("the graph is empty: add a source, operators and a sink")
	}
	ps = append(ps, g.problems...)
	seen := map[string]bool{}
	ids := map[string]string{} // operator id -> the first operator's name
	for _, n := range g.nodes {
		ps = append(ps, g.nodeProblems(n, seen)...)
		ps = append(ps, idProblems(n, ids)...)
	}
	for _, n := range g.cycle() {
		add("operator %q: is part of a cycle", n.name)
	}
	if len(ps) == 0 {
		return nil
	}
	return &ValidationError{Job: g.name, Problems: ps}
}

func (g *Graph) nodeProblems(n *node, seen map[string]bool) []string {
	var ps []string
	add := func(format string, args ...any) {
		ps = append(ps, fmt.Sprintf("operator %q: ", n.name)+fmt.Sprintf(format, args...))
	}
	switch {
	case n.name == "":
		ps = append(ps, fmt.Sprintf("operator #%d (kind %s, numbered from 0 in the order added) has an empty name", n.id, n.kind))
	case seen[n.name]:
		add("the name is used by more than one operator")
	default:
		if why := nameProblem(n.name, true); why != "" {
			add("the name %s", why)
		}
	}
	seen[n.name] = true
	if n.parallelism < 1 {
		add("parallelism %d must be at least 1", n.parallelism)
	} else if g.maxParallelism >= 1 && n.parallelism > g.maxParallelism {
		add("parallelism %d exceeds the max parallelism %d", n.parallelism, g.maxParallelism)
	}
	if n.kind != KindSource && len(n.inputs) == 0 {
		add("has no input")
	}
	if n.kind != KindSink && len(n.outputs) == 0 {
		add("its output stream is never consumed (a dangling stream): connect it to an operator or a sink")
	}
	for _, e := range n.inputs {
		if n.keyedState && e.partition != PartitionHash {
			add("declares keyed state, but its input from %q is not keyed (use KeyBy)", e.from.name)
		}
		if e.partition == PartitionForward && e.explicit && e.from.parallelism != n.parallelism {
			add("forward edge from %q joins parallelism %d to %d; use Rebalance or the same parallelism",
				e.from.name, e.from.parallelism, n.parallelism)
		}
	}
	return ps
}

// idProblems checks n's operator id: a valid name, used by no other
// operator (ids maps each id seen so far to its operator's name).
func idProblems(n *node, ids map[string]string) []string {
	if n.uid == n.name && n.name == "" {
		return nil // reported as an empty name
	}
	var ps []string
	switch other, dup := ids[n.uid]; {
	case n.uid == "":
		ps = append(ps, fmt.Sprintf("operator %q: topology.OperatorID(\"\"): the operator id is empty", n.name))
	case dup && other != n.name:
		ps = append(ps, fmt.Sprintf("operator %q: the operator id %q is also the id of operator %q; every operator needs its own id, which its state is stored under",
			n.name, n.uid, other))
	case dup:
		// the same name twice, reported by nodeProblems
	default:
		if why := nameProblem(n.uid, true); why != "" && n.uid != n.name {
			ps = append(ps, fmt.Sprintf("operator %q: the operator id %q %s", n.name, n.uid, why))
		}
	}
	if _, dup := ids[n.uid]; !dup {
		ids[n.uid] = n.name
	}
	return ps
}

// cycle returns the nodes that lie on a cycle, in creation order. Kahn's
// algorithm leaves out every node it cannot order, which includes the nodes
// merely downstream of a cycle; only those that can reach themselves are
// reported, so that the error names the operators to fix.
func (g *Graph) cycle() []*node {
	order := g.topoOrder()
	if len(order) == len(g.nodes) {
		return nil
	}
	ordered := make([]bool, len(g.nodes))
	for _, n := range order {
		ordered[n.id] = true
	}
	var on []*node
	for _, n := range g.nodes {
		if !ordered[n.id] && reachesItself(n) {
			on = append(on, n)
		}
	}
	return on
}

// reachesItself reports whether a path of one or more edges leads from n back to n.
func reachesItself(n *node) bool {
	seen := map[*node]bool{}
	stack := []*node{n}
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range cur.outputs {
			if e.to == n {
				return true
			}
			if !seen[e.to] {
				seen[e.to] = true
				stack = append(stack, e.to)
			}
		}
	}
	return false
}

// topoOrder is Kahn's algorithm, taking ready nodes in creation order, so the
// order is deterministic. Nodes on a cycle are left out.
func (g *Graph) topoOrder() []*node {
	indeg := make([]int, len(g.nodes))
	for _, n := range g.nodes {
		indeg[n.id] = len(n.inputs)
	}
	var order []*node
	done := make([]bool, len(g.nodes))
	for progress := true; progress; {
		progress = false
		for _, n := range g.nodes {
			if done[n.id] || indeg[n.id] != 0 {
				continue
			}
			done[n.id] = true
			order = append(order, n)
			for _, e := range n.outputs {
				indeg[e.to.id]--
			}
			progress = true
		}
	}
	return order
}
