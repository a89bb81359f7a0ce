package benchwork

import (
	"testing"
	"time"
)

func TestHistogramQuantiles(t *testing.T) {
	var h Histogram
	var ts []int64
	for i := int64(1); i <= 1000; i++ {
		ts = append(ts, 1_000_000-i*1000) // latencies 1µs..1ms
	}
	h.RecordBatch(1_000_000, ts)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Microsecond}, {0.99, 990 * time.Microsecond}, {1, time.Millisecond}} {
		got := h.Quantile(c.q)
		if got < c.want*93/100 || got > c.want*107/100 {
			t.Errorf("q%.2f = %v, want about %v", c.q, got, c.want)
		}
	}
	if h.Count() != 1000 {
		t.Fatalf("count %d", h.Count())
	}
}

func TestBucketsAreMonotonic(t *testing.T) {
	prev := -1
	for ns := int64(0); ns < 1<<40; ns = ns*9/8 + 1 {
		b := bucket(ns)
		if b < prev {
			t.Fatalf("bucket(%d) = %d < %d", ns, b, prev)
		}
		if v := bucketValue(b); v > ns || (ns >= 16 && float64(ns-v) > 0.07*float64(ns)) {
			t.Fatalf("bucketValue(bucket(%d)) = %d", ns, v)
		}
		prev = b
	}
}

func TestGeneratorAndWork(t *testing.T) {
	g := NewGenerator(4, 64)
	buf := make([]Record, 10)
	g.Fill(buf, 6, 42)
	if buf[0].Key != 2 || buf[9].Key != 3 || buf[3].TS != 42 || len(buf[0].Pad) != 48 {
		t.Fatalf("records %+v", buf[:2])
	}
	if Add(5, buf[0]) != 6 || Partition(7, 2) != 1 {
		t.Fatal("work")
	}
	if allocs := testing.AllocsPerRun(100, func() { g.Fill(buf, 0, 1) }); allocs != 0 {
		t.Fatalf("Fill allocates %v per call", allocs)
	}
}

func TestFillHotWindow(t *testing.T) {
	g := NewGenerator(1000, 16).WithUpdateFraction(0.01) // 10 hot keys
	if g.Hot != 10 {
		t.Fatalf("hot window %d keys, want 10", g.Hot)
	}
	buf := make([]Record, 1200)
	const sec = int64(7e9) // second 7: window 70..79
	g.Fill(buf, 0, sec+5)
	for i := range 1000 { // every key once first
		if buf[i].Key != uint64(i) {
			t.Fatalf("record %d has key %d, want %d (every key once first)", i, buf[i].Key, i)
		}
	}
	seen := map[uint64]int{}
	for _, r := range buf[1000:] {
		seen[r.Key]++
	}
	for k := uint64(70); k < 80; k++ {
		if seen[k] != 20 {
			t.Errorf("key %d written %d times in second 7, want 20 (only 70..79: %v)", k, seen[k], seen)
		}
	}
	if len(seen) != 10 {
		t.Errorf("second 7 wrote %d keys, want the 10 of its window: %v", len(seen), seen)
	}
	// The window moves on each second and wraps around; over Keys/Hot
	// seconds every key is written.
	all := map[uint64]bool{}
	for s := range int64(100) {
		g.Fill(buf[:10], 5000, (s+99)*1e9)
		first, width := g.HotWindow(uint64(s + 99))
		for _, r := range buf[:10] {
			if d := (r.Key + 1000 - first) % 1000; d >= width {
				t.Fatalf("second %d: key %d outside its window %d+%d", s+99, r.Key, first, width)
			}
			all[r.Key] = true
		}
	}
	if len(all) != 1000 {
		t.Errorf("100 seconds of a 10-key window wrote %d keys, want all 1000", len(all))
	}
}

func TestUpdateFractionBounds(t *testing.T) {
	g := NewGenerator(50, 16)
	for _, c := range []struct {
		f    float64
		want uint64
	}{{1, 0}, {0.001, 1}, {0.5, 25}, {0.999, 49}} {
		if got := g.WithUpdateFraction(c.f).Hot; got != c.want {
			t.Errorf("fraction %v: hot window %d, want %d", c.f, got, c.want)
		}
	}
	// Every key, in turn, without a window: record i has key i % Keys.
	buf := make([]Record, 120)
	g.Fill(buf, 0, 3e9)
	for i, r := range buf {
		if r.Key != uint64(i)%50 {
			t.Fatalf("record %d has key %d, want %d", i, r.Key, i%50)
		}
	}
}

func TestFillDoesNotAllocate(t *testing.T) {
	g := NewGenerator(1<<16, 64).WithUpdateFraction(0.01)
	buf := make([]Record, 256)
	now := int64(1e9)
	if n := testing.AllocsPerRun(100, func() { g.Fill(buf, 1<<20, now); now += 1e7 }); n != 0 {
		t.Errorf("Fill allocates %v times per batch, want 0", n)
	}
}
