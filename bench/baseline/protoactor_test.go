package baseline_test

import (
	"maps"
	"testing"
	"time"

	"github.com/snapflow/snapflow/bench/baseline"
	"github.com/snapflow/snapflow/bench/baseline/baselinetest"
)

func TestProtoactor(t *testing.T) {
	baselinetest.Run(t, baseline.RunProtoactor)
}

// BenchmarkProtoactor runs 2M 16-byte records per iteration through the
// pipeline at parallelism 1, 2 and 4.
func BenchmarkProtoactor(b *testing.B) {
	baselinetest.Bench(b, baseline.RunProtoactor, 2_000_000)
}

func TestConfigDefaults(t *testing.T) {
	c, err := baseline.Config{}.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want := baseline.Config{Parallelism: 2, Keys: 1024, RecordSize: 16, BatchSize: 256, Credits: 8, Linger: time.Millisecond}
	if c != want {
		t.Fatalf("defaults %+v, want %+v", c, want)
	}
	set := baseline.Config{Parallelism: 3, Keys: 5, RecordSize: 64, BatchSize: 7, Credits: 1, Linger: time.Second, Records: 9, Rate: 10}
	if c, err := set.WithDefaults(); err != nil || c != set {
		t.Fatalf("WithDefaults(%+v) = %+v, %v: want it unchanged", set, c, err)
	}
}

func TestExpectedSums(t *testing.T) {
	for _, c := range []struct {
		records int64
		keys    uint64
		want    map[uint64]uint64
	}{
		{10, 4, map[uint64]uint64{0: 3, 1: 3, 2: 2, 3: 2}},
		{2, 4, map[uint64]uint64{0: 1, 1: 1}},
		{0, 4, map[uint64]uint64{}},
		{3, 0, map[uint64]uint64{0: 3}}, // at least one key, like the generator
	} {
		if got := baseline.ExpectedSums(c.records, c.keys); !maps.Equal(got, c.want) {
			t.Errorf("ExpectedSums(%d, %d) = %v, want %v", c.records, c.keys, got, c.want)
		}
	}
}

func TestMeter(t *testing.T) {
	m := baseline.NewMeter()
	if r := m.Result(nil); r.Records != 0 || r.Elapsed != 0 {
		t.Fatalf("empty meter: %+v", r)
	}
	m.Observe(1_000, []int64{100, 100, 200})
	m.Observe(2_000, nil)
	m.Observe(3_000, []int64{50, 2_000})
	r := m.Result(nil)
	if r.Records != 5 || r.Elapsed != 2_950 || r.Latency.Count() != 5 {
		t.Fatalf("result %+v (latencies %d), want 5 records over 2.95µs", r, r.Latency.Count())
	}
}
