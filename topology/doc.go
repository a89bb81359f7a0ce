// Package topology is what a snapflow user writes: a typed graph of sources,
// operators and sinks, each with a parallelism, joined by forward, rebalance,
// broadcast or key-by edges. Package actors runs it.
//
//	g := topology.New("paritysum")
//	nums := topology.Sequence(g, "source", 1, 100)
//	byParity := topology.KeyBy(nums, func(v int64) int64 { return v % 2 })
//	sums := topology.Process(byParity, "sum", newSum, topology.Parallelism(2))
//	topology.Sink(sums, "sink", print)
//
// The element types are checked by the compiler: a Map from Stream[int64] to
// Stream[string] can only feed operators of strings, and keyed state can
// only be declared by Process, which needs a KeyedStream. Graph.Validate
// reports every structural problem at once (a cycle, duplicate or empty
// names, bad parallelism, keyed state on a non-keyed input, a forward edge
// between different parallelisms, a stream nobody consumes), each naming its
// operator; the runtime validates before it starts.
//
// Keys are hashed to key groups, bounded by the job's max parallelism
// (MaxParallelism); each keyed task owns a contiguous range of them, and
// keyed state, declared in a Process operator's setup with Value and MapOf,
// is snapshotted per key group, so that a job can be restored at another
// parallelism. State values are stored by a Codec (DefaultCodec unless one
// is given); a type the default codec cannot store exactly is refused when
// it is declared, naming the operator, the state and the field, and a
// restore into a changed declaration is refused with ErrIncompatibleState.
// DecodeValueState and DecodeMapState read state out of a stored snapshot.
//
// Every operator has a stable id (OperatorID; by default its name), which
// checkpoints and savepoints map its state to. A source keeps its position
// either as one offset per task (FromSource: a Source) or as a list of
// splits that can move between tasks (FromSplits: a SplitSource). Sinks
// are at-least-once (Sink) or exactly-once through the checkpoints
// (TwoPhaseCommitSink; see packages filesink and kafka).
//
// The planner, the instances the runtime drives and the restore planning
// are internal to the module. The guides: docs/concepts.md, docs/state.md
// and docs/sources-and-sinks.md.
package topology
