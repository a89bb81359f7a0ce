package window

import (
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/internal/windows"
	"github.com/snapflow/snapflow/topology"
)

// Result is a fired window's aggregate for one key.
type Result[K topology.Key, V any] struct {
	Key    K
	Window Window
	Value  V
}

// Aggregator is an incremental aggregation with an accumulator of type A:
// each record is folded in as it arrives, and only the accumulator is kept.
type Aggregator[T, A, O any] struct {
	// Init returns an empty accumulator (nil: A's zero value).
	Init func() A
	// Add folds a record into acc and returns it.
	Add func(acc A, v T) A
	// Merge folds b into a and returns it. It may change a, never b. It
	// combines a sliding window's panes and merging sessions.
	Merge func(a, b A) A
	// Result is the window's output (nil: O must be A, returned as is).
	Result func(acc A) O
	// Codec stores accumulators in checkpoints (nil: DefaultCodec[A],
	// refused for a type it cannot store exactly, as topology.Value does).
	Codec topology.Codec[A]
}

// Aggregate adds an operator that aggregates each key's windows
// incrementally and emits one Result per key and fired window, with the
// window's last instant as its timestamp.
func Aggregate[T any, K topology.Key, A, O any](w Windowed[T, K], name string, ag Aggregator[T, A, O], opts ...topology.Option) topology.Stream[Result[K, O]] {
	g := w.in.Graph()
	if ag.Add == nil || ag.Merge == nil {
		g.Refuse(name, fmt.Errorf("window.Aggregator needs Add and Merge"))
	}
	result := ag.Result
	if result == nil {
		if _, same := any(*new(A)).(O); !same && !isSameType[A, O]() {
			g.Refuse(name, fmt.Errorf("window.Aggregator has no Result function, and its output type differs from its accumulator's"))
		}
		result = func(a A) O { o, _ := any(a).(O); return o }
	}
	codec := ag.Codec
	if codec == nil {
		g.Refuse(name, topology.CheckDefaultCodec[A]())
		codec = topology.DefaultCodec[A]()
	}
	init := ag.Init
	if init == nil {
		init = func() A { var a A; return a }
	}
	add, merge := ag.Add, ag.Merge
	return build(w, name, agg[T, A]{
		first: func(v T) A { return add(init(), v) },
		add:   add,
		merge: merge,
		clone: func(a A) A { return merge(init(), a) },
		codec: codec,
	}, func(key K, win windows.Window, acc A, out *topology.Collector[Result[K, O]]) error {
		out.Emit(Result[K, O]{Key: key, Window: windowOf(win), Value: result(acc)})
		return nil
	}, opts)
}

func isSameType[A, O any]() bool {
	_, ok := any((*A)(nil)).(*O)
	return ok
}

// Reduce adds an operator that combines each key's records in a window
// with reduce, which must not change its arguments' referenced memory.
// codec stores the running value (default: DefaultCodec[T]).
func Reduce[T any, K topology.Key](w Windowed[T, K], name string, reduce func(a, b T) T, codec topology.Codec[T], opts ...topology.Option) topology.Stream[Result[K, T]] {
	g := w.in.Graph()
	if reduce == nil {
		g.Refuse(name, fmt.Errorf("window.Reduce needs a reduce function"))
	}
	if codec == nil {
		g.Refuse(name, topology.CheckDefaultCodec[T]())
		codec = topology.DefaultCodec[T]()
	}
	return build(w, name, agg[T, T]{
		first: func(v T) T { return v },
		add:   reduce,
		merge: reduce,
		clone: func(v T) T { return v },
		codec: codec,
	}, func(key K, win windows.Window, acc T, out *topology.Collector[Result[K, T]]) error {
		out.Emit(Result[K, T]{Key: key, Window: windowOf(win), Value: acc})
		return nil
	}, opts)
}

// Count adds an operator that counts each key's records per window.
func Count[T any, K topology.Key](w Windowed[T, K], name string, opts ...topology.Option) topology.Stream[Result[K, int64]] {
	return build(w, name, agg[T, int64]{
		first: func(T) int64 { return 1 },
		add:   func(n int64, _ T) int64 { return n + 1 },
		merge: func(a, b int64) int64 { return a + b },
		clone: func(n int64) int64 { return n },
		codec: topology.DefaultCodec[int64](),
	}, func(key K, win windows.Window, n int64, out *topology.Collector[Result[K, int64]]) error {
		out.Emit(Result[K, int64]{Key: key, Window: windowOf(win), Value: n})
		return nil
	}, opts)
}

// Func is a full-window function: it sees all the records of a key's
// window, in arrival order, and the window's bounds. items is valid only
// during the call.
type Func[K topology.Key, T, O any] func(key K, w Window, items []T, out *topology.Collector[O]) error

// Process adds an operator that keeps each key's records per window and
// calls fn with all of them when the window fires. It keeps every record
// until then: prefer Aggregate when an accumulator will do. codec stores
// records in checkpoints (default: DefaultCodec[T]).
func Process[T any, K topology.Key, O any](w Windowed[T, K], name string, fn Func[K, T, O], codec topology.Codec[T], opts ...topology.Option) topology.Stream[O] {
	g := w.in.Graph()
	if fn == nil {
		g.Refuse(name, fmt.Errorf("window.Process needs a window function"))
	}
	if codec == nil {
		g.Refuse(name, topology.CheckDefaultCodec[T]())
		codec = topology.DefaultCodec[T]()
	}
	return build(w, name, agg[T, []T]{
		first: func(v T) []T { return []T{v} },
		add:   func(vs []T, v T) []T { return append(vs, v) },
		merge: func(a, b []T) []T { return append(a, b...) },
		clone: slices.Clone[[]T],
		codec: sliceCodec[T]{elem: codec},
	}, func(key K, win windows.Window, vs []T, out *topology.Collector[O]) error {
		return fn(key, windowOf(win), vs, out)
	}, opts)
}
