package dataflow

import (
	"fmt"
	"reflect"
	"strings"
	"unsafe"
)

// Stream is a typed stream of records of type T produced by one or more
// operators (more than one after Union).
type Stream[T any] struct {
	g     *Graph
	parts []part
}

// part is one producing operator of a stream with the partitioning its
// consumer will use.
type part struct {
	node      *node
	partition Partition // 0: chosen at planning (forward if parallelisms match, else rebalance)
	explicit  bool
	keyGroup  any
	// wire is the Codec[T] given by WithWireCodec, nil for the default.
	wire any
	// side is 0 for the node's main output, k for its k-th side output.
	side int
}

// Graph returns the graph the stream belongs to.
func (s Stream[T]) Graph() *Graph { return s.g }

func (s Stream[T]) with(p Partition, keyGroup any) Stream[T] {
	parts := make([]part, len(s.parts))
	for i, pt := range s.parts {
		parts[i] = part{node: pt.node, partition: p, explicit: true, keyGroup: keyGroup, wire: pt.wire, side: pt.side}
	}
	return Stream[T]{g: s.g, parts: parts}
}

// Forward keeps records on the same subtask index: task i feeds task i of the
// consumer. The consumer must have the producer's parallelism.
func Forward[T any](s Stream[T]) Stream[T] { return s.with(PartitionForward, nil) }

// Rebalance spreads records round robin over the consumer's tasks.
func Rebalance[T any](s Stream[T]) Stream[T] { return s.with(PartitionRebalance, nil) }

// Broadcast sends every record to every task of the consumer.
func Broadcast[T any](s Stream[T]) Stream[T] { return s.with(PartitionBroadcast, nil) }

// Union merges streams of one type; their consumer has one input per
// producing task. Each stream keeps its own partitioning.
func Union[T any](first Stream[T], rest ...Stream[T]) Stream[T] {
	out := Stream[T]{g: first.g, parts: append([]part(nil), first.parts...)}
	for _, s := range rest {
		if s.g != first.g {
			first.g.problem("%s: union with the output of %s, which belongs to another graph",
				producers(first.parts), producers(s.parts))
			continue
		}
		out.parts = append(out.parts, s.parts...)
	}
	return out
}

// KeyedStream is a stream partitioned by a key of type K: every record of one
// key goes to the same task, and that task's keyed state is scoped to the key.
type KeyedStream[T any, K Key] struct {
	Stream[T]
	key   func(T) K
	codec keyCodec[K]
}

// KeyBy partitions s by key. Keys are hashed to key groups (see
// MaxParallelism); each downstream task owns a contiguous range of them.
func KeyBy[T any, K Key](s Stream[T], key func(T) K) KeyedStream[T, K] {
	c := newKeyCodec[K]()
	maxP := keyGroups(s.g)
	kg := keyGroupFunc(key, c.hash, maxP)
	if wordKey[K]() {
		kg = wordKeyGroup(key, maxP)
	}
	return keyBy(s, key, c.hash, c, kg)
}

// KeyByHash is KeyBy with the user's hash of the key instead of the default
// one; the key group is hash(key) modulo the max parallelism. Use it to place
// keys deterministically, as the parity example does.
func KeyByHash[T any, K Key](s Stream[T], key func(T) K, hash func(K) uint64) KeyedStream[T, K] {
	c := newKeyCodec[K]()
	c.custom = true // state writes find key groups through hash, not the frozen key hash
	return keyBy(s, key, hash, c, keyGroupFunc(key, hash, keyGroups(s.g)))
}

// keyBy partitions s with kg, the key group of a record: hash(key(v))
// modulo the max parallelism.
func keyBy[T any, K Key](s Stream[T], key func(T) K, hash func(K) uint64, c keyCodec[K], kg keyGrouper[T]) KeyedStream[T, K] {
	if key == nil {
		s.g.problem("%s: KeyBy of its output has a nil key function", producers(s.parts))
	}
	if hash == nil {
		s.g.problem("%s: KeyByHash of its output has a nil hash function", producers(s.parts))
	}
	c.hash = hash
	return KeyedStream[T, K]{Stream: s.with(PartitionHash, kg), key: key, codec: c}
}

// keyGroups is the number of key groups of g's keyed edges, at least 1.
func keyGroups(g *Graph) uint64 { return uint64(max(1, g.maxParallelism)) }

// keyGrouper gives the key groups of a hash edge's records: hash(key(v))
// modulo the max parallelism, a mask when it is a power of two (the
// default), so that routing a record costs no division. of takes one
// record; all takes a batch, in one call, so that a source routing what it
// read calls nothing per record but the key function.
type keyGrouper[T any] struct {
	of  func(T) int
	all func(vs []T, dst []uint32)
}

// keyGroupFunc is the keyGrouper of key and hash.
func keyGroupFunc[T any, K Key](key func(T) K, hash func(K) uint64, maxP uint64) keyGrouper[T] {
	if maxP&(maxP-1) == 0 {
		mask := maxP - 1
		return keyGrouper[T]{
			of: func(v T) int { return int(hash(key(v)) & mask) },
			all: func(vs []T, dst []uint32) {
				dst = dst[:len(vs)]
				for i := range vs {
					dst[i] = uint32(hash(key(vs[i])) & mask)
				}
			},
		}
	}
	return keyGrouper[T]{
		of: func(v T) int { return int(hash(key(v)) % maxP) },
		all: func(vs []T, dst []uint32) {
			dst = dst[:len(vs)]
			for i := range vs {
				dst[i] = uint32(hash(key(vs[i])) % maxP)
			}
		},
	}
}

// wordKey reports whether K is an integer of 8 bytes, whose default hash is
// HashUint64 of its bits (newKeyCodec).
func wordKey[K Key]() bool {
	t := reflect.TypeFor[K]()
	return t.Kind() != reflect.String && t.Size() == 8
}

// wordKeyGroup is keyGroupFunc with the default hash of an 8-byte integer
// key inlined.
func wordKeyGroup[T any, K Key](key func(T) K, maxP uint64) keyGrouper[T] {
	if maxP&(maxP-1) == 0 {
		mask := maxP - 1
		return keyGrouper[T]{
			of: func(v T) int {
				k := key(v)
				return int(HashUint64(*(*uint64)(unsafe.Pointer(&k))) & mask)
			},
			all: func(vs []T, dst []uint32) {
				dst = dst[:len(vs)]
				for i := range vs {
					k := key(vs[i])
					dst[i] = uint32(HashUint64(*(*uint64)(unsafe.Pointer(&k))) & mask)
				}
			},
		}
	}
	return keyGrouper[T]{
		of: func(v T) int {
			k := key(v)
			return int(HashUint64(*(*uint64)(unsafe.Pointer(&k))) % maxP)
		},
		all: func(vs []T, dst []uint32) {
			dst = dst[:len(vs)]
			for i := range vs {
				k := key(vs[i])
				dst[i] = uint32(HashUint64(*(*uint64)(unsafe.Pointer(&k))) % maxP)
			}
		},
	}
}

// producers names the operators producing a stream, for error messages.
func producers(parts []part) string {
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = fmt.Sprintf("%q", p.node.name)
	}
	if len(names) == 1 {
		return "operator " + names[0]
	}
	return "operators " + strings.Join(names, ", ")
}
