package main

import (
	"context"
	"testing"
	"time"

	"github.com/snapflow/snapflow/snapshots"
)

// BenchmarkParity runs the parity job over 2M records per iteration with
// checkpoints off and every 100ms, side by side.
func BenchmarkParity(b *testing.B) {
	const n = 2_000_000
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"off", 0}, {"100ms", 100 * time.Millisecond}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			var total parityResult
			for b.Loop() {
				r, err := runParity(context.Background(), n, c.interval, snapshots.NewMem())
				if err != nil {
					b.Fatal(err)
				}
				if r.records != n {
					b.Fatalf("sink saw %d records, want %d", r.records, n)
				}
				total.records += r.records
				total.elapsed += r.elapsed
				total.checkpoints += r.checkpoints
			}
			b.ReportMetric(total.recordsPerSec(), "records/s")
			b.ReportMetric(float64(total.checkpoints)/float64(b.N), "checkpoints/op")
		})
	}
}

// TestBenchSmoke keeps the bench program from rotting: a short run of every
// interval must count every record.
func TestBenchSmoke(t *testing.T) {
	if err := run(50_000, "off,100ms,20ms", 1); err != nil {
		t.Fatal(err)
	}
}
