package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the bench's child process.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		if err := runChild(context.Background(), os.Args[2]); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// BenchmarkParity runs the parity job over 2M records per iteration with
// checkpoints off, every 100ms and every 20ms, side by side.
func BenchmarkParity(b *testing.B) {
	for _, iv := range []string{"off", "100ms", "20ms"} {
		b.Run(iv, func(b *testing.B) {
			b.ReportAllocs()
			var records int64
			var elapsed time.Duration
			ckpts := 0
			for b.Loop() {
				row, err := runRow(context.Background(), rowConfig{Topology: "paritysum", Mode: "abs", Interval: iv, Parallelism: 2,
					RecordSize: 16, Keys: 1024, Records: 2_000_000, Store: "mem://"})
				if err != nil {
					b.Fatal(err)
				}
				records += row.Records
				elapsed += time.Duration(row.Seconds * float64(time.Second))
				ckpts += row.Checkpoints
			}
			b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(ckpts)/float64(b.N), "checkpoints/op")
		})
	}
}

// TestBenchSmoke keeps the bench program from rotting: a short run of every
// mode writes a table, JSON rows with the documented fields, and a plot.
func TestBenchSmoke(t *testing.T) {
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "rows.json"), filepath.Join(dir, "rows.png")
	args := []string{"-duration", "300ms", "-intervals", "off,20ms", "-json", jsonPath, "-plot", pngPath}
	if err := run(context.Background(), args); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	modes := map[string]bool{}
	for _, r := range rows {
		for _, k := range []string{"topology", "mode", "interval", "records_per_sec", "ckpt_p50_ms", "ckpt_p99_ms", "align_p99_ms", "latency_p99_ms", "peak_rss_bytes"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %s", r, k)
			}
		}
		if r["records_per_sec"].(float64) <= 0 || r["peak_rss_bytes"].(float64) <= 0 {
			t.Errorf("row measured nothing: %v", r)
		}
		if r["mode"] != "protoactor" && r["mode"] != "channels" && r["interval"] == "20ms" && r["checkpoints"].(float64) < 1 {
			t.Errorf("no checkpoint completed at 20ms: %v", r)
		}
		modes[r["mode"].(string)] = true
	}
	for _, m := range []string{"abs", "sync", "protoactor", "channels"} {
		if !modes[m] {
			t.Errorf("no %s row", m)
		}
	}
	if st, err := os.Stat(pngPath); err != nil || st.Size() == 0 {
		t.Fatalf("plot: %v", err)
	}
}
