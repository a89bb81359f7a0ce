package topology

import "github.com/snapflow/snapflow/internal/dataflow"

// Stream is a typed stream of records of type T, the output of an operator.
type Stream[T any] = dataflow.Stream[T]

// KeyedStream is a stream partitioned by key K: every record of one key goes
// to the same task, which owns the key's state.
type KeyedStream[T any, K Key] = dataflow.KeyedStream[T, K]

// Key is the set of types a stream can be keyed by. Keys are hashed
// deterministically (the same in every process) and encoded in snapshots.
type Key = dataflow.Key

// Map applies fn to every record.
func Map[I, O any](s Stream[I], name string, fn func(I) O, opts ...Option) Stream[O] {
	return dataflow.Map(s, name, fn, opts...)
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], name string, keep func(T) bool, opts ...Option) Stream[T] {
	return dataflow.Filter(s, name, keep, opts...)
}

// FlatMap calls fn for every record; fn emits any number of records to out.
// An error fails the task, and the job recovers from its last checkpoint.
func FlatMap[I, O any](s Stream[I], name string, fn func(in I, out *Collector[O]) error, opts ...Option) Stream[O] {
	return dataflow.FlatMap(s, name, fn, opts...)
}

// Process is a keyed stateful operator: setup runs once per task (and again
// after every restore) to declare the task's keyed state with Value and
// MapOf, and returns the function that handles each record.
func Process[K Key, I, O any](s KeyedStream[I, K], name string, setup func(*KeyedSetup[K]) ProcessFunc[K, I, O], opts ...Option) Stream[O] {
	return dataflow.Process(s, name, setup, opts...)
}

// ProcessFunc handles one record of a keyed stream. Keyed state declared in
// setup is scoped to ctx.Key(). An error fails the task, and the job
// recovers from its last checkpoint.
type ProcessFunc[K Key, I, O any] = dataflow.ProcessFunc[K, I, O]

// Context is what a ProcessFunc knows of the record it handles: its key,
// and its task.
type Context[K Key] = dataflow.Context[K]

// Collector receives the records an operator emits.
type Collector[T any] = dataflow.Collector[T]

// KeyBy partitions s by key: records of one key go to one task. Keys are
// hashed to key groups (see MaxParallelism), which tasks own in ranges.
func KeyBy[T any, K Key](s Stream[T], key func(T) K) KeyedStream[T, K] {
	return dataflow.KeyBy(s, key)
}

// KeyByHash is KeyBy with the user's hash of the key: the key group is
// hash(key) modulo the max parallelism. Use it to place keys
// deterministically, as the parity example does; hash must return the same
// value in every process and build, since it decides which task owns a
// key's state.
func KeyByHash[T any, K Key](s Stream[T], key func(T) K, hash func(K) uint64) KeyedStream[T, K] {
	return dataflow.KeyByHash(s, key, hash)
}

// HashString is the default hash of string keys (FNV-1a, then the murmur3
// finaliser), for a KeyByHash that hashes part of a key as KeyBy would.
func HashString(s string) uint64 { return dataflow.HashString(s) }

// HashUint64 is the default hash of integer keys (the murmur3 finaliser).
func HashUint64(x uint64) uint64 { return dataflow.HashUint64(x) }

// Union merges streams of one type; their consumer has one input per
// producing task. Each stream keeps its own partitioning.
func Union[T any](first Stream[T], rest ...Stream[T]) Stream[T] {
	return dataflow.Union(first, rest...)
}

// Forward keeps records on the same subtask index: task i feeds task i of
// the consumer, which must have the producer's parallelism.
func Forward[T any](s Stream[T]) Stream[T] { return dataflow.Forward(s) }

// Rebalance deals records round-robin over the next operator's tasks.
func Rebalance[T any](s Stream[T]) Stream[T] { return dataflow.Rebalance(s) }

// Broadcast sends every record to every task of the next operator.
func Broadcast[T any](s Stream[T]) Stream[T] { return dataflow.Broadcast(s) }

// WithWireCodec returns s with c as its wire codec: in cluster mode, the
// records of s are encoded with c when they cross nodes. Records that stay
// on one node are passed as Go values and never encoded. Without it a
// stream uses DefaultCodec's encoding, and a cluster job whose stream type
// that cannot carry exactly is refused when it starts, naming the
// operators and the type.
func WithWireCodec[T any](s Stream[T], c Codec[T]) Stream[T] { return dataflow.WithWireCodec(s, c) }
