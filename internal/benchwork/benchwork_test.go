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
