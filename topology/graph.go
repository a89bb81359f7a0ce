package topology

import (
	"context"

	"github.com/snapflow/snapflow/internal/dataflow"
)

// Graph is a job's logical graph: its name, its operators and the edges
// between them. Build it with New and the functions of this package, and
// run it with package actors. A Graph is not safe for concurrent use while
// it is being built.
type Graph = dataflow.Graph

// New returns an empty graph for the job name. The name identifies the
// job's checkpoints in a store, so it must be a valid store path segment
// (see MaxNameLength).
func New(name string, opts ...GraphOption) *Graph { return dataflow.New(name, opts...) }

// GraphOption configures a Graph in New.
type GraphOption = dataflow.GraphOption

// MaxParallelism sets the job's max parallelism: the number of key groups
// keys are hashed to, and so the highest parallelism a keyed operator can
// ever be rescaled to. It cannot change once the job has state (default
// DefaultMaxParallelism).
func MaxParallelism(n int) GraphOption { return dataflow.MaxParallelism(n) }

// Params records the job's parameters (its flags, say): every process of a
// cluster must build the graph with the same ones, and a worker or a
// restore whose parameters differ is refused, naming each difference.
func Params(params map[string]string) GraphOption { return dataflow.Params(params) }

// Option configures one operator: its parallelism, its stable id, or a
// check run before the job starts.
type Option = dataflow.Option

// Parallelism sets the number of parallel tasks of an operator (default 1).
func Parallelism(n int) Option { return dataflow.Parallelism(n) }

// OperatorID sets an operator's stable id, which checkpoints and
// savepoints map its state to (default: its name). Give the old id to an
// operator that is renamed, so that it keeps its state.
func OperatorID(id string) Option { return dataflow.OperatorID(id) }

// Check adds a check that the runtime runs once before the job starts (a
// sink's directory exists, a topic is reachable, ...); an error refuses the
// job with ErrPreflight, naming the operator.
func Check(check func(ctx context.Context) error) Option { return dataflow.Check(check) }

// Limits on a graph's names and parallelism.
const (
	// DefaultMaxParallelism is a graph's max parallelism unless
	// MaxParallelism sets another.
	DefaultMaxParallelism = dataflow.DefaultMaxParallelism
	// MaxParallelismLimit is the highest max parallelism.
	MaxParallelismLimit = dataflow.MaxParallelismLimit
	// MaxNameLength is the longest job or operator name, in bytes.
	MaxNameLength = dataflow.MaxNameLength
)

// ValidationError lists every structural problem of a graph, each naming
// its operator. It wraps ErrInvalid.
//
// Its fields:
//   - Job string: the job's name.
//   - Problems []string: every problem, one per operator or edge.
type ValidationError = dataflow.ValidationError
