package monitor

// ring keeps the newest cap values pushed.
type ring[T any] struct {
	buf  []T
	next int // where the next value goes
	n    int
}

func newRing[T any](capacity int) ring[T] { return ring[T]{buf: make([]T, capacity)} }

// push adds v as the newest value, forgetting the oldest when full.
func (r *ring[T]) push(v T) *T {
	r.buf[r.next] = v
	p := &r.buf[r.next]
	r.next = (r.next + 1) % len(r.buf)
	if r.n < len(r.buf) {
		r.n++
	}
	return p
}

func (r *ring[T]) len() int { return r.n }

// at returns the i-th newest value (0: the newest), i < len().
func (r *ring[T]) at(i int) *T {
	return &r.buf[(r.next-1-i+2*len(r.buf))%len(r.buf)]
}
