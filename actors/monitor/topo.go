package monitor

import "github.com/snapflow/snapflow/internal/dataflow"

// topo is the static part of a job's graph, read once from its plan.
type topo struct {
	operators []Operator // counters zero
	tasks     []Task     // counters zero, no node
	edges     []Edge
	taskOp    []int          // position in operators of each task's operator
	inputs    []int          // input channels of each task
	byTask    map[string]int // task id -> position in tasks
}

func newTopo(p *dataflow.Plan) *topo {
	t := &topo{byTask: make(map[string]int, len(p.Tasks))}
	opByName := make(map[string]int)
	for _, tp := range p.Tasks {
		if _, ok := opByName[tp.Operator]; !ok {
			opByName[tp.Operator] = len(t.operators)
			t.operators = append(t.operators, Operator{ID: tp.OperatorID, Name: tp.Operator, Kind: tp.Kind.String(), Parallelism: tp.Parallelism})
		}
	}
	for _, e := range p.Operators(nil) {
		if i, ok := opByName[e.GetName()]; ok {
			t.operators[i].Keyed = e.GetKeyed()
		}
	}
	type edgeKey struct{ from, to, part string }
	seen := make(map[edgeKey]bool)
	for _, tp := range p.Tasks {
		op := opByName[tp.Operator]
		t.byTask[tp.ID] = len(t.tasks)
		t.tasks = append(t.tasks, Task{ID: tp.ID, Operator: tp.OperatorID, Subtask: tp.Subtask})
		t.taskOp = append(t.taskOp, op)
		t.inputs = append(t.inputs, len(tp.Inputs))
		if tp.Subtask != 0 {
			continue
		}
		for _, r := range tp.Routes {
			to, ok := opByName[r.To]
			if !ok {
				continue
			}
			k := edgeKey{tp.OperatorID, t.operators[to].ID, r.Partition.String()}
			if !seen[k] {
				seen[k] = true
				t.edges = append(t.edges, Edge{From: k.from, To: k.to, Partitioning: k.part})
			}
		}
	}
	return t
}
