package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/bench/baseline"
	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/snapflow/snapflow/snapshots"
)

func TestThousands(t *testing.T) {
	for _, c := range []struct {
		v        float64
		decimals int
		want     string
	}{
		{0, 0, "0"}, {999, 0, "999"}, {1000, 0, "1,000"}, {12853848, 0, "12,853,848"}, {123456.789, 2, "123,456.79"},
		{-1234567, 0, "-1,234,567"}, {0.5, 2, "0.50"}, {100000, 1, "100,000.0"},
	} {
		if got := thousands(c.v, c.decimals); got != c.want {
			t.Errorf("thousands(%v, %d) = %q, want %q", c.v, c.decimals, got, c.want)
		}
	}
}

// TestMetricJSON: what was not measured (0 records in 0 s, NaN, Inf) is
// null, never NaN, and reads back as not measured.
func TestMetricJSON(t *testing.T) {
	for _, c := range []struct {
		m    metric
		want string
	}{
		{per(0, 0), "null"}, {per(5, 0), "null"}, {per(0, 2), "0"}, {per(10, 4), "2.5"},
		{measured(math.NaN()), "null"}, {measured(math.Inf(1)), "null"}, {metric{}, "null"}, {msOf(1500), "0.001"},
		{measured(12853847.71401543), "12853847.71401543"},
	} {
		b, err := json.Marshal(c.m)
		if err != nil || string(b) != c.want {
			t.Errorf("%+v: json %s, %v; want %s", c.m, b, err, c.want)
			continue
		}
		var back metric
		if err := json.Unmarshal(b, &back); err != nil || back != c.m {
			t.Errorf("%s read back as %+v, %v; want %+v", b, back, err, c.m)
		}
	}
	if err := json.Unmarshal([]byte(`"x"`), new(metric)); err == nil {
		t.Error("a string read as a metric")
	}
}

// TestEmptyBaselineRow is the row of a baseline that carried no record in
// no time (the failing `-duration 10ms -modes protoactor`): it serialises,
// with its throughput and latencies null, and prints as "–".
func TestEmptyBaselineRow(t *testing.T) {
	row := baselineRow(baseline.Result{Latency: &benchwork.Histogram{}})
	row.rowConfig = rowConfig{Topology: "paritysum", Mode: "protoactor", Interval: "off", Parallelism: 2}
	b, err := json.Marshal(row)
	if err != nil {
		t.Fatalf("json: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"records_per_sec", "latency_p50_ms", "latency_p99_ms"} {
		if m[k] != nil {
			t.Errorf("%s = %v, want null", k, m[k])
		}
	}
	if got := cell(t, row, "records/s"); got != notMeasured {
		t.Errorf("records/s cell %q, want %q", got, notMeasured)
	}
	if got := cell(t, row, "latency p50/p99 ms"); got != notMeasured {
		t.Errorf("latency cell %q, want %q", got, notMeasured)
	}
}

// cell is the cell of row r in the column named name.
func cell(t *testing.T, r Row, name string) string {
	t.Helper()
	for _, c := range columns {
		if c.name == name {
			return c.cell(r)
		}
	}
	t.Fatalf("no column %q", name)
	return ""
}

// TestTableCells: "–" for what does not apply or was not measured, numbers
// with thousands separators, and no ratio to snapflow for a baseline.
func TestTableCells(t *testing.T) {
	rows := []Row{
		{rowConfig: rowConfig{Topology: "paritysum", Mode: "abs", Interval: "off", Parallelism: 2}, RecordsPerSec: measured(12853848),
			LatencyP50Ms: measured(0.21), LatencyP99Ms: measured(0.62), PeakRSSBytes: 26 << 20},
		{rowConfig: rowConfig{Topology: "paritysum", Mode: "abs", Interval: "20ms", Parallelism: 2, StateSize: 16384}, RecordsPerSec: measured(13033258),
			Spread: measured(0.0412), Checkpoints: 1199, CkptP50Ms: measured(0.76), CkptP99Ms: measured(1234.5), AlignP50Ms: measured(0),
			AlignP99Ms: measured(0.9), BytesPerCkpt: measured(24395), LatencyP50Ms: measured(0.22), LatencyP99Ms: measured(0.62)},
		{rowConfig: rowConfig{Topology: "paritysum", Mode: "sync", Interval: "20ms", Parallelism: 2}, RecordsPerSec: measured(0)},
		{rowConfig: rowConfig{Topology: "paritysum", Mode: "protoactor", Interval: "off", Parallelism: 2}, RecordsPerSec: measured(25943875),
			LatencyP50Ms: measured(0.11), LatencyP99Ms: measured(0.31)},
	}
	ratios(rows)
	want := map[string][]string{ // column: cells of the rows above
		"interval":           {"off", "20ms", "20ms", "–"},
		"state/key B":        {"0", "16,384", "0", "–"},
		"records/s":          {"12,853,848", "13,033,258", "0", "25,943,875"},
		"spread":             {"–", "4.1%", "–", "–"},
		"% of off":           {"100.0%", "–", "0.0%", "–"},
		"ckpts":              {"–", "1,199", "0", "–"},
		"ckpt p50/p99 ms":    {"–", "0.76 / 1,234.50", "–", "–"},
		"align p50/p99 ms":   {"–", "0.00 / 0.90", "–", "–"},
		"bytes/ckpt":         {"–", "24,395", "–", "–"},
		"latency p50/p99 ms": {"0.21 / 0.62", "0.22 / 0.62", "–", "0.11 / 0.31"},
		"peak RSS MiB":       {"26.0", "–", "–", "–"},
		"recovery ms":        {"–", "–", "–", "–"},
		"offered/s":          {"–", "–", "–", "–"},
	}
	for name, cells := range want {
		for i, r := range rows {
			if got := cell(t, r, name); got != cells[i] {
				t.Errorf("%s %s, column %q: %q, want %q", r.Mode, r.Interval, name, got, cells[i])
			}
		}
	}
	var out bytes.Buffer
	if err := printTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.Contains(s, "NaN") || !strings.Contains(s, "–: does not apply") || strings.Count(s, "\n") != len(rows)+1+strings.Count(tableNote, "\n") {
		t.Errorf("table:\n%s", s)
	}
	for _, col := range []string{"recovery", "offered", "sink limit"} {
		if strings.Contains(s, col) {
			t.Errorf("a %s column with no value in it:\n%s", col, s)
		}
	}
	rows[1].RecoveryMs = measured(192.84)
	rows[2].SinkRate = 1192879.4
	out.Reset()
	if err := printTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "recovery ms") || !strings.Contains(s, "192.8") || !strings.Contains(s, "1,192,879") || strings.Contains(s, "offered") {
		t.Errorf("no recovery or sink limit column, or an empty offered column:\n%s", s)
	}
	rows[2].SinkRate, rows[2].SinkPaceEvery = 1000, 1
	out.Reset()
	if err := printTable(&out, rows); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "1,000 (sleeps per record)") {
		t.Errorf("a sink sleeping per record is not told apart:\n%s", s)
	}
}

// TestDescribe: progress lines leave out what is unset.
func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		rc   rowConfig
		want string
	}{
		{rowConfig{Topology: "paritysum", Mode: "abs", Interval: "off", Parallelism: 2}, "paritysum abs interval=off p=2"},
		{rowConfig{Topology: "paritysum", Mode: "protoactor", Interval: "off", Parallelism: 2}, "paritysum protoactor p=2"},
		{rowConfig{Topology: "fanin-4", Mode: "sync", Interval: "100ms", Parallelism: 1, StateSize: 16384, Rate: 5e6, SinkRate: 1250000.4, Recovery: true},
			"fanin-4 sync interval=100ms p=1 state=16,384B/key rate=5,000,000/s sink-rate=1,250,000/s recovery"},
	} {
		if got := describe(c.rc); got != c.want {
			t.Errorf("describe = %q, want %q", got, c.want)
		}
	}
}

// TestMedianAndSpread: the lower median by records/s, runs not measured
// ranking lowest, and the spread over the measured runs.
func TestMedianAndSpread(t *testing.T) {
	rs := []Row{{RecordsPerSec: measured(120)}, {RecordsPerSec: metric{}}, {RecordsPerSec: measured(100)}, {RecordsPerSec: measured(80)}}
	m := median(rs)
	if v, _ := m.RecordsPerSec.value(); v != 80 || m.Runs != 4 {
		t.Fatalf("median %+v, want 80 records/s of 4 runs", m)
	}
	if s, ok := m.Spread.value(); !ok || s != 0.5 {
		t.Fatalf("spread %+v, want (120-80)/80", m.Spread)
	}
	one := median([]Row{{RecordsPerSec: measured(7)}})
	if _, ok := one.Spread.value(); ok || one.Runs != 1 {
		t.Fatalf("one run: %+v, want no spread", one)
	}
	none := median([]Row{{}, {}})
	if _, ok := none.RecordsPerSec.value(); ok {
		t.Fatalf("no run measured: %+v", none)
	}
}

// TestFollowUpsNeedAMeasuredRate: a sweep cannot derive its second row's
// rate from a first row that measured nothing (a rate of 0 would mean
// unlimited).
func TestFollowUpsNeedAMeasuredRate(t *testing.T) {
	var progress bytes.Buffer
	first := Row{rowConfig: rowConfig{Topology: "paritysum", Mode: "abs", Interval: "100ms"}}
	if more := followUps(&progress, "latency", first); len(more) != 0 || !strings.Contains(progress.String(), "not measured") {
		t.Fatalf("follow-ups %+v, progress %q", more, progress.String())
	}
	first.RecordsPerSec = measured(1000)
	if more := followUps(&progress, "latency", first); len(more) != 1 || more[0].Rate != 500 {
		t.Fatalf("latency follow-ups %+v", more)
	}
	if more := followUps(&progress, "backpressure", first); len(more) != 1 || more[0].SinkRate != 100 {
		t.Fatalf("backpressure follow-ups %+v", more)
	} // Four modes each: unthrottled, behind the slow sink, with a failure
	// there, the skewed union, behind a sink 1,000 times slower, and behind
	// a sink of 1 ms per record, measured for at least flinkSinkWindow.
	more := followUps(&progress, "backpressure-checkpoints", first)
	shapes := map[string]int{}
	for _, r := range more {
		shapes[fmt.Sprintf("%s sink=%v every=%d recovery=%v", r.Topology, r.SinkRate, r.SinkPaceEvery, r.Recovery)]++
		if r.SinkPaceEvery == 1 && r.Duration < flinkSinkWindow {
			t.Errorf("row behind the sink of 1 ms per record measured for %v", r.Duration)
		}
	}
	want := map[string]int{"paritysum sink=0 every=0 recovery=false": 4, "paritysum sink=100 every=0 recovery=false": 4,
		"paritysum sink=100 every=0 recovery=true": 4, "union-skewed sink=100 every=0 recovery=false": 4,
		"paritysum sink=1 every=0 recovery=false": 4, "paritysum sink=1000 every=1 recovery=false": 4}
	if fmt.Sprint(shapes) != fmt.Sprint(want) {
		t.Fatalf("backpressure-checkpoints follow-ups by shape %v, want %v", shapes, want)
	}
	// A bounded run (-records) leaves out the sink of 1 ms per record,
	// which would take records/1,000 s.
	first.rowConfig.Records = 2_000_000
	progress.Reset()
	for _, r := range followUps(&progress, "backpressure-checkpoints", first) {
		if r.SinkPaceEvery == 1 {
			t.Fatalf("a bounded sweep runs the sink of 1 ms per record: %+v", r)
		}
	}
	if !strings.Contains(progress.String(), "left out with -records") {
		t.Errorf("progress %q does not say the rows were left out", progress.String())
	}
}

// TestHelpExitsZero runs the program as a user does: -h prints the usage and
// exits 0; a bad flag or value exits 2 and a good command line runs.
func TestHelpExitsZero(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"-h"}, 0, "-repeat int"},
		{[]string{"-help"}, 0, "median"},
		{[]string{"-no-such-flag"}, 2, "flag provided but not defined"},
		{[]string{"-modes", "nope"}, 2, `unknown mode "nope"`},
		{[]string{"stray"}, 2, "unexpected arguments"},
		{[]string{"-from", "no-such-file.json"}, 1, "bench: -from: open no-such-file.json"},
	} {
		cmd := exec.Command(os.Args[0], c.args...)
		cmd.Env = append(os.Environ(), "BENCH_TEST_MAIN=1")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code || !strings.Contains(stderr.String(), c.out) || strings.Contains(stderr.String(), "bench: bench:") {
			t.Errorf("bench %s: exit %d, want %d, with %q in:\n%s", strings.Join(c.args, " "), code, c.code, c.out, stderr.String())
		}
	}
	if err := run(context.Background(), []string{"-h"}, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, flag.ErrHelp) || exitCode(err, &bytes.Buffer{}) != 0 {
		t.Errorf("run -h: %v", err)
	}
}

// TestPlotLegendCoversNoData draws the plot of a full run and checks that
// the legend lies outside both plotting areas.
func TestPlotLegendCoversNoData(t *testing.T) {
	var rows []Row
	for i, iv := range []string{"off", "1s", "100ms", "20ms"} {
		rows = append(rows, Row{rowConfig: rowConfig{Mode: "abs", Interval: iv}, RecordsPerSec: measured(13e6 + float64(i)*1e5), LatencyP99Ms: measured(0.62)})
		if iv != "off" {
			rows = append(rows, Row{rowConfig: rowConfig{Mode: "sync", Interval: iv}, RecordsPerSec: measured(12e6), LatencyP99Ms: measured(0.56)})
		}
	}
	rows = append(rows,
		Row{rowConfig: rowConfig{Mode: "protoactor", Interval: "off"}, RecordsPerSec: measured(26e6), LatencyP99Ms: measured(0.31)},
		Row{rowConfig: rowConfig{Mode: "channels", Interval: "off"}, RecordsPerSec: metric{}, LatencyP99Ms: metric{}}) // not measured: left out
	_, layout, err := drawRows(rows)
	if err != nil {
		t.Fatal(err)
	}
	l := layout.legend
	if l.Size().X <= 0 || l.Size().Y <= 0 {
		t.Fatalf("no legend drawn: %+v", l)
	}
	for i, d := range layout.data {
		if l.Min.X < d.Max.X && d.Min.X < l.Max.X && l.Min.Y < d.Max.Y && d.Min.Y < l.Max.Y {
			t.Errorf("the legend %+v overlaps plotting area %d %+v", l, i, d)
		}
	}
	if err := plotRows(filepath.Join(t.TempDir(), "rows.png"), rows); err != nil {
		t.Fatal(err)
	}
}

// TestRowsOnADirectoryStoreAreIndependent runs two bounded rows one after
// the other on the same directory: each is a job of its own that carries
// all its records (the second does not resume the first's final
// checkpoint), and neither leaves a checkpoint behind.
func TestRowsOnADirectoryStoreAreIndependent(t *testing.T) {
	dir := t.TempDir()
	for i, mode := range []string{"abs", "sync"} {
		row, err := runRow(context.Background(), rowConfig{Topology: "paritysum", Mode: mode, Interval: "100ms", Parallelism: 2,
			RecordSize: 16, Keys: 64, Records: 3000, Store: dir})
		if err != nil {
			t.Fatalf("row %d (%s): %v", i, mode, err)
		}
		if row.Records != 3000 {
			t.Fatalf("row %d (%s) carried %d records, want 3000", i, mode, row.Records)
		}
	}
	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := store.List(context.Background(), ""); err != nil || len(keys) != 0 {
		t.Fatalf("left in the store: %v, %v", keys, err)
	}
}

// TestFromOldJSON reads rows written before metrics could be null (0 for
// what was not measured, a ratio to off for baselines): they print "–"
// where nothing was measured, and ratios are recomputed.
func TestFromOldJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.json")
	old := `[
  {"topology": "paritysum", "mode": "abs", "interval": "off", "parallelism": 2, "records": 1000, "seconds": 0.5, "records_per_sec": 2000,
   "ratio_to_off": 1, "checkpoints": 0, "ckpt_p50_ms": 0, "ckpt_p99_ms": 0, "align_p50_ms": 0, "align_p99_ms": 0, "bytes_per_ckpt": 0,
   "latency_p50_ms": 0.2, "latency_p99_ms": 0.6, "peak_rss_bytes": 1048576},
  {"topology": "paritysum", "mode": "protoactor", "interval": "off", "parallelism": 2, "records": 0, "seconds": 0, "records_per_sec": 0,
   "ratio_to_off": 2.5, "checkpoints": 0, "ckpt_p50_ms": 0, "ckpt_p99_ms": 0, "align_p50_ms": 0, "align_p99_ms": 0, "bytes_per_ckpt": 0,
   "latency_p50_ms": 0, "latency_p99_ms": 0, "peak_rss_bytes": 1048576}
]`
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := loadRows(path)
	if err != nil || len(rows) != 2 {
		t.Fatalf("loadRows: %d rows, %v", len(rows), err)
	}
	ratios(rows)
	for _, c := range []struct {
		row       int
		col, want string
	}{
		{0, "records/s", "2,000"}, {0, "% of off", "100.0%"}, {0, "ckpt p50/p99 ms", "–"}, {0, "bytes/ckpt", "–"}, {0, "latency p50/p99 ms", "0.20 / 0.60"},
		{1, "records/s", "–"}, {1, "% of off", "–"}, {1, "latency p50/p99 ms", "–"}, {1, "peak RSS MiB", "1.0"},
	} {
		if got := cell(t, rows[c.row], c.col); got != c.want {
			t.Errorf("row %d, %s: %q, want %q", c.row, c.col, got, c.want)
		}
	}
	var stdout, stderr bytes.Buffer
	out := filepath.Join(t.TempDir(), "new.json")
	// A row with a recovery time is a row with a failure: the mode ratios
	// of -sweep backpressure-checkpoints set it against its own aligned
	// twin, not against the one without a failure.
	twins := filepath.Join(t.TempDir(), "twins.json")
	rowsJSON := `[
  {"topology": "paritysum", "mode": "abs", "interval": "100ms", "parallelism": 2, "records": 10, "seconds": 1, "records_per_sec": 10, "checkpoints": 3, "ckpt_p99_ms": 10, "checkpoint_mode": "aligned", "sink_rate": 5},
  {"topology": "paritysum", "mode": "abs", "interval": "100ms", "parallelism": 2, "records": 10, "seconds": 1, "records_per_sec": 10, "checkpoints": 3, "ckpt_p99_ms": 5, "checkpoint_mode": "unaligned", "sink_rate": 5},
  {"topology": "paritysum", "mode": "abs", "interval": "100ms", "parallelism": 2, "records": 10, "seconds": 1, "records_per_sec": 10, "checkpoints": 3, "ckpt_p99_ms": 20, "checkpoint_mode": "aligned", "sink_rate": 5, "recovery_ms": 3},
  {"topology": "paritysum", "mode": "abs", "interval": "100ms", "parallelism": 2, "records": 10, "seconds": 1, "records_per_sec": 10, "checkpoints": 3, "ckpt_p99_ms": 5, "checkpoint_mode": "unaligned", "sink_rate": 5, "recovery_ms": 4}
]`
	if err := os.WriteFile(twins, []byte(rowsJSON), 0o644); err != nil {
		t.Fatal(err)
	}
	tw, err := loadRows(twins)
	if err != nil {
		t.Fatal(err)
	}
	ratios(tw)
	if got, got2 := cell(t, tw[1], "p99 % of aligned"), cell(t, tw[3], "p99 % of aligned"); got != "50.0%" || got2 != "25.0%" {
		t.Errorf("p99 against aligned: %s without a failure (want 50.0%%), %s with one (want 25.0%%)", got, got2)
	}
	if err := run(context.Background(), []string{"-from", path, "-json", out}, &stdout, &stderr); err != nil {
		t.Fatalf("run -from: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var m []map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m[1]["ratio_to_off"] != nil || m[1]["records_per_sec"] != nil || m[0]["ckpt_p50_ms"] != nil {
		t.Fatalf("rewritten rows: %s (%v)", b, err)
	}
}
