package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snapflow/snapflow/actors/baseline"
)

// checkChannelSums fails unless r.Sums is the closed form for r.Records
// records and every record's latency was recorded.
func checkChannelSums(t *testing.T, r baseline.Result, keys uint64) {
	t.Helper()
	if want := baseline.ExpectedSums(r.Records, keys); !maps.Equal(r.Sums, want) {
		t.Fatalf("sums of %d records over %d keys differ from the closed form (%d keys, want %d)", r.Records, keys, len(r.Sums), len(want))
	}
	if got := r.Latency.Count(); got != uint64(r.Records) {
		t.Fatalf("latency recorded for %d records, want %d", got, r.Records)
	}
}

func TestChannelsCountEveryRecord(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, p := range []int{1, 2, 4} {
		t.Run(fmt.Sprintf("P=%d", p), func(t *testing.T) {
			const n = 1_000_000
			r, err := runChannels(t.Context(), baseline.Config{Parallelism: p, Records: n})
			if err != nil {
				t.Fatal(err)
			}
			if r.Records != n {
				t.Fatalf("the sink saw %d records, want %d", r.Records, n)
			}
			checkChannelSums(t, r, baseline.DefaultKeys)
			if r.Elapsed <= 0 {
				t.Fatalf("elapsed %v", r.Elapsed)
			}
		})
	}
}

// TestChannelsSmallWindows runs with one-record batches, one batch per
// channel, odd key and record counts and large records.
func TestChannelsSmallWindows(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, c := range []baseline.Config{
		{Parallelism: 3, Keys: 7, RecordSize: 100, BatchSize: 1, Credits: 1, Records: 10_001},
		{Parallelism: 5, Keys: 3, BatchSize: 10, Credits: 2, Linger: time.Microsecond, Records: 12_345},
		{Parallelism: 2, Keys: 1000, Records: 10},
	} {
		t.Run(fmt.Sprintf("%+v", c), func(t *testing.T) {
			r, err := runChannels(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if r.Records != c.Records {
				t.Fatalf("the sink saw %d records, want %d", r.Records, c.Records)
			}
			checkChannelSums(t, r, c.Keys)
		})
	}
}

// TestChannelsLatencyAtRate checks that the linger bounds the latency of a
// source far below the pipeline's capacity.
func TestChannelsLatencyAtRate(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 100_000
	r, err := runChannels(t.Context(), baseline.Config{Records: n, Rate: 200_000})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != n {
		t.Fatalf("the sink saw %d records, want %d", r.Records, n)
	}
	checkChannelSums(t, r, baseline.DefaultKeys)
	if p99 := r.Latency.Quantile(0.99); p99 >= 50*time.Millisecond {
		t.Fatalf("p99 latency %v at 200k records/s, want below 50ms", p99)
	}
	if r.Elapsed < 400*time.Millisecond {
		t.Fatalf("100k records at 200k/s took %v: the rate limit does not hold", r.Elapsed)
	}
	t.Logf("elapsed %v, latency p50 %v p99 %v", r.Elapsed, r.Latency.Quantile(0.5), r.Latency.Quantile(0.99))
}

// TestChannelsUnboundedStopsWithContext runs until the context ends: the
// source stops, the pipeline drains and the run ends promptly.
func TestChannelsUnboundedStopsWithContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	r, err := runChannels(ctx, baseline.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if ctx.Err() == nil {
		t.Fatal("the run ended before its context")
	}
	if r.Records == 0 {
		t.Fatal("no record reached the sink")
	}
	checkChannelSums(t, r, baseline.DefaultKeys)
	deadline, _ := ctx.Deadline()
	if d := time.Since(deadline); d > 2*time.Second {
		t.Fatalf("the run ended %v after its context", d)
	}
}

// TestChannelsBoundedStopsWithContext ends a bounded run early: it returns
// what reached the sink and the context's cause.
func TestChannelsBoundedStopsWithContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	r, err := runChannels(ctx, baseline.Config{Records: 1 << 50})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the context's deadline", err)
	}
	checkChannelSums(t, r, baseline.DefaultKeys)
}

func TestChannelsRejectsBadConfig(t *testing.T) {
	if _, err := runChannels(t.Context(), baseline.Config{Credits: -1}); !errors.Is(err, baseline.ErrConfig) {
		t.Fatalf("err = %v, want ErrConfig", err)
	}
}

// BenchmarkChannels runs 2M 16-byte records per iteration through the
// channels pipeline at parallelism 1, 2 and 4.
func BenchmarkChannels(b *testing.B) {
	for _, p := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("P=%d", p), func(b *testing.B) {
			const n = 2_000_000
			b.ReportAllocs()
			var records int64
			var elapsed time.Duration
			for b.Loop() {
				r, err := runChannels(b.Context(), baseline.Config{Parallelism: p, Records: n})
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
