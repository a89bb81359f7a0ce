package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
)

// TestMonitoringSweepSmoke: -sweep monitoring runs each row with and
// without the server, and a monitored row reports its ratio to the
// unmonitored one; the watchers must have polled the server (or the row
// fails).
func TestMonitoringSweepSmoke(t *testing.T) {
	rows, out := benchRows(t, "-sweep", "monitoring", "-records", "20000", "-repeat", "1")
	if len(rows) != 4 {
		t.Fatalf("%d rows, want 4 (off and 100ms, with and without monitoring)", len(rows))
	}
	monitored := 0
	for _, r := range rows {
		if r["records"].(float64) < 20000 {
			t.Errorf("row %v: %v records", r["interval"], r["records"])
		}
		ratio, hasRatio := r["ratio_to_unmonitored"].(float64)
		if m, _ := r["monitored"].(bool); m {
			monitored++
			if !hasRatio || ratio <= 0 {
				t.Errorf("monitored row %v: ratio_to_unmonitored %v", r["interval"], r["ratio_to_unmonitored"])
			}
		} else if hasRatio {
			t.Errorf("unmonitored row %v has ratio_to_unmonitored %v", r["interval"], ratio)
		}
	}
	if monitored != 2 {
		t.Errorf("%d monitored rows, want 2", monitored)
	}
	if !strings.Contains(out, "abs+mon") || !strings.Contains(out, "% of unmonitored") {
		t.Errorf("table:\n%s", out)
	}
}

// BenchmarkMonitoringPoll measures one round of what a monitored row's
// watchers ask each second (a /metrics scrape and three API polls) against
// a running paritysum job with checkpoints every 100ms: the CPU it costs
// is the monitoring's share of the machine at one round per second. It
// reports that share of one core ("core-%@1Hz"), which noise on a shared
// machine cannot hide the way it hides a few percent of records/s.
func BenchmarkMonitoringPoll(b *testing.B) {
	rc := rowConfig{Topology: "paritysum", Mode: "abs", Interval: "100ms", Parallelism: 2, RecordSize: 16, Keys: 1024, Rate: 1e6}
	var p probe
	g, err := buildJob("bench-poll", rc, &p)
	if err != nil {
		b.Fatal(err)
	}
	mon, err := startMonitoring(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	job, err := actors.Start(context.Background(), g, append(mon.srv.Options(), actors.WithStore(snapshots.NewMem()),
		actors.WithCheckpointInterval(100*time.Millisecond))...)
	if err != nil {
		b.Fatal(err)
	}
	defer job.Stop()
	mon.srv.Attach(job)
	defer mon.srv.Close()
	if _, err := job.Checkpoint(context.Background()); err != nil {
		b.Fatal(err)
	}
	base := mon.srv.URL()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, path := range []string{"/metrics", "/api/v1/job", "/api/v1/checkpoints?limit=20", "/api/v1/timeline?limit=20"} {
			if err := get(ctx, base+path); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e9*100, "core-%@1Hz")
}
