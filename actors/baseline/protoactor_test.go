package baseline_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/baseline"
)

// checkSums fails unless r.Sums is the closed form for r.Records records.
func checkSums(t *testing.T, r baseline.Result, keys uint64) {
	t.Helper()
	if want := baseline.ExpectedSums(r.Records, keys); !maps.Equal(r.Sums, want) {
		t.Fatalf("sums of %d records over %d keys differ from the closed form (%d keys, want %d)", r.Records, keys, len(r.Sums), len(want))
	}
	if got := r.Latency.Count(); got != uint64(r.Records) {
		t.Fatalf("latency recorded for %d records, want %d", got, r.Records)
	}
}

func TestProtoactorCountsEveryRecord(t *testing.T) {
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("P=%d", p), func(t *testing.T) {
			const n = 1_000_000
			r, err := baseline.RunProtoactor(t.Context(), baseline.Config{Parallelism: p, Records: n})
			if err != nil {
				t.Fatal(err)
			}
			if r.Records != n {
				t.Fatalf("the sink saw %d records, want %d", r.Records, n)
			}
			checkSums(t, r, baseline.DefaultKeys)
			if r.Elapsed <= 0 {
				t.Fatalf("elapsed %v", r.Elapsed)
			}
		})
	}
}

// TestProtoactorSmallWindows runs with one-record batches, one credit per
// channel, odd key and record counts and large records: every record must
// still arrive exactly once.
func TestProtoactorSmallWindows(t *testing.T) {
	for _, c := range []baseline.Config{
		{Parallelism: 3, Keys: 7, RecordSize: 100, BatchSize: 1, Credits: 1, Records: 10_001},
		{Parallelism: 5, Keys: 3, BatchSize: 10, Credits: 2, Linger: time.Microsecond, Records: 12_345},
		{Parallelism: 2, Keys: 1000, Records: 10}, // fewer records than keys and than a batch
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			r, err := baseline.RunProtoactor(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Records != c.Records {
				t.Fatalf("the sink saw %d records, want %d", r.Records, c.Records)
			}
			checkSums(t, r, c.Keys)
		})
	}
}

// TestProtoactorLatencyAtRate checks that the linger bounds the latency of a
// source far below the pipeline's capacity.
func TestProtoactorLatencyAtRate(t *testing.T) {
	const n = 100_000
	r, err := baseline.RunProtoactor(t.Context(), baseline.Config{Records: n, Rate: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != n {
		t.Fatalf("the sink saw %d records, want %d", r.Records, n)
	}
	checkSums(t, r, baseline.DefaultKeys)
	if p99 := r.Latency.Quantile(0.99); p99 >= 50*time.Millisecond {
		t.Fatalf("p99 latency %v at 200k records/s, want below 50ms", p99)
	}
	// The source is paced: 100k records at 200k/s take about 0.5s.
	if r.Elapsed < 400*time.Millisecond {
		t.Fatalf("100k records at 200k/s took %v: the rate limit does not hold", r.Elapsed)
	}
	t.Logf("elapsed %v, latency p50 %v p99 %v", r.Elapsed, r.Latency.Quantile(0.5), r.Latency.Quantile(0.99))
}

// TestProtoactorUnboundedStopsWithContext runs until the context ends: the
// source stops, the pipeline drains and the run ends promptly.
func TestProtoactorUnboundedStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	r, err := baseline.RunProtoactor(ctx, baseline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if late := context.Cause(ctx) == nil; late {
		t.Fatal("the run ended before its context")
	}
	if r.Records == 0 {
		t.Fatal("no record reached the sink")
	}
	checkSums(t, r, baseline.DefaultKeys) // the drained prefix, exactly once
	deadline, _ := ctx.Deadline()
	if d := time.Since(deadline); d > 2*time.Second {
		t.Fatalf("the run ended %v after its context", d)
	}
}

// TestProtoactorBoundedStopsWithContext ends a bounded run early: it returns
// what reached the sink and the context's cause.
func TestProtoactorBoundedStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	r, err := baseline.RunProtoactor(ctx, baseline.Config{Records: 1 << 50})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	checkSums(t, r, baseline.DefaultKeys)
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
	for _, bad := range []baseline.Config{
		{Parallelism: -1}, {RecordSize: 8}, {BatchSize: -1}, {Credits: -1},
		{Linger: -time.Second}, {Records: -1}, {Rate: -1},
	} {
		if _, err := baseline.RunProtoactor(t.Context(), bad); !errors.Is(err, baseline.ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", bad, err)
		}
	}
}

func TestExpectedSums(t *testing.T) {
	got := baseline.ExpectedSums(10, 4)
	want := map[uint64]uint64{0: 3, 1: 3, 2: 2, 3: 2}
	if !maps.Equal(got, want) {
		t.Fatalf("ExpectedSums(10, 4) = %v, want %v", got, want)
	}
	if got := baseline.ExpectedSums(2, 4); !maps.Equal(got, map[uint64]uint64{0: 1, 1: 1}) {
		t.Fatalf("ExpectedSums(2, 4) = %v", got)
	}
}

// BenchmarkProtoactor runs 2M 16-byte records per iteration through the
// pipeline at parallelism 1, 2 and 4.
func BenchmarkProtoactor(b *testing.B) {
	for _, p := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			const n = 2_000_000
			b.ReportAllocs()
			var records int64
			var elapsed time.Duration
			for b.Loop() {
				r, err := baseline.RunProtoactor(b.Context(), baseline.Config{Parallelism: p, Records: n})
				if err != nil {
					b.Fatal(err)
				}
				if r.Records != n {
					b.Fatalf("the sink saw %d records, want %d", r.Records, n)
				}
				records += r.Records
				elapsed += r.Elapsed
			}
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
		})
	}
}
