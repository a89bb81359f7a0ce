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
