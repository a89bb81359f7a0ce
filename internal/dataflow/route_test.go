package dataflow

import (
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// TestTargetScale checks that the multiplication a hash route uses instead
// of a division gives every key group's owner, for every max parallelism
// up to 300 with every parallelism, and for large ones up to the limit.
func TestTargetScale(t *testing.T) {
	check := func(maxP, targets int) {
		s := targetScale(targets, maxP)
		for kg := range maxP {
			if got, want := int(uint64(kg)*s>>32), TaskForKeyGroup(maxP, targets, kg); got != want {
				t.Fatalf("max parallelism %d, %d targets: key group %d goes to %d, want %d", maxP, targets, kg, got, want)
			}
		}
	}
	for maxP := 1; maxP <= 300; maxP++ {
		for targets := 1; targets <= maxP; targets++ {
			check(maxP, targets)
		}
	}
	for _, maxP := range []int{1000, 4096, 12345, MaxParallelismLimit - 1, MaxParallelismLimit} {
		for _, targets := range []int{1, 2, 3, 7, 100, 999, maxP - 1, maxP} {
			check(maxP, targets)
		}
	}
}

// keyByGroupOf returns the key group functions of a KeyBy of a stream of K.
func keyByGroupOf[K Key](t *testing.T, maxP int, hash func(K) uint64) keyGrouper[K] {
	t.Helper()
	g := New("job", MaxParallelism(maxP))
	s := FromSlice(g, "src", []K{})
	var ks KeyedStream[K, K]
	if hash == nil {
		ks = KeyBy(s, func(k K) K { return k })
	} else {
		ks = KeyByHash(s, func(k K) K { return k }, hash)
	}
	kg, ok := ks.parts[0].keyGroup.(keyGrouper[K])
	if !ok {
		t.Fatalf("key group function of type %T", ks.parts[0].keyGroup)
	}
	return kg
}

// checkKeyByGroups checks that the key group of each key is its codec's hash
// modulo maxP, the frozen arithmetic the state's key groups use too.
func checkKeyByGroups[K Key](t *testing.T, keys ...K) {
	t.Helper()
	c := newKeyCodec[K]()
	for _, maxP := range []int{1, 2, 100, 128, 1000, MaxParallelismLimit} {
		kg := keyByGroupOf[K](t, maxP, nil)
		all := make([]uint32, len(keys)+1) // one more: all fills only len(keys)
		all[len(keys)] = math.MaxUint32
		kg.all(keys, all)
		for i, k := range keys {
			want := int(c.hash(k) % uint64(maxP))
			if got := kg.of(k); got != want {
				t.Errorf("%T key %v, max parallelism %d: key group %d, want %d", k, k, maxP, got, want)
			}
			if got := int(all[i]); got != want {
				t.Errorf("%T key %v, max parallelism %d: key group of a batch %d, want %d", k, k, maxP, got, want)
			}
		}
		if all[len(keys)] != math.MaxUint32 {
			t.Errorf("max parallelism %d: the key groups of a batch of %d went past it", maxP, len(keys))
		}
	}
}

type wideID int64

// TestKeyByKeyGroups checks the key group functions KeyBy builds (with the
// hash of 8-byte integers inlined, and a mask for powers of two) against
// the key codec's hash, for keys of every width.
func TestKeyByKeyGroups(t *testing.T) {
	checkKeyByGroups(t, 0, 1, -1, 42, -42, math.MinInt, math.MaxInt)
	checkKeyByGroups[int64](t, 0, 1, -1, 1<<40, math.MinInt64, math.MaxInt64)
	checkKeyByGroups[uint64](t, 0, 1, 1<<63, math.MaxUint64)
	checkKeyByGroups[uint](t, 0, 7, math.MaxUint)
	checkKeyByGroups[wideID](t, -3, 0, 3)
	checkKeyByGroups[int32](t, -5, 0, 5, math.MinInt32)
	checkKeyByGroups[uint8](t, 0, 200, 255)
	checkKeyByGroups(t, "", "a", "user-17", strings.Repeat("k", 100))
	for i := range 1000 {
		checkKeyByGroups(t, i*7919-3_000_000)
	}
}

// TestKeyByHashKeyGroups checks that the user's hash decides the key group
// at any max parallelism, a power of two or not.
func TestKeyByHashKeyGroups(t *testing.T) {
	hash := func(k int64) uint64 { return uint64(k) * 3 }
	for _, maxP := range []int{1, 64, 100} {
		kg := keyByGroupOf(t, maxP, hash)
		keys := make([]int64, 500)
		for i := range keys {
			keys[i] = int64(i)
		}
		all := make([]uint32, len(keys))
		kg.all(keys, all)
		for _, k := range keys {
			want := int(uint64(k) * 3 % uint64(maxP))
			if got := kg.of(k); got != want {
				t.Errorf("max parallelism %d: key %d in key group %d, want %d", maxP, k, got, want)
			}
			if got := int(all[k]); got != want {
				t.Errorf("max parallelism %d: key %d in key group %d in a batch, want %d", maxP, k, got, want)
			}
		}
	}
}

// TestCollectorHashOwners checks that a hash route delivers every record to
// the task owning its key group, whatever the max parallelism and the
// number of tasks.
func TestCollectorHashOwners(t *testing.T) {
	for _, tt := range []struct{ maxP, par int }{{128, 2}, {100, 3}, {7, 7}, {1000, 6}, {1, 1}} {
		g := New("job", MaxParallelism(tt.maxP))
		Sink(KeyBy(Sequence(g, "src", 1, 2), id64).Stream, "sink", discard[int64], Parallelism(tt.par))
		p, task, c, f := collectorFor[int64](t, g, "src#0", 16)
		for _, v := range seq(2000) {
			c.Emit(v)
		}
		c.flush()
		n := 0
		for id, vs := range recordsByTask[int64](t, p, task, f) {
			to := mustTask(t, p, id)
			for _, v := range vs {
				n++
				if kg := int(HashUint64(uint64(v)) % uint64(tt.maxP)); kg < to.KeyGroupStart || kg >= to.KeyGroupEnd {
					t.Fatalf("max parallelism %d, %d tasks: record %d (key group %d) went to %s, which owns [%d,%d)",
						tt.maxP, tt.par, v, kg, id, to.KeyGroupStart, to.KeyGroupEnd)
				}
			}
		}
		if n != 2000 {
			t.Errorf("max parallelism %d, %d tasks: delivered %d records, want 2000", tt.maxP, tt.par, n)
		}
	}
}

// TestCollectorSizedRoutes checks records sized one by one on a task with
// two outputs, a rebalance and a hash route: each target's batch counts its
// own bytes, and the rebalance moves on after each batch.
func TestCollectorSizedRoutes(t *testing.T) {
	const kib = 1 << 10
	g := New("job")
	s := Generate(g, "src", 1, func(int64) withString { return withString{} })
	Sink(Rebalance(s), "spread", discard[withString], Parallelism(2))
	Sink(KeyBy(s, func(v withString) int64 { return 0 }).Stream, "keyed", discard[withString], Parallelism(2))
	p := mustPlan(t, g)
	task := mustTask(t, p, "src#0")
	f := &fakeSender{}
	c, err := newCollector[withString](&InstanceContext{Task: task, BatchSize: 256, BatchBytes: 100 * kib, Sender: f})
	if err != nil {
		t.Fatal(err)
	}
	// 40 KiB and a header each: the third record reaches 100 KiB.
	payload := strings.Repeat("p", 40*kib)
	for i := range 9 {
		c.Emit(withString{ID: int64(i), Payload: payload})
	}
	byTask := map[string][]int{}
	for _, s := range f.sends {
		to := p.Tasks[p.Channels[task.Outputs[s.output]].To].ID
		byTask[to] = append(byTask[to], len(s.batch.([]withString)))
	}
	want := map[string][]int{"spread#0": {3, 3}, "spread#1": {3}, "keyed#0": {3, 3, 3}}
	if !reflect.DeepEqual(byTask, want) {
		t.Errorf("batches per task %v, want %v", byTask, want)
	}
	got := recordsByTask[withString](t, p, task, f)
	var ids []int64
	for _, v := range append(got["spread#0"], got["spread#1"]...) {
		ids = append(ids, v.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(ids, seq(9)) {
		t.Errorf("rebalance delivered records %v, want 0..8 once each", ids)
	}
}

// TestCollectorEmitSizedKnown checks that a record whose size the caller
// gives (a source sizes each record it reads) is batched as if the
// Collector had sized it.
func TestCollectorEmitSizedKnown(t *testing.T) {
	build := func() *Graph {
		g := New("job")
		Sink(Generate(g, "src", 1, func(int64) string { return "" }), "sink", discard[string])
		return g
	}
	a, fa := byteCollector[string](t, build(), "src#0", 256, 1<<20)
	b, fb := byteCollector[string](t, build(), "src#0", 256, 1<<20)
	_, size := byteLimits[string](256, 1<<20)
	for i := range 20 {
		v := strings.Repeat("r", (i%5)*100<<10)
		a.Emit(v)
		b.emitSized(v, size(unsafe.Pointer(&v)))
	}
	a.flush()
	b.flush()
	la, lb := batchLens[string](t, fa), batchLens[string](t, fb)
	if !slices.Equal(la, lb) || len(la) < 2 {
		t.Errorf("batches of %v sized by the Collector, %v sized by the caller: want the same, more than one", la, lb)
	}
}

// TestFlatSizers checks that the sizers of strings, byte slices and
// structs of such fields size records themselves (flat), as the general
// sizer does, and that a copy reads only its own memory.
func TestFlatSizers(t *testing.T) {
	type two struct {
		A    string
		N    int64
		B    string
		Nums []int32
	}
	type many struct{ A, B, C, D, E string }
	type deep struct {
		S string
		P *withString
	}
	big := strings.Repeat("x", 1000)
	for _, tt := range []struct {
		name string
		t    reflect.Type
		v    unsafe.Pointer
		flat bool
	}{
		{"string", reflect.TypeFor[string](), unsafe.Pointer(&big), true},
		{"[]byte", reflect.TypeFor[[]byte](), unsafe.Pointer(&[]byte{1, 2, 3}), true},
		{"nil []byte", reflect.TypeFor[[]byte](), unsafe.Pointer(new([]byte)), true},
		{"struct with a string", reflect.TypeFor[withString](), unsafe.Pointer(&withString{Payload: big}), true},
		{"two strings and a slice", reflect.TypeFor[two](), unsafe.Pointer(&two{A: "a", B: big, Nums: make([]int32, 3, 10)}), true},
		{"five strings", reflect.TypeFor[many](), unsafe.Pointer(&many{"a", "bb", "ccc", "dddd", big}), false},
		{"a pointer field", reflect.TypeFor[deep](), unsafe.Pointer(&deep{S: "s", P: &withString{Payload: big}}), false},
		{"[]string", reflect.TypeFor[[]string](), unsafe.Pointer(&[]string{"a", big}), false},
	} {
		s := sizerOf(tt.t)
		if s.flat != tt.flat {
			t.Errorf("%s: flat %v, want %v", tt.name, s.flat, tt.flat)
		}
		more, _ := s.more(tt.v, sizeBudget, sizeDepth)
		want := s.fixed + more
		if got := s.recordSize(tt.v); got != want {
			t.Errorf("%s: recordSize %d, want %d (the general sizer's)", tt.name, got, want)
		}
		var own sizer
		s.copyTo(&own)
		if got := own.recordSize(tt.v); got != want {
			t.Errorf("%s: a copy sizes %d, want %d", tt.name, got, want)
		}
		if len(own.strs) > 0 && &own.strs[0] != &own.strBuf[0] || len(own.slices) > 0 && &own.slices[0] != &own.sliceBuf[0] {
			t.Errorf("%s: a copy reads the offsets of the original", tt.name)
		}
	}
}

// TestCollectorEmitAll checks that emitting a read buffer at once sends the
// same batches, to the same outputs and in the same order, as emitting its
// records one by one, on every kind of output, with records of a static
// size and records sized one by one, and that it returns their bytes.
func TestCollectorEmitAll(t *testing.T) {
	outputs := map[string]func(Stream[withString]){
		"forward":   func(s Stream[withString]) { Sink(s, "sink", discard[withString]) },
		"rebalance": func(s Stream[withString]) { Sink(Rebalance(s), "sink", discard[withString], Parallelism(3)) },
		"broadcast": func(s Stream[withString]) { Sink(Broadcast(s), "sink", discard[withString], Parallelism(2)) },
		"hash": func(s Stream[withString]) {
			Sink(KeyBy(s, func(v withString) int64 { return v.ID }).Stream, "sink", discard[withString], Parallelism(3))
		},
		"hash, max parallelism 100": func(s Stream[withString]) {
			Sink(KeyBy(s, func(v withString) int64 { return v.ID }).Stream, "sink", discard[withString], Parallelism(3))
		},
		"hash by string": func(s Stream[withString]) {
			Sink(KeyBy(s, func(v withString) string { return strconv.FormatInt(v.ID, 10) }).Stream, "sink", discard[withString], Parallelism(3))
		},
		"two routes": func(s Stream[withString]) {
			Sink(Rebalance(s), "a", discard[withString], Parallelism(2))
			Sink(KeyBy(s, func(v withString) int64 { return v.ID % 5 }).Stream, "b", discard[withString], Parallelism(2))
		},
	}
	recs := make([]withString, 300)
	for i := range recs {
		recs[i] = withString{ID: int64(i), Payload: strings.Repeat("p", i%7*1000)}
	}
	for name, out := range outputs {
		for _, batchBytes := range []int{0, 20 << 10} {
			g := New("job")
			if strings.Contains(name, "max parallelism 100") {
				g = New("job", MaxParallelism(100))
			}
			out(Generate(g, "src", 1, func(int64) withString { return withString{} }))
			one, fOne := byteCollector[withString](t, g, "src#0", 16, batchBytes)
			all, fAll := byteCollector[withString](t, g, "src#0", 16, batchBytes)
			want := 0
			for i := range recs {
				one.Emit(recs[i])
				if batchBytes > 0 {
					want += sizeOf(recs[i])
				}
			}
			got := all.emitAll(recs[:100], nil) + all.emitAll(recs[100:], nil)
			one.flush()
			all.flush()
			if got != want {
				t.Errorf("%s, batch bytes %d: emitAll returned %d bytes, want %d", name, batchBytes, got, want)
			}
			if !reflect.DeepEqual(fOne.sends, fAll.sends) {
				t.Errorf("%s, batch bytes %d: emitAll sent %d batches, Emit %d, or not the same ones", name, batchBytes, len(fAll.sends), len(fOne.sends))
			}
		}
	}
}

// stampSender records every batch sent with its time stamps.
type stampSender struct {
	sends []stamped
}

type stamped struct {
	output int
	batch  any
	ts     []int64
}

func (s *stampSender) Send(output int, batch any, ts []int64) {
	s.sends = append(s.sends, stamped{output, batch, slices.Clone(ts)})
}

// TestCollectorEmitAllStamps checks that a timed source's read, emitted at
// once on a hash route, reaches each target with every record's own time
// stamp, and every record at the task that owns its key group.
func TestCollectorEmitAllStamps(t *testing.T) {
	for _, maxP := range []int{128, 100} {
		g := New("job", MaxParallelism(maxP))
		Sink(KeyBy(Sequence(g, "src", 1, 2), id64).Stream, "sink", discard[int64], Parallelism(3))
		p := mustPlan(t, g)
		task := mustTask(t, p, "src#0")
		task.Timed = true
		s := &stampSender{}
		c, err := newCollector[int64](&InstanceContext{Task: task, BatchSize: 16, Sender: s})
		if err != nil {
			t.Fatal(err)
		}
		recs, ts := make([]int64, 500), make([]int64, 500)
		for i := range recs {
			recs[i], ts[i] = int64(i*7919), int64(i)*10+3
		}
		c.emitAll(recs[:123], ts[:123])
		c.emitAll(recs[123:], ts[123:])
		c.flush()
		n := 0
		for _, sent := range s.sends {
			vs := sent.batch.([]int64)
			if len(sent.ts) != len(vs) {
				t.Fatalf("max parallelism %d: a batch of %d records with %d time stamps", maxP, len(vs), len(sent.ts))
			}
			to := p.Tasks[p.Channels[task.Outputs[sent.output]].To]
			for i, v := range vs {
				n++
				if want := v/7919*10 + 3; sent.ts[i] != want {
					t.Errorf("max parallelism %d: record %d stamped %d, want %d", maxP, v, sent.ts[i], want)
				}
				if kg := int(HashUint64(uint64(v)) % uint64(maxP)); kg < to.KeyGroupStart || kg >= to.KeyGroupEnd {
					t.Errorf("max parallelism %d: record %d (key group %d) went to %s, which owns [%d,%d)", maxP, v, kg, to.ID, to.KeyGroupStart, to.KeyGroupEnd)
				}
			}
		}
		if n != len(recs) {
			t.Errorf("max parallelism %d: %d records sent, want %d", maxP, n, len(recs))
		}
	}
}
