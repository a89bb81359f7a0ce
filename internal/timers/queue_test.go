package timers

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"testing"
)

func drain[K cmp.Ordered](q *Queue[K], now int64) []Timer[K] {
	var out []Timer[K]
	for {
		t, ok := q.PopDue(now)
		if !ok {
			return out
		}
		out = append(out, t)
	}
}

func TestQueueOneTimerPerKeyAndTime(t *testing.T) {
	var q Queue[string]
	if !q.Add(3, "a", 10) {
		t.Fatal("first Add of (a, 10) reported a duplicate")
	}
	if q.Add(3, "a", 10) {
		t.Fatal("second Add of (a, 10) was accepted")
	}
	if !q.Add(3, "a", 11) || !q.Add(4, "b", 10) {
		t.Fatal("timers differing in time or key were refused")
	}
	if q.Len() != 3 || !q.Has("a", 10) || q.Has("a", 12) {
		t.Fatalf("Len %d, Has(a,10) %v, Has(a,12) %v", q.Len(), q.Has("a", 10), q.Has("a", 12))
	}
	got := drain(&q, 100)
	want := []Timer[string]{{"a", 10, 3}, {"b", 10, 4}, {"a", 11, 3}}
	if !slices.Equal(got, want) {
		t.Fatalf("fired %v, want %v", got, want)
	}
	if !q.Add(3, "a", 10) {
		t.Fatal("a fired timer could not be registered again")
	}
}

func TestQueueFiresByTimeThenKey(t *testing.T) {
	var q Queue[int64]
	for _, k := range []int64{5, 1, 4, 2, 3} {
		q.Add(0, k, 7)
	}
	q.Add(0, 9, 3)
	q.Add(0, 0, 8)
	got := drain(&q, 7)
	var keys []int64
	for _, tm := range got {
		keys = append(keys, tm.Key)
	}
	if want := []int64{9, 1, 2, 3, 4, 5}; !slices.Equal(keys, want) {
		t.Fatalf("fired keys %v up to time 7, want %v", keys, want)
	}
	if q.Len() != 1 {
		t.Fatalf("%d timers left, want the one at 8", q.Len())
	}
	if _, ok := q.PopDue(7); ok {
		t.Fatal("a timer at 8 fired at 7")
	}
	if tm, ok := q.PopDue(8); !ok || tm.Key != 0 {
		t.Fatalf("PopDue(8) = %v %v", tm, ok)
	}
}

func TestQueueDelete(t *testing.T) {
	var q Queue[int]
	for i := range 10 {
		q.Add(i%4, i, int64(10-i))
	}
	if q.Delete(3, 99) || q.Delete(42, 7) {
		t.Fatal("Delete of an absent timer reported true")
	}
	// The first, a middle and the last of the heap.
	for _, k := range []int{9, 4, 0} {
		if !q.Delete(k, int64(10-k)) {
			t.Fatalf("Delete(%d) of a pending timer reported false", k)
		}
	}
	if q.Has(4, 6) || q.Len() != 7 {
		t.Fatalf("after 3 deletes: Len %d, Has(4,6) %v", q.Len(), q.Has(4, 6))
	}
	var keys []int
	for _, tm := range drain(&q, 100) {
		keys = append(keys, tm.Key)
	}
	if want := []int{8, 7, 6, 5, 3, 2, 1}; !slices.Equal(keys, want) {
		t.Fatalf("fired %v, want %v", keys, want)
	}
}

func TestQueueEachSelectsKeyGroups(t *testing.T) {
	var q Queue[int]
	for k := range 300 {
		q.Add(k%130, k, int64(k))
	}
	groups := make([]uint64, 3)
	groups[0] |= 1 << 1    // group 1
	groups[1] |= 1 << 0    // group 64
	groups[2] |= 1 << 1    // group 129
	count := map[int]int{} // group -> timers
	q.Each(groups, func(tm Timer[int]) {
		if tm.Key%130 != tm.Group || int64(tm.Key) != tm.Time {
			t.Fatalf("Each gave %+v", tm)
		}
		count[tm.Group]++
	})
	if want := map[int]int{1: 3, 64: 2, 129: 2}; !maps(count, want) {
		t.Fatalf("timers per selected group %v, want %v", count, want)
	}
	n := 0
	q.Each(nil, func(Timer[int]) { n++ })
	if n != 300 {
		t.Fatalf("Each(nil) gave %d timers, want 300", n)
	}
	// A bit set shorter than the groups selects none of those beyond it.
	n = 0
	q.Each([]uint64{1}, func(Timer[int]) { n++ })
	if n != 3 {
		t.Fatalf("Each of group 0 only gave %d timers, want 3", n)
	}
}

func maps(a, b map[int]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// The queue against a sorted slice, over random registrations, deletions,
// clears and firings.
func TestQueueAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 7))
		var q Queue[int32]
		var model []Timer[int32]
		find := func(k int32, tm int64) int {
			return slices.IndexFunc(model, func(x Timer[int32]) bool { return x.Key == k && x.Time == tm })
		}
		now := int64(0)
		for step := range 5000 {
			k, tm := int32(rng.IntN(50)), now+int64(rng.IntN(40))
			switch op := rng.IntN(100); {
			case op < 50:
				added := q.Add(int(k%7), k, tm)
				if want := find(k, tm) < 0; added != want {
					t.Fatalf("seed %d step %d: Add(%d,%d) = %v, want %v", seed, step, k, tm, added, want)
				}
				if added {
					model = append(model, Timer[int32]{k, tm, int(k % 7)})
				}
			case op < 75:
				i := find(k, tm)
				if got := q.Delete(k, tm); got != (i >= 0) {
					t.Fatalf("seed %d step %d: Delete(%d,%d) = %v", seed, step, k, tm, got)
				}
				if i >= 0 {
					model = slices.Delete(model, i, i+1)
				}
			case op < 99:
				now += int64(rng.IntN(10))
				slices.SortFunc(model, func(a, b Timer[int32]) int {
					return cmp.Or(cmp.Compare(a.Time, b.Time), cmp.Compare(a.Key, b.Key))
				})
				n := 0
				for n < len(model) && model[n].Time <= now {
					n++
				}
				if got := drain(&q, now); !slices.Equal(got, model[:n]) {
					t.Fatalf("seed %d step %d: fired %v up to %d, want %v", seed, step, got, now, model[:n])
				}
				model = model[n:]
			default:
				q.Clear()
				model = model[:0]
			}
			if q.Len() != len(model) {
				t.Fatalf("seed %d step %d: Len %d, model %d", seed, step, q.Len(), len(model))
			}
		}
	}
}

func TestQueueReusesMemory(t *testing.T) {
	var q Queue[int64]
	for i := range int64(1000) {
		q.Add(0, i, i)
	}
	drain(&q, 1<<62)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range int64(1000) {
			q.Add(0, i, i)
		}
		drain(&q, 1<<62)
	})
	// The slots and the heap are reused; the index (a Go map) may
	// allocate now and then as it reorganises.
	if allocs > 50 {
		t.Fatalf("a refill of a drained queue with 1000 timers allocated %.1f times, want at most 50", allocs)
	}
}

func BenchmarkQueueAddPop(b *testing.B) {
	const pending = 1 << 20
	var q Queue[int64]
	for i := range int64(pending) {
		q.Add(int(i%128), i, i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range int64(b.N) {
		q.Add(int(i%128), pending+i, pending+i)
		q.PopDue(1 << 62)
	}
}
