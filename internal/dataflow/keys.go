package dataflow

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"unsafe"
)

// Key is the set of types a stream can be keyed by. Keys are hashed
// deterministically (the same in every process) and encoded in snapshots.
type Key interface {
	~string | ~int | ~int8 | ~int16 | ~int32 | ~int64 |
		~uint | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// keyCodec hashes and encodes keys of one Key type. The functions are chosen
// once from the key's kind, so nothing on the per-record path switches on types.
type keyCodec[K Key] struct {
	hash func(K) uint64
	// custom says that hash is the user's (KeyByHash), not the frozen
	// key hash: key groups must be found through it.
	custom bool
	append func([]byte, K) []byte
	decode func([]byte) (K, error)
	// toU widens an integer key to 64 bits (nil for strings).
	toU func(K) uint64
}

func newKeyCodec[K Key]() keyCodec[K] {
	var zero K
	if reflect.TypeOf(zero).Kind() == reflect.String {
		return keyCodec[K]{
			hash: func(k K) uint64 { return HashString(*(*string)(unsafe.Pointer(&k))) },
			append: func(b []byte, k K) []byte {
				return append(b, *(*string)(unsafe.Pointer(&k))...)
			},
			decode: func(b []byte) (K, error) {
				var k K
				*(*string)(unsafe.Pointer(&k)) = string(b)
				return k, nil
			},
		}
	}
	size := int(unsafe.Sizeof(zero))
	signed := false
	switch reflect.TypeOf(zero).Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		signed = true
	}
	toU := func(k K) uint64 {
		p := unsafe.Pointer(&k)
		switch size {
		case 1:
			if signed {
				return uint64(int64(*(*int8)(p)))
			}
			return uint64(*(*uint8)(p))
		case 2:
			if signed {
				return uint64(int64(*(*int16)(p)))
			}
			return uint64(*(*uint16)(p))
		case 4:
			if signed {
				return uint64(int64(*(*int32)(p)))
			}
			return uint64(*(*uint32)(p))
		default:
			return *(*uint64)(p)
		}
	}
	fromU := func(u uint64) K {
		var k K
		p := unsafe.Pointer(&k)
		switch size {
		case 1:
			*(*uint8)(p) = uint8(u)
		case 2:
			*(*uint16)(p) = uint16(u)
		case 4:
			*(*uint32)(p) = uint32(u)
		default:
			*(*uint64)(p) = u
		}
		return k
	}
	return keyCodec[K]{
		toU:    toU,
		hash:   func(k K) uint64 { return HashUint64(toU(k)) },
		append: func(b []byte, k K) []byte { return binary.BigEndian.AppendUint64(b, toU(k)) },
		decode: func(b []byte) (K, error) {
			if len(b) != 8 {
				var zero K
				return zero, fmt.Errorf("topology: integer key of %d bytes, want 8", len(b))
			}
			return fromU(binary.BigEndian.Uint64(b)), nil
		},
	}
}

// HashUint64 is the default hash of integer keys (the murmur3 finaliser).
func HashUint64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// HashString is the default hash of string keys (FNV-1a, then the murmur3
// finaliser).
func HashString(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return HashUint64(h)
}

// KeyGroupRange returns the key groups [start, end) that task subtask of an
// operator with the given parallelism owns.
func KeyGroupRange(maxParallelism, parallelism, subtask int) (start, end int) {
	start = (subtask*maxParallelism + parallelism - 1) / parallelism
	end = ((subtask+1)*maxParallelism + parallelism - 1) / parallelism
	return start, end
}

// TaskForKeyGroup returns the subtask that owns keyGroup.
func TaskForKeyGroup(maxParallelism, parallelism, keyGroup int) int {
	return keyGroup * parallelism / maxParallelism
}
