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

// holdsPointers reports whether values of type t hold pointers the garbage
// collector follows (strings, slices, maps, pointers, interfaces, channels,
// functions): a pooled batch of such values is cleared so that it keeps
// nothing alive.
func holdsPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	case reflect.Array:
		return t.Len() > 0 && holdsPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	}
	return true
}
