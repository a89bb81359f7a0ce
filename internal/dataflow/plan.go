package dataflow

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// Plan is the physical form of a graph: tasks and the channels between them.
// NewPlan is deterministic: the same graph always gives the same plan.
type Plan struct {
	Job            string
	MaxParallelism int
	Tasks          []*TaskPlan
	Channels       []ChannelPlan
	// Fingerprint identifies the topology (operators, parallelisms, edges),
	// so that a checkpoint is not restored into a different job by mistake.
	Fingerprint string
	// Params are the job's parameters (see Params), which nodes of a
	// cluster compare; they are not part of Fingerprint, so a job restored
	// with other parameters is not a different topology.
	Params map[string]string

	edges    []*edge            // every edge, in plan order (see CheckWire)
	topology *messages.Topology // see Topology
	codecs   []edgeCodec        // by channel id: the codec of the channel's edge
}

// TaskPlan is one task: one parallel instance of an operator.
type TaskPlan struct {
	Index    int    // position in Plan.Tasks
	ID       string // "operator#subtask"
	Operator string
	// OperatorID is the operator's stable id (see OperatorID), which
	// checkpoints and savepoints map its state to.
	OperatorID  string
	Kind        Kind
	Subtask     int
	Parallelism int
	// Inputs are the channel ids feeding the task; the position is the
	// task's input channel index.
	Inputs []int
	// InputPorts are, by input channel index, the operator input each
	// channel feeds: 0, or 1 for the second input of a two-input operator.
	InputPorts []int
	// Outputs are the channel ids the task writes, grouped by route.
	Outputs []int
	// Routes describe the outgoing edges, in order.
	Routes []Route
	// KeyGroupStart and KeyGroupEnd bound the key groups [start, end) the
	// task owns.
	KeyGroupStart, KeyGroupEnd int
	// Keyed says that the operator declares keyed state (Process), which
	// the task stores by key group.
	Keyed bool
	// Timed says that the task's output records carry event timestamps:
	// its operator is a source with a watermark strategy, or is fed by
	// such a source (see WithWatermarks).
	Timed bool

	node *node
	maxP int
}

// Route is one outgoing edge of a task.
type Route struct {
	To             string // downstream operator
	Partition      Partition
	First          int // index in Outputs of the first target
	Targets        int // number of downstream tasks reached
	MaxParallelism int
	// Side is the output the route leaves from: 0 for the operator's main
	// output, k for its k-th side output.
	Side     int
	keyGroup any
}

// ChannelPlan joins an output of one task to an input of another.
type ChannelPlan struct {
	ID         int
	From, To   int // task indices
	FromOutput int // index in the sender's Outputs
	ToInput    int // the receiver's input channel index
	Partition  Partition
	// Edge is the index of the channel's edge among the receiving
	// operator's inputs.
	Edge int
}

// NewPlan validates g and plans its tasks and channels.
func NewPlan(g *Graph) (*Plan, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	p := &Plan{Job: g.name, MaxParallelism: g.maxParallelism}
	order := g.topoOrder()
	first := make([]int, len(g.nodes)) // index of each node's task 0
	timed := make([]bool, len(g.nodes))
	for _, n := range order {
		timed[n.id] = n.kind == KindSource && n.watermarks != nil
		for _, e := range n.inputs {
			timed[n.id] = timed[n.id] || timed[e.from.id]
		}
		first[n.id] = len(p.Tasks)
		for s := 0; s < n.parallelism; s++ {
			start, end := KeyGroupRange(g.maxParallelism, n.parallelism, s)
			p.Tasks = append(p.Tasks, &TaskPlan{
				Index: len(p.Tasks), ID: fmt.Sprintf("%s#%d", n.name, s), Operator: n.name, OperatorID: n.uid, Kind: n.kind,
				Subtask: s, Parallelism: n.parallelism, KeyGroupStart: start, KeyGroupEnd: end, Keyed: n.keyedState, Timed: timed[n.id], node: n, maxP: g.maxParallelism,
			})
		}
	}
	// Outputs: per sender, edges in order, targets in subtask order.
	type link struct {
		e        *edge
		from, to int // task indices
	}
	chans := make(map[link]int) // at most one channel per edge and pair of tasks
	for _, n := range order {
		for _, e := range n.outputs {
			part := resolvePartition(e)
			p.edges = append(p.edges, e)
			for s := 0; s < n.parallelism; s++ {
				from := p.Tasks[first[n.id]+s]
				targets := targetsOf(part, s, e.to.parallelism)
				from.Routes = append(from.Routes, Route{
					To: e.to.name, Partition: part, First: len(from.Outputs), Targets: len(targets),
					MaxParallelism: g.maxParallelism, keyGroup: e.keyGroup, Side: e.side,
				})
				for _, t := range targets {
					to := p.Tasks[first[e.to.id]+t]
					ch := ChannelPlan{ID: len(p.Channels), From: from.Index, To: to.Index, FromOutput: len(from.Outputs), Partition: part}
					from.Outputs = append(from.Outputs, ch.ID)
					p.Channels = append(p.Channels, ch)
					p.codecs = append(p.codecs, e.codec)
					chans[link{e, from.Index, to.Index}] = ch.ID
				}
			}
		}
	}
	// Inputs: per receiver, its input edges in order, senders in subtask order.
	for _, n := range order {
		for s := 0; s < n.parallelism; s++ {
			to := p.Tasks[first[n.id]+s]
			for k, e := range n.inputs {
				for u := 0; u < e.from.parallelism; u++ {
					id, ok := chans[link{e, first[e.from.id] + u, to.Index}]
					if !ok {
						continue // a forward edge reaches one task only
					}
					p.Channels[id].ToInput, p.Channels[id].Edge = len(to.Inputs), k
					to.Inputs = append(to.Inputs, id)
					to.InputPorts = append(to.InputPorts, e.port)
				}
			}
		}
	}
	p.Fingerprint = fingerprint(g, order)
	p.topology = describeTopology(g, order)
	p.Params = g.Params()
	return p, nil
}

func resolvePartition(e *edge) Partition {
	if e.partition != 0 {
		return e.partition
	}
	if e.from.parallelism == e.to.parallelism {
		return PartitionForward
	}
	return PartitionRebalance
}

func targetsOf(p Partition, subtask, parallelism int) []int {
	if p == PartitionForward {
		return []int{subtask}
	}
	ts := make([]int, parallelism)
	for i := range ts {
		ts[i] = i
	}
	return ts
}

func fingerprint(g *Graph, order []*node) string {
	h := sha256.New()
	fmt.Fprintf(h, "maxp=%d\n", g.maxParallelism)
	for _, n := range order {
		fmt.Fprintf(h, "node %q %s p=%d keyed=%t\n", n.name, n.kind, n.parallelism, n.keyedState)
		if n.uid != n.name { // jobs without ids keep the fingerprints they had
			fmt.Fprintf(h, "id %q\n", n.uid)
		}
		for _, e := range n.outputs {
			fmt.Fprintf(h, "edge %q->%q %s\n", n.name, e.to.name, resolvePartition(e))
		}
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// NewInstance creates the runtime instance of task t.
func (p *Plan) NewInstance(t int, ic InstanceContext) (Instance, error) {
	task := p.Tasks[t]
	ic.Task = task
	if ic.Job == "" {
		ic.Job = p.Job
	}
	inst, err := task.node.factory(&ic)
	if err != nil {
		return nil, fmt.Errorf("topology: task %s: %w", task.ID, err)
	}
	return inst, nil
}

// TransactionalSinks returns the names of the job's two-phase-commit sinks
// (TwoPhaseCommitSink), in plan order: their output is committed when a
// checkpoint completes.
func (p *Plan) TransactionalSinks() []string {
	var names []string
	for _, t := range p.Tasks {
		if t.node.transactional && t.Subtask == 0 {
			names = append(names, t.Operator)
		}
	}
	return names
}

// Task returns the task with the given id, or nil.
func (p *Plan) Task(id string) *TaskPlan {
	for _, t := range p.Tasks {
		if t.ID == id {
			return t
		}
	}
	return nil
}

func (t *TaskPlan) maxParallelism() int { return t.maxP }

// ParamsDiff describes how the parameters theirs differ from p's, "" when
// they are the same: each parameter that differs, with both values, in
// name order.
func (p *Plan) ParamsDiff(theirs map[string]string, ours, other string) string {
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(p.Params)) {
		v, ok := theirs[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%q is %q on %s but unset on %s", k, p.Params[k], ours, other))
		case v != p.Params[k]:
			diffs = append(diffs, fmt.Sprintf("%q is %q on %s but %q on %s", k, p.Params[k], ours, v, other))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(theirs)) {
		if _, ok := p.Params[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%q is unset on %s but %q on %s", k, ours, theirs[k], other))
		}
	}
	return strings.Join(diffs, "; ")
}

// CountedOutputs says, by output index, on which of the task's outputs a
// batch counts toward the records the task emitted, so that each record
// counts once however many edges or tasks receive it: the outputs of the
// first route of each side output, and of a broadcast route only its first
// target.
func (t *TaskPlan) CountedOutputs() []bool {
	counted := make([]bool, len(t.Outputs))
	seen := map[int]bool{} // sides whose first route is found
	for _, r := range t.Routes {
		if seen[r.Side] {
			continue
		}
		seen[r.Side] = true
		n := r.Targets
		if r.Partition == PartitionBroadcast {
			n = min(n, 1)
		}
		for i := r.First; i < r.First+n; i++ {
			counted[i] = true
		}
	}
	return counted
}
