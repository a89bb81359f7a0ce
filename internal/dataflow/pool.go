package dataflow

import (
	"reflect"
	"sync"
)

// batchPools recycles batch slices by element type: a receiver returns each
// batch it has processed, and a Collector of the same type fills it again.
// The pools hold the batches as the interface values the runtime carried
// them in, so recycling allocates nothing.
var batchPools sync.Map // reflect.Type -> *sync.Pool

func poolOf[T any]() *sync.Pool {
	t := reflect.TypeFor[T]()
	if p, ok := batchPools.Load(t); ok {
		return p.(*sync.Pool)
	}
	p, _ := batchPools.LoadOrStore(t, &sync.Pool{})
	return p.(*sync.Pool)
}

// takeBatch returns an empty batch with capacity for size records.
func takeBatch[T any](pool *sync.Pool, size int) []T {
	if v := pool.Get(); v != nil {
		if b := v.([]T); cap(b) >= size {
			return b[:0]
		}
	}
	return make([]T, 0, size)
}
