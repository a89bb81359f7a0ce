package dataflow

import (
	"context"
	"fmt"
	"maps"

	"github.com/snapflow/snapflow/messages"
)

// DefaultMaxParallelism is the number of key groups when none is set.
const DefaultMaxParallelism = 128

// Kind is the role of an operator in the graph.
type Kind uint8

const (
	// KindSource reads records from outside the job.
	KindSource Kind = iota + 1
	// KindOperator transforms records.
	KindOperator
	// KindSink writes records out of the job.
	KindSink
)

// String returns the Kind's lowercase name, for logs.
func (k Kind) String() string {
	switch k {
	case KindSource:
		return "source"
	case KindOperator:
		return "operator"
	case KindSink:
		return "sink"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Partition says how an edge spreads records over the downstream tasks.
type Partition uint8

const (
	// PartitionForward sends the records of task i to task i downstream.
	// Both sides must have the same parallelism.
	PartitionForward Partition = iota + 1
	// PartitionRebalance sends records round robin to every downstream task.
	PartitionRebalance
	// PartitionBroadcast sends every record to every downstream task.
	PartitionBroadcast
	// PartitionHash sends a record to the task owning its key group.
	PartitionHash
)

// String returns the Partition's lowercase name, for logs.
func (p Partition) String() string {
	switch p {
	case PartitionForward:
		return "forward"
	case PartitionRebalance:
		return "rebalance"
	case PartitionBroadcast:
		return "broadcast"
	case PartitionHash:
		return "hash"
	}
	return fmt.Sprintf("partition(%d)", uint8(p))
}

// Graph is a job's logical dataflow. Build it with New and the generic
// functions of this package; it is not safe for concurrent mutation.
type Graph struct {
	name           string
	params         map[string]string
	maxParallelism int
	nodes          []*node
	problems       []string // construction problems, reported by Validate
}

// GraphOption configures a Graph.
type GraphOption func(*Graph)

// MaxParallelism sets the number of key groups, the upper bound of any
// operator's parallelism (default DefaultMaxParallelism).
func MaxParallelism(n int) GraphOption { return func(g *Graph) { g.maxParallelism = n } }

// Params records the job's parameters: the values its constructor read
// (flags, configuration) that shape what the job computes, such as topic
// names, window sizes or record counts. In cluster mode every node builds
// the job from its own constructor, and the coordinator refuses a worker
// whose parameters differ from its own, naming them; the values cross
// between the cluster's authenticated nodes and appear in that refusal, so
// keep credentials out of them. Repeated, the options merge.
func Params(params map[string]string) GraphOption {
	return func(g *Graph) {
		if g.params == nil {
			g.params = map[string]string{}
		}
		for k, v := range params {
			g.params[k] = v
		}
	}
}

// New returns an empty graph for the job called name. The name identifies the
// job's checkpoints in a snapshot store.
func New(name string, opts ...GraphOption) *Graph {
	g := &Graph{name: name, maxParallelism: DefaultMaxParallelism}
	for _, o := range opts {
		o(g)
	}
	return g
}

// Name is the job name.
func (g *Graph) Name() string { return g.name }

// MaxParallelism is the number of key groups.
func (g *Graph) MaxParallelism() int { return g.maxParallelism }

// Params returns a copy of the job's parameters (see Params).
func (g *Graph) Params() map[string]string { return maps.Clone(g.params) }

// node is one logical operator.
type node struct {
	id          int
	name        string
	uid         string // the stable operator id (OperatorID; default: name)
	kind        Kind
	parallelism int
	inputs      []*edge
	outputs     []*edge
	keyedState  bool // declares keyed state: every input must be a Hash edge
	factory     factory
	// declare runs a keyed operator's setup for a task, without creating an
	// instance, and returns the states it declares (see Plan.DeclaredStates).
	declare func(*TaskPlan) ([]*messages.StateDescriptor, error)
	// splits is set for a source whose position is a list of splits
	// (FromSplits), which a restore at another parallelism redistributes.
	splits *splitSpec
	// transactional is set for a two-phase-commit sink, whose state (its
	// transactions) is not redistributed.
	transactional bool
	// checks run when the job starts (see Check and Plan.Preflight).
	checks []func(context.Context) error
	// watermarks is the WatermarkStrategy[T] of a source (WithWatermarks).
	watermarks any
	// sides are the side outputs consumed downstream, side k at k-1.
	sides []*sideTag
}

// edge joins two operators.
type edge struct {
	from, to  *node
	partition Partition
	explicit  bool // the user asked for this partitioning
	// keyGroup is a keyGrouper[T] for Hash edges, T being the edge's element
	// type; it is type-asserted once when an emitter is built.
	keyGroup any
	// codec turns the edge's batches into RecordBatches and back, for
	// channels that cross nodes (see Plan.ChannelCodec).
	codec edgeCodec
	// side is the output of from the edge leaves: 0 for the main output,
	// k for its k-th side output (see SideOutputOf).
	side int
	// port is the input of to the edge enters: 0, or 1 for the second
	// input of a two-input operator (see CoProcess).
	port int
}

// factory creates the runtime instance of one task of a node.
type factory func(ic *InstanceContext) (Instance, error)

// Option configures an operator.
type Option func(*nodeOptions)

type nodeOptions struct {
	parallelism int
	uid         string
	uidSet      bool
	checks      []func(context.Context) error
	watermarks  any
}

// Parallelism sets how many tasks run the operator (default 1).
func Parallelism(n int) Option { return func(o *nodeOptions) { o.parallelism = n } }

// Check adds a check that the runtime runs when the job starts, before any
// state is read or record flows: an error refuses the job, naming the
// operator. Connectors use it to refuse an unreachable service, a missing
// topic or a denied permission at Start rather than fail their tasks over
// and over. Checks run concurrently, so they must be safe to; each must
// return promptly when ctx ends.
func Check(check func(ctx context.Context) error) Option {
	return func(o *nodeOptions) { o.checks = append(o.checks, check) }
}

// OperatorID gives the operator a stable id, which savepoints and
// checkpoints map its state to (default: the operator's name). Keep an
// operator's id when renaming it, and never give its id to another
// operator: a restored job finds each operator's state by id, so an id that
// moves would hand one operator's state to another. Ids follow the rules
// of names (see MaxNameLength), and Validate refuses an id that two
// operators share.
func OperatorID(id string) Option { return func(o *nodeOptions) { o.uid, o.uidSet = id, true } }

func (g *Graph) addNode(name string, kind Kind, opts []Option, f factory) *node {
	o := nodeOptions{parallelism: 1}
	for _, fn := range opts {
		fn(&o)
	}
	uid := name
	if o.uidSet {
		uid = o.uid
	}
	n := &node{id: len(g.nodes), name: name, uid: uid, kind: kind, parallelism: o.parallelism, factory: f, checks: o.checks, watermarks: o.watermarks}
	if o.watermarks != nil && kind != KindSource {
		g.problem("operator %q: WithWatermarks applies to sources only (a %s here)", name, kind)
	}
	g.nodes = append(g.nodes, n)
	return n
}

// Refuse records a problem of an operator that a library built on this
// package found while adding it (a window size that is not positive, say):
// Validate, and so Start, refuse the graph with it, naming the operator.
// A nil err records nothing.
func (g *Graph) Refuse(operator string, err error) {
	if err != nil {
		g.problem("operator %q: %v", operator, err)
	}
}

func (g *Graph) problem(format string, args ...any) {
	g.problems = append(g.problems, fmt.Sprintf(format, args...))
}

// connect adds the edges of stream s into n.
func connect[T any](n *node, s Stream[T]) {
	for _, p := range s.parts {
		e := &edge{from: p.node, to: n, partition: p.partition, explicit: p.explicit, keyGroup: p.keyGroup, side: p.side}
		c, _ := p.wire.(Codec[T]) // set by WithWireCodec for this T; nil for the default
		e.codec = newBatchCodec(p.node.name, n.name, c)
		p.node.outputs = append(p.node.outputs, e)
		n.inputs = append(n.inputs, e)
	}
}
