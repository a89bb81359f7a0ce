package main

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the bench's child process, and as
// the bench program itself when BENCH_TEST_MAIN is set (to check its exit
// codes).
func TestMain(m *testing.M) {
	if os.Getenv("BENCH_TEST_MAIN") != "" {
		main()
	}
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		if err := runChild(context.Background(), os.Args[2], os.Stdout); err != nil {
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
			benchParity(b, rowConfig{Topology: "paritysum", Mode: "abs", Interval: iv, Parallelism: 2,
				RecordSize: 16, Keys: 1024, Records: 2_000_000, Store: "mem://"})
		})
	}
}

// BenchmarkCheckpointModes runs the parity job over 16M records per
// iteration (several checkpoints each) with checkpoints every 100ms in each
// checkpoint mode, side by side: what a mode costs without a slow consumer
// (issue 26 asks unaligned for at least 0.97x of aligned).
func BenchmarkCheckpointModes(b *testing.B) {
	for _, m := range checkpointModes {
		b.Run(m, func(b *testing.B) {
			benchParity(b, rowConfig{Topology: "paritysum", Mode: "abs", Interval: "100ms", Parallelism: 2,
				RecordSize: 16, Keys: 1024, Records: 16_000_000, Store: "mem://", CheckpointMode: m})
		})
	}
}

// benchParity runs rc per iteration and reports records/s over the rows'
// measured time and checkpoints per run.
func benchParity(b *testing.B, rc rowConfig) {
	b.ReportAllocs()
	var records int64
	var elapsed time.Duration
	ckpts := 0
	for b.Loop() {
		row, err := runRow(context.Background(), rc)
		if err != nil {
			b.Fatal(err)
		}
		records += row.Records
		elapsed += time.Duration(row.Seconds * float64(time.Second))
		ckpts += row.Checkpoints
	}
	if elapsed > 0 {
		b.ReportMetric(float64(records)/elapsed.Seconds(), "records/s")
	}
	b.ReportMetric(float64(ckpts)/float64(b.N), "checkpoints/op")
}

// TestBenchSmoke keeps the bench program from rotting: a run of every mode
// (cluster rows start a coordinator and two workers, this test binary too)
// writes a table, JSON rows with the documented fields, and a plot. Each row
// runs a fixed number of records, so that what it checks holds however slow
// the machine: every row carried exactly those records, and a figure is
// either measured or null, never NaN. How fast, and how many periodic
// checkpoints completed, is the machine's business.
func TestBenchSmoke(t *testing.T) {
	const records = 25_600 + 100 // not a multiple of the sink's reporting batch
	dir := t.TempDir()
	jsonPath, pngPath := filepath.Join(dir, "rows.json"), filepath.Join(dir, "rows.png")
	args := []string{"-records", strconv.Itoa(records), "-repeat", "1", "-intervals", "off,20ms", "-json", jsonPath, "-plot", pngPath}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
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
		for _, k := range []string{"topology", "mode", "interval", "runs", "records", "records_per_sec", "ratio_to_off", "checkpoints",
			"ckpt_p50_ms", "ckpt_p99_ms", "align_p99_ms", "bytes_per_ckpt", "latency_p50_ms", "latency_p99_ms", "peak_rss_bytes"} {
			if _, ok := r[k]; !ok {
				t.Errorf("row %v lacks %s", r, k)
			}
		}
		mode := r["mode"].(string)
		modes[mode] = true
		if r["records"].(float64) != records || r["runs"].(float64) != 1 {
			t.Errorf("%s row: %v records in %v runs, want %d in 1", mode, r["records"], r["runs"], records)
		}
		for _, k := range []string{"records_per_sec", "latency_p50_ms", "latency_p99_ms"} {
			if v, ok := r[k].(float64); !ok || v <= 0 {
				t.Errorf("%s row: %s = %v, want a positive number for %d records", mode, k, r[k], records)
			}
		}
		baseline := mode == "protoactor" || mode == "channels"
		if _, ok := r["ratio_to_in_process"].(float64); ok != (mode == "cluster") {
			t.Errorf("%s row: ratio_to_in_process = %v: want a ratio for cluster rows only", mode, r["ratio_to_in_process"])
		}
		if v, ok := r["wire_bytes_per_record"].(float64); ok != (mode == "cluster") || (ok && v <= 0) {
			t.Errorf("%s row: wire_bytes_per_record = %v: want a positive number for cluster rows only", mode, r["wire_bytes_per_record"])
		}
		if _, ok := r["ratio_to_off"].(float64); ok == baseline {
			t.Errorf("%s row: ratio_to_off = %v: want a ratio for snapflow rows and null for baselines", mode, r["ratio_to_off"])
		}
		ckpts := r["checkpoints"].(float64)
		for _, k := range []string{"ckpt_p50_ms", "ckpt_p99_ms", "align_p99_ms", "bytes_per_ckpt"} {
			if _, ok := r[k].(float64); ok != (ckpts > 0) {
				t.Errorf("%s row: %s = %v with %v checkpoints: want a number exactly when a checkpoint completed", mode, k, r[k], ckpts)
			}
		}
		if _, err := os.Stat("/proc/self/status"); err == nil && r["peak_rss_bytes"].(float64) <= 0 {
			t.Errorf("%s row: no peak RSS", mode)
		}
		t.Logf("%s %s: %v records/s, %v checkpoints", mode, r["interval"], r["records_per_sec"], ckpts)
	}
	for _, m := range []string{"abs", "sync", "cluster", "protoactor", "channels"} {
		if !modes[m] {
			t.Errorf("no %s row", m)
		}
	}
	table := stdout.String()
	if !strings.Contains(table, "records/s") || strings.Count(table, "paritysum") != len(rows) {
		t.Errorf("table:\n%s", table)
	}
	for _, bad := range []string{"NaN", "Inf", "rate=0"} {
		if strings.Contains(table, bad) || strings.Contains(stderr.String(), bad) {
			t.Errorf("output has %q:\n%s\n%s", bad, table, stderr.String())
		}
	}
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatalf("plot: %v", err)
	}
	defer f.Close()
	if _, err := png.DecodeConfig(f); err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
}

// TestNoRecordsIsNotNaN runs the command of the report, a baseline for 10ms:
// on a busy machine no record may reach the sink in that time, and the row
// must then say "not measured" rather than fail on NaN.
func TestNoRecordsIsNotNaN(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "rows.json")
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), []string{"-duration", "10ms", "-modes", "protoactor", "-repeat", "1", "-json", jsonPath}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []Row
	if err := json.Unmarshal(b, &rows); err != nil || len(rows) != 1 {
		t.Fatalf("rows %s: %v", b, err)
	}
	if _, ok := rows[0].RecordsPerSec.value(); ok != (rows[0].Records > 0) {
		t.Errorf("records/s %+v for %d records", rows[0].RecordsPerSec, rows[0].Records)
	}
	t.Logf("%s", stdout.String())
}
