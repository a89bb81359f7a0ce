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

	"github.com/snapflow/snapflow/bench/baseline"
)

// RunFunc runs a baseline pipeline once.
type RunFunc func(ctx context.Context, cfg baseline.Config) (baseline.Result, error)

// Run checks run: every record reaches the sink exactly once (the sums equal
// the closed form) at parallelism 1, 2 and 4 and under small windows; a
// rate-limited source never runs ahead of its rate; a run stops with its
// context, with what reached the sink forming a consistent prefix; bad
// configs are rejected. No check depends on the machine's speed: nothing is
// bounded from above in time, so the suite holds on a loaded machine.
// Checking for leaked goroutines is left to the caller (go.uber.org/goleak).
func Run(t *testing.T, run RunFunc) {
	t.Run("CountsEveryRecord", func(t *testing.T) { countsEveryRecord(t, run) })
	t.Run("SmallWindows", func(t *testing.T) { smallWindows(t, run) })
	t.Run("RateLimitHolds", func(t *testing.T) { rateLimitHolds(t, run) })
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
	if r.Elapsed < 0 {
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

// rateLimitHolds paces the source: its last batch is not due before
// (records-batch)/rate after its first, so the run cannot take less, however
// fast the machine (a slow one only takes longer, which is not checked).
func rateLimitHolds(t *testing.T, run RunFunc) {
	cfg := baseline.Config{Records: 100_000, Rate: 200_000}
	r := runExactly(t, run, cfg)
	full, err := cfg.WithDefaults()
	if err != nil {
		t.Fatal(err)
	}
	lastDue := time.Duration(float64(full.Records-int64(full.BatchSize)) / full.Rate * float64(time.Second))
	if r.Elapsed < lastDue {
		t.Fatalf("%d records at %.0f/s took %v, less than the %v the rate allows: the rate limit does not hold", full.Records, full.Rate, r.Elapsed, lastDue)
	}
	t.Logf("elapsed %v, latency p50 %v p99 %v", r.Elapsed, r.Latency.Quantile(0.5), r.Latency.Quantile(0.99))
}

// unboundedStopsWithContext runs until the context ends: the source stops,
// the pipeline drains, and the run ends with a consistent prefix. A loaded
// machine may end a short context before the first record is generated, so
// the context's time doubles until a run has carried records (from 50ms; at
// most about 50s in all): an empty prefix is consistent too, but checks
// little.
func unboundedStopsWithContext(t *testing.T, run RunFunc) {
	for d := 50 * time.Millisecond; ; d *= 2 {
		ctx, cancel := context.WithTimeout(t.Context(), d)
		r, err := run(ctx, baseline.Config{})
		ended := ctx.Err()
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if ended == nil {
			t.Fatal("the run ended before its context")
		}
		CheckSums(t, r, baseline.DefaultKeys)
		if r.Records > 0 {
			t.Logf("a run of %v carried %d records", d, r.Records)
			return
		}
		if d > 20*time.Second {
			t.Fatalf("no record reached the sink in a run of %v", d)
		}
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
			if elapsed > 0 {
				b.ReportMetric(float64(n)/elapsed.Seconds(), "records/s")
			}
		})
	}
}
