package dataflow

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
)

// checkTable compares t with the map it should hold, and checks its
// layout: every part serves the directory entries of its top bits and
// holds only keys of them, its count is right, and every key is found from
// its home slot without crossing an empty one (what remove's shifting must
// keep true).
func checkTable[K Key, V comparable](t *testing.T, step string, tb *keyTable[K, V], want map[K]V) {
	t.Helper()
	if tb.len() != len(want) {
		t.Fatalf("%s: len %d, want %d", step, tb.len(), len(want))
	}
	got := maps.Collect(tb.all())
	if !maps.Equal(got, want) {
		t.Fatalf("%s: table holds %v, want %v", step, got, want)
	}
	if len(tb.dir) != 1<<tb.depth {
		t.Fatalf("%s: directory of %d entries at depth %d", step, len(tb.dir), tb.depth)
	}
	for e, p := range tb.dir {
		n := 0
		for i, c := range p.ctrl {
			if c == 0 {
				continue
			}
			n++
			k := p.slots[i].k
			h := tb.hash(k)
			if c != tag(h) {
				t.Fatalf("%s: slot %d of key %v has control byte %#x, want %#x", step, i, k, c, tag(h))
			}
			if tb.part(h) != p {
				t.Fatalf("%s: key %v is in the part of directory entry %d, not in the part its hash selects", step, k, e)
			}
			for j := h & p.mask; j != uint64(i); j = (j + 1) & p.mask {
				if p.ctrl[j] == 0 {
					t.Fatalf("%s: key %v at slot %d is past empty slot %d from its home", step, k, i, j)
				}
			}
		}
		if n != p.n {
			t.Fatalf("%s: a part holds %d keys and counts %d", step, n, p.n)
		}
		if first := e >> (tb.depth - p.depth) << (tb.depth - p.depth); tb.dir[first] != p {
			t.Fatalf("%s: directory entry %d's part (depth %d) does not start its run at entry %d", step, e, p.depth, first)
		}
	}
}

// TestKeyTableMatchesMap runs random sets, gets and removes on a table and
// on a Go map, for each kind of key, with few keys (long runs of full
// slots, and removals that shift them) and with many (growth).
func TestKeyTableMatchesMap(t *testing.T) {
	for _, keys := range []int{5, 40, 3000, 30000} {
		t.Run(fmt.Sprintf("uint64/%d", keys), func(t *testing.T) {
			runKeyTable(t, newKeyTable[uint64, int](newKeyCodec[uint64]()), keys, func(i int) uint64 { return uint64(i) << 40 })
		})
		t.Run(fmt.Sprintf("string/%d", keys), func(t *testing.T) {
			runKeyTable(t, newKeyTable[string, int](newKeyCodec[string]()), keys, func(i int) string { return fmt.Sprintf("user-%d", i) })
		})
		t.Run(fmt.Sprintf("int16/%d", keys), func(t *testing.T) {
			runKeyTable(t, newKeyTable[int16, int](newKeyCodec[int16]()), keys, func(i int) int16 { return int16(-i) })
		})
	}
}

// tableGet returns k's value in tb and whether k is there.
func tableGet[K Key, V any](tb *keyTable[K, V], k K) (V, bool) {
	p, i, ok := tb.find(k)
	if !ok {
		var zero V
		return zero, false
	}
	return p.slots[i].v, true
}

func runKeyTable[K Key](t *testing.T, tb *keyTable[K, int], keys int, key func(int) K) {
	rng := rand.New(rand.NewPCG(uint64(keys), 1))
	want := map[K]int{}
	for step := range 20 * keys {
		k := key(rng.IntN(keys))
		switch op := rng.IntN(10); {
		case op < 5:
			tb.set(k, step)
			want[k] = step
			if v, ok := tableGet(tb, k); !ok || v != step { // the remembered lookup
				t.Fatalf("step %d: get(%v) after set = %d, %v; want %d", step, k, v, ok, step)
			}
		case op < 8:
			v, ok := tableGet(tb, k)
			if w, wok := want[k]; v != w || ok != wok {
				t.Fatalf("step %d: get(%v) = %d, %v; want %d, %v", step, k, v, ok, w, wok)
			}
			if ok && rng.IntN(2) == 0 { // a Get then a Set of the record's key
				tb.set(k, -step)
				want[k] = -step
			}
		default:
			tableGet(tb, k) // remembered, then removed: a later get must not see it
			tb.remove(k)
			delete(want, k)
			if _, ok := tableGet(tb, k); ok {
				t.Fatalf("step %d: get(%v) after remove found it", step, k)
			}
		}
		if step%max(97, keys) == 0 {
			checkTable(t, fmt.Sprintf("step %d", step), tb, want)
		}
	}
	checkTable(t, "end", tb, want)
	if len(want) > maxPartSlots/4*3 && tb.depth == 0 {
		t.Fatalf("%d keys in one part: it never split", len(want))
	}
	for k := range want {
		tb.remove(k)
	}
	checkTable(t, "all removed", tb, map[K]int{})
	if slots := tableSlots(tb); slots > minPartSlots*len(tb.dir) {
		t.Fatalf("all keys removed, the table still has %d slots in %d directory entries: its parts did not shrink", slots, len(tb.dir))
	}
}

// tableSlots is the number of slots of tb's parts.
func tableSlots[K Key, V any](tb *keyTable[K, V]) int {
	n := 0
	for i := 0; i < len(tb.dir); i += 1 << (tb.depth - tb.dir[i].depth) {
		n += len(tb.dir[i].ctrl)
	}
	return n
}

// TestKeyTableShrinks: a table that held many keys gives its slots back as
// they are removed, keeps the rest findable, and grows again.
func TestKeyTableShrinks(t *testing.T) {
	tb := newKeyTable[uint64, int](newKeyCodec[uint64]())
	const many = 50_000
	want := map[uint64]int{}
	for i := range many {
		tb.set(uint64(i), i)
		want[uint64(i)] = i
	}
	peak := tableSlots(tb)
	for i := range many {
		if i%1000 != 0 {
			tb.remove(uint64(i))
			delete(want, uint64(i))
		}
	}
	checkTable(t, "50 of 50,000 keys left", tb, want)
	parts := 0
	for i := 0; i < len(tb.dir); i += 1 << (tb.depth - tb.dir[i].depth) {
		parts++
	}
	// A part halves once under an eighth full: it keeps at most about 8
	// slots per key, and at least minPartSlots.
	if after, bound := tableSlots(tb), 8*len(want)+2*minPartSlots*parts; after > bound {
		t.Errorf("50 keys in %d parts take %d slots (%d at the peak), want at most %d", parts, after, peak, bound)
	}
	for i := range many {
		tb.set(uint64(i), -i)
		want[uint64(i)] = -i
	}
	checkTable(t, "all set again", tb, want)
}

// TestKeyTableSeeds: two tables place the same keys differently, so that
// which keys collide cannot be known from outside the process.
func TestKeyTableSeeds(t *testing.T) {
	a, b := newKeyTable[uint64, int](newKeyCodec[uint64]()), newKeyTable[uint64, int](newKeyCodec[uint64]())
	same := 0
	for k := range uint64(64) {
		if a.hash(k) == b.hash(k) {
			same++
		}
	}
	if same > 0 {
		t.Fatalf("two tables hash %d of 64 keys alike: the hash is not seeded", same)
	}
}

func TestKeyTableDoesNotAllocatePerLookup(t *testing.T) {
	tb := newKeyTable[uint64, uint64](newKeyCodec[uint64]())
	for k := range uint64(1024) {
		tb.set(k, k)
	}
	k := uint64(0)
	if n := testing.AllocsPerRun(1000, func() {
		v, _ := tableGet(tb, k%1024)
		tb.set(k%1024, v+1)
		k++
	}); n != 0 {
		t.Fatalf("get and set of present keys allocate %v times", n)
	}
}

// TestValueStateGetClearSet: records that Get their key, may Clear it, Set
// it, Get it again and may Clear it last hold the values a map model
// holds. Set after a Get takes the remembered slot only while the table
// is unchanged: with a Clear between them, it must insert again.
func TestValueStateGetClearSet(t *testing.T) {
	g := New("job")
	var st *ValueState[int64, int64]
	byN := KeyBy(FromSlice(g, "src", []event{}), func(e event) int64 { return e.N % 37 })
	Sink(Process(byN, "agg", func(s *KeyedSetup[int64]) ProcessFunc[int64, event, int64] {
		st = Value[int64](s, "v")
		return func(ctx *Context[int64], e event, _ *Collector[int64]) error {
			v, _ := st.Get()
			if e.N%3 == 0 {
				st.Clear()
			}
			st.Set(v + e.N)
			if w, ok := st.Get(); !ok || w != v+e.N {
				return fmt.Errorf("key %d: Get after Set = %d, %v; want %d", ctx.Key(), w, ok, v+e.N)
			}
			if e.N%5 == 0 {
				st.Clear()
			}
			return nil
		}
	}), "sink", discard[int64])
	inst := mustInstance(t, mustPlan(t, g), "agg#0", 256, noopSender{})
	want := map[int64]int64{}
	batch := make([]event, 0, 1000)
	for n := range int64(1000) {
		batch = append(batch, event{N: n})
		k := n % 37
		want[k] += n
		if n%5 == 0 {
			delete(want, k)
		}
	}
	if err := inst.ProcessBatch(0, batch, nil); err != nil {
		t.Fatal(err)
	}
	if got := valuesOf(st); !maps.Equal(got, want) {
		t.Fatalf("state %v, want %v", got, want)
	}
}
