// Package topology is what a snapflow user writes: a typed graph of sources,
// operators and sinks, each with a parallelism, joined by forward, rebalance,
// broadcast or key-by edges.
//
// A Graph is built with the generic functions of this package:
//
//	g := topology.New("paritysum")
//	nums := topology.Sequence(g, "source", 1, 100)
//	byParity := topology.KeyBy(nums, func(v int64) int64 { return v % 2 })
//	sums := topology.Process(byParity, "sum", newSum, topology.Parallelism(2))
//	topology.Sink(sums, "sink", print)
//
// The element types are checked by the compiler: a Map from Stream[int64] to
// Stream[string] can only feed operators of strings, and keyed state can only
// be declared by Process, which needs a KeyedStream. Validate reports every
// structural problem at once (a cycle, an empty graph, duplicate or empty
// names, names a snapshot store cannot hold, bad parallelism or max
// parallelism, keyed state on a non-keyed input, a forward edge between
// different parallelisms, a stream nobody consumes), each naming its
// operator.
//
// NewPlan turns a valid graph into physical tasks ("sum#0", "sum#1") and
// channels, deterministically. Keys are hashed to key groups, bounded by the
// job's max parallelism; each keyed task owns a contiguous range of key groups,
// and keyed state is snapshotted per key group.
//
// Keyed state is declared in a Process operator's setup with Value and MapOf.
// Its values are stored by a Codec: DefaultCodec stores booleans, numbers
// (int, uint and uintptr in 8 bytes on every platform) and strings in
// binary, and other types as JSON, which is checked by reflection when the
// state is declared: a type JSON cannot store exactly (an unexported field,
// an interface, a channel, a map key it cannot restore, ...) is refused with
// an error naming the operator, the state and the field, unless a codec is
// passed (MapCodecs for MapOf). Every snapshot records a descriptor of each
// declared state (name, kind, key, value and map key types, codec ids), and
// a restore into a declaration of another kind, type or codec, or without a
// state the checkpoint holds, is refused with ErrIncompatibleState. The
// runtime calls Plan.DeclaredStates when a job starts, so that a bad
// declaration or a changed one is refused before any record flows.
// DecodeValueState and DecodeMapState read state out of a stored snapshot.
//
// Every operator has a stable id (OperatorID; by default its name), which
// checkpoints and savepoints map its state to. A source keeps its position
// either as one offset per task (FromSource: a Source) or as a list of
// splits (FromSplits: a SplitSource, such as one split per partition),
// which can move between tasks; the built-in sources (Generate, Sequence,
// FromSlice) use splits. PlanRestore decides how a stored checkpoint is
// restored into a plan: by operator id, with keyed state redistributed by
// key group and splits dealt out again when an operator's parallelism
// changed, and it refuses, naming the operator, what cannot be restored
// exactly (a changed max parallelism, state of a missing operator id, a
// changed state declaration, a Source's offsets over another parallelism).
//
// Records leave a task in batches per downstream channel. A batch is sent
// when it holds InstanceContext.BatchSize records or, for large records,
// InstanceContext.BatchBytes estimated bytes (the record that reaches the
// bound included), and a source reads about BatchBytes per read. With the
// runtime granting a number of credits (batches) per channel, the memory in
// flight per channel is bounded by credits x (BatchBytes + one record).
//
// The package imports no actor code: the runtime in package actors drives the
// type-erased Instance values that a Plan creates.
package topology
