package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func rowName(r map[string]any) string { return r["mode"].(string) + " " + r["interval"].(string) }

// TestKafkaSmoke runs the kafka rows over a small backlog (-records): every
// row, the plain loop, alo and both eo rows, carried each input record to
// the read_committed output (the eo rows exactly once: a duplicate fails
// the run), and the eo rows committed at a checkpoint, without which
// nothing of theirs would be visible. How fast is the machine's business.
func TestKafkaSmoke(t *testing.T) {
	const records = 10_000
	rows, table := benchRows(t, "-topology", "kafka", "-records", "10000", "-repeat", "1")
	want := []string{"loop off", "alo off", "eo 1s", "eo 100ms"}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %v:\n%s", len(rows), want, table)
	}
	for i, r := range rows {
		name := rowName(r)
		if name != want[i] || r["topology"] != "kafka" {
			t.Errorf("row %d is %s %s, want kafka %s", i, r["topology"], name, want[i])
		}
		if r["records"].(float64) != records {
			t.Errorf("%s: %v records, want %d", name, r["records"], records)
		}
		if v, ok := r["records_per_sec"].(float64); !ok || v <= 0 {
			t.Errorf("%s: records/s %v, want a positive number", name, r["records_per_sec"])
		}
		if _, ok := processCPU(); ok {
			if v, ok := r["cpu_us_per_record"].(float64); !ok || v <= 0 {
				t.Errorf("%s: CPU µs/record %v, want a positive number", name, r["cpu_us_per_record"])
			}
		}
		ckpts := r["checkpoints"].(float64)
		if eo := r["mode"] == kafkaEO; eo != (ckpts > 0) {
			t.Errorf("%s: %v checkpoints: want some for an eo row (its output is visible only once committed), none else", name, ckpts)
		}
		if v, ok := r["bytes_per_ckpt"].(float64); ok != (ckpts > 0) || (ok && v <= 0) {
			t.Errorf("%s: bytes/ckpt %v with %v checkpoints: want a positive number exactly when some completed", name, r["bytes_per_ckpt"], ckpts)
		}
		if _, ok := r["ratio_to_loop"].(float64); ok != (r["mode"] != kafkaLoop) {
			t.Errorf("%s: ratio_to_loop %v: want a ratio for the snapflow rows only", name, r["ratio_to_loop"])
		}
		for _, k := range []string{"latency_p50_ms", "latency_p99_ms"} {
			if r[k] != nil {
				t.Errorf("%s: %s = %v from a backlog, want null", name, k, r[k])
			}
		}
	}
	for _, s := range []string{"% of loop", "kafka: on kfake"} {
		if !strings.Contains(table, s) {
			t.Errorf("the table lacks %q:\n%s", s, table)
		}
	}
}

// TestKafkaRateSmoke runs kafka rows with their input produced at a rate
// for a short window: each row ends (the sentinels are seen), has a
// latency exactly when records were counted in its window, and writes the
// CPU profile of its window.
func TestKafkaRateSmoke(t *testing.T) {
	prof := t.TempDir()
	rows, table := benchRows(t, "-topology", "kafka", "-modes", "loop,eo", "-intervals", "100ms", "-rate", "2000",
		"-duration", "400ms", "-repeat", "1", "-cpuprofile", prof)
	if len(rows) != 2 || rowName(rows[0]) != "loop off" || rowName(rows[1]) != "eo 100ms" {
		t.Fatalf("rows %v, want loop and eo 100ms:\n%s", rows, table)
	}
	for _, r := range rows {
		name := rowName(r)
		if r["rate"].(float64) != 2000 {
			t.Errorf("%s: rate %v, want 2000", name, r["rate"])
		}
		counted := r["records"].(float64) > 0
		for _, k := range []string{"latency_p50_ms", "latency_p99_ms"} {
			if _, ok := r[k].(float64); ok != counted {
				t.Errorf("%s: %s = %v with %v records: want a latency exactly when records were counted", name, k, r[k], r["records"])
			}
		}
		if r["ratio_to_loop"] != nil || r["ratio_to_off"] != nil {
			t.Errorf("%s: ratios %v, %v for a throttled row, want null", name, r["ratio_to_loop"], r["ratio_to_off"])
		}
	}
	for _, p := range []string{"kafka-loop-none-rate2000-run1.pprof", "kafka-eo-100ms-rate2000-run1.pprof"} {
		if st, err := os.Stat(filepath.Join(prof, p)); err != nil || st.Size() == 0 {
			t.Errorf("no CPU profile %s: %v", p, err)
		}
	}
	if !strings.Contains(table, "offered/s") {
		t.Errorf("no offered/s column:\n%s", table)
	}
}

// TestPlanKafka: -topology kafka reads the default -modes and -intervals
// as its own, skips an eo row with checkpoints off, and refuses the modes
// of the other topologies and the sweeps.
func TestPlanKafka(t *testing.T) {
	f, err := parseFlags([]string{"-topology", "kafka"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	rcs, err := plan(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rc := range rcs {
		got = append(got, rc.Mode+" "+rc.Interval)
	}
	if strings.Join(got, ",") != "loop off,alo off,eo 1s,eo 100ms" {
		t.Errorf("default kafka rows %v", got)
	}
	f.modes, f.intervals = "eo", "off,20ms"
	if rcs, err := plan(f); err != nil || len(rcs) != 1 || rcs[0].Interval != "20ms" {
		t.Errorf("-modes eo -intervals off,20ms: %+v, %v; want one eo row at 20ms", rcs, err)
	}
	for _, bad := range []flags{
		{topology: "kafka", modes: "abs", intervals: "1s"},
		{topology: "kafka", modes: "eo", intervals: "off"},
		{topology: "kafka", modes: defaultModes, intervals: defaultIntervals, sweep: "latency"},
	} {
		bad.parallelism, bad.recordSize, bad.keys, bad.duration, bad.repeat = 2, 16, 1, time.Second, 1
		if _, err := plan(bad); !errors.Is(err, errUsage) {
			t.Errorf("%+v: %v, want a usage error", bad, err)
		}
	}
}

// TestKafkaRatiosAndLatencyRows: an unthrottled snapflow row is compared
// with the loop and the alo row, a throttled one with nothing; the latency
// rows offer a tenth of the slowest row's records/s, and there are none
// when a row measured nothing.
func TestKafkaRatiosAndLatencyRows(t *testing.T) {
	row := func(mode, iv string, rate, v float64) Row {
		return Row{rowConfig: rowConfig{Topology: "kafka", Mode: mode, Interval: iv, Parallelism: 2, Rate: rate}, RecordsPerSec: measured(v)}
	}
	rows := []Row{row("loop", "off", 0, 1000), row("alo", "off", 0, 800), row("eo", "1s", 0, 600), row("eo", "1s", 50, 50)}
	ratios(rows)
	for i, want := range []struct{ loop, off float64 }{{0, 0}, {0.8, 1}, {0.6, 0.75}, {0, 0}} {
		if rows[i].RatioToLoop.or(0) != want.loop || rows[i].RatioToOff.or(0) != want.off {
			t.Errorf("%s %s rate %v: ratios to loop %+v and off %+v, want %v and %v", rows[i].Mode, rows[i].Interval, rows[i].Rate,
				rows[i].RatioToLoop, rows[i].RatioToOff, want.loop, want.off)
		}
	}
	more := kafkaLatencyRows(&bytes.Buffer{}, rows[:3])
	if len(more) != 3 || more[0].Mode != "loop" || more[2].Interval != "1s" {
		t.Fatalf("latency rows %+v", more)
	}
	for _, rc := range more {
		if rc.Rate != 60 {
			t.Errorf("%s: rate %v, want 60 (a tenth of the slowest, 600)", rc.Mode, rc.Rate)
		}
	}
	rows[1].RecordsPerSec = metric{}
	var progress bytes.Buffer
	if more := kafkaLatencyRows(&progress, rows[:3]); len(more) != 0 || !strings.Contains(progress.String(), "not measured") {
		t.Errorf("latency rows %+v from a row not measured; progress %q", more, progress.String())
	}
}

// TestKafkaRowRanOut: a backlog that ran out before the window closed
// makes the row an error rather than a low records/s.
func TestKafkaRowRanOut(t *testing.T) {
	rc := rowConfig{Topology: "kafka", Mode: "alo", Interval: "off", Duration: time.Second}
	w := kafkaWindow{from: 1e9, to: 2e9, want: 1000, sentinel: true}
	p := &kafkaPipeline{}
	if _, err := kafkaRow(rc, time.Unix(0, 0), w, kafkaReading{counted: 900, lastProc: 1.5e9}, p); err == nil || !strings.Contains(err.Error(), "ran out") {
		t.Errorf("a backlog processed to the middle of the window: %v, want it ran out", err)
	}
	row, err := kafkaRow(rc, time.Unix(0, 0), w, kafkaReading{counted: 900, lastProc: 2.1e9}, p)
	if err != nil || row.RecordsPerSec.or(0) != 900 {
		t.Errorf("a backlog processed past the window: %+v, %v; want 900 records/s", row.RecordsPerSec, err)
	}
}
