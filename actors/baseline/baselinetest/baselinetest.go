// Package baselinetest is the conformance suite of snapflow's benchmark
// baselines: every implementation of a RunFunc (the protoactor pipeline of
// package baseline, the Go-channels pipeline of the bench program) passes
// Run, and is measured alike by Bench.
package baselinetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/baseline"
)

// RunFunc runs a baseline pipeline once.
type RunFunc func(ctx context.Context, cfg baseline.Config) (baseline.Result, error)

// Run checks run: every record reaches the sink exactly once (the sums equal
// the closed form) at parallelism 1, 2 and 4 and under small windows; the
// linger bounds the latency of a rate-limited source; a run stops promptly
// with its context; bad configs are rejected. Checking for leaked goroutines
// is left to the caller (go.uber.org/goleak).
func Run(t *testing.T, run RunFunc) {
	t.Run("CountsEveryRecord", func(t *testing.T) { countsEveryRecord(t, run) })
	t.Run("SmallWindows", func(t *testing.T) { smallWindows(t, run) })
	t.Run("LatencyAtRate", func(t *testing.T) { latencyAtRate(t, run) })
	t.Run("UnboundedStopsWithContext", func(t *testing.T) { unboundedStopsWithContext(t, run) })
	t.Run("BoundedStopsWithContext", func(t *testing.T) { boundedStopsWithContext(t, run) })
	t.Run("RejectsBadConfig", func(t *testing.T) { rejectsBadConfig(t, run) })
}

// CheckSums fails unless r.Sums is the closed form for r.Records records
// over keys keys, and every record's latency was recorded.
func CheckSums(t testing.TB, r baseline.Result, keys uint64) {
	t.Helper()
	if want := baseline.ExpectedSums(r.Records, keys); !maps.Equal(r.Sums, want) {
		t.Fatalf("sums of %d records over %d keys differ from the closed form (%d keys, want %d)", r.Records, keys, len(r.Sums), len(want))
	}
	if r.Latency == nil {
		t.Fatal("no latency histogram")
	}
	if got := r.Latency.Count(); got != uint64(r.Records) {
		t.Fatalf("latency recorded for %d records, want %d", got, r.Records)
	}
}

// runExactly runs cfg and checks that all of its records arrived exactly once.
func runExactly(t *testing.T, run RunFunc, cfg baseline.Config) baseline.Result {
	t.Helper()
	r, err := run(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != cfg.Records {
		t.Fatalf("the sink saw %d records, want %d", r.Records, cfg.Records)
	}
	full, err := cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	CheckSums(t, r, full.Keys)
	if r.Elapsed <= 0 {
		t.Fatalf("elapsed %v", r.Elapsed)
	}
	return r
}

func countsEveryRecord(t *testing.T, run RunFunc) {
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("P=%d", p), func(t *testing.T) {
			runExactly(t, run, baseline.Config{Parallelism: p, Records: 1_000_000})
		})
	}
}

// smallWindows runs with one-record batches, one credit per channel, odd key
// and record counts, large records, and fewer records than keys.
func smallWindows(t *testing.T, run RunFunc) {
	for _, c := range []baseline.Config{
		{Parallelism: 3, Keys: 7, RecordSize: 100, BatchSize: 1, Credits: 1, Records: 10_001},
		{Parallelism: 5, Keys: 3, BatchSize: 10, Credits: 3, Linger: time.Microsecond, Records: 12_345},
		{Parallelism: 2, Keys: 1000, Records: 10},
	} {
		t.Run(fmt.Sprintf("P=%d,batch=%d,credits=%d,records=%d", c.Parallelism, c.BatchSize, c.Credits, c.Records), func(t *testing.T) {
			runExactly(t, run, c)
		})
	}
}

// latencyAtRate paces the source far below the pipeline's capacity: the
// linger must bound the latency, and the rate limit must hold.
func latencyAtRate(t *testing.T, run RunFunc) {
	r := runExactly(t, run, baseline.Config{Records: 100_000, Rate: 200_000})
	if p99 := r.Latency.Quantile(0.99); p99 >= 50*time.Millisecond {
		t.Fatalf("p99 latency %v at 200k records/s, want below 50ms", p99)
	}
	if r.Elapsed < 400*time.Millisecond { // 100k records at 200k/s take 0.5s
		t.Fatalf("100k records at 200k/s took %v: the rate limit does not hold", r.Elapsed)
	}
	t.Logf("elapsed %v, latency p50 %v p99 %v", r.Elapsed, r.Latency.Quantile(0.5), r.Latency.Quantile(0.99))
}

// unboundedStopsWithContext runs until the context ends: the source stops,
// the pipeline drains, and the run ends promptly with a consistent prefix.
func unboundedStopsWithContext(t *testing.T, run RunFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	r, err := run(ctx, baseline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("the run ended before its context")
	}
	if r.Records == 0 {
		t.Fatal("no record reached the sink")
	}
	CheckSums(t, r, baseline.DefaultKeys)
	deadline, _ := ctx.Deadline()
	if d := time.Since(deadline); d > 2*time.Second {
		t.Fatalf("the run ended %v after its context", d)
	}
}

// boundedStopsWithContext ends a bounded run early: it returns what reached
// the sink and the context's cause.
func boundedStopsWithContext(t *testing.T, run RunFunc) {
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	r, err := run(ctx, baseline.Config{Records: 1 << 50})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	CheckSums(t, r, baseline.DefaultKeys)
}

func rejectsBadConfig(t *testing.T, run RunFunc) {
	for _, bad := range []baseline.Config{
		{Parallelism: -1}, {RecordSize: 8}, {BatchSize: -1}, {Credits: -1},
		{Linger: -time.Second}, {Records: -1}, {Rate: -1},
	} {
		if _, err := run(t.Context(), bad); !errors.Is(err, baseline.ErrConfig) {
			t.Errorf("%+v: err = %v, want ErrConfig", bad, err)
		}
	}
}

// Bench measures run at parallelism 1, 2 and 4 on records 16-byte records
// per iteration and reports records/s (over the runs' Elapsed, which leaves
// out setting up and tearing down the pipeline).
func Bench(b *testing.B, run RunFunc, records int64) {
	for _, p := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			b.ReportAllocs()
			var n int64
			var elapsed time.Duration
			for b.Loop() {
				r, err := run(b.Context(), baseline.Config{Parallelism: p, Records: records})
				if err != nil {
					b.Fatal(err)
				}
				if r.Records != records {
					b.Fatalf("the sink saw %d records, want %d", r.Records, records)
				}
				n += r.Records
				elapsed += r.Elapsed
			}
			b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
		})
	}
}
