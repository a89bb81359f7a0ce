package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/nodeauth"
)

// TestStatsLine: a worker's stats line reads back as written, among other
// lines, the last one winning; no line, or a broken one, is an error.
func TestStatsLine(t *testing.T) {
	want := workerStats{Index: 1, Records: 1234, Seconds: 3.5, Total: 99999, WireBatches: 7, WireRecords: 1792, WireBytes: 43008,
		LatencyP50Ms: measured(0.66), PeakRSSBytes: 80 << 20}
	line, err := formatStats(want)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(line, statsPrefix) || !strings.HasSuffix(line, "\n") || strings.Count(line, "\n") != 1 {
		t.Fatalf("stats line %q: want one line starting %q", line, statsPrefix)
	}
	older, _ := formatStats(workerStats{Index: 1, Records: 1})
	got, err := parseStats([]byte("something else\n" + older + line + "trailing words"))
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("parsed %+v, want %+v", got, want)
	}
	if _, ok := got.LatencyP99Ms.value(); ok {
		t.Errorf("p99 not measured came back as %v", got.LatencyP99Ms)
	}
	if _, err := parseStats([]byte("no stats here\n")); !errors.Is(err, errNoStats) {
		t.Errorf("no stats line: %v, want errNoStats", err)
	}
	if _, err := parseStats([]byte(statsPrefix + "{not json\n")); err == nil || errors.Is(err, errNoStats) {
		t.Errorf("broken stats line: %v, want a JSON error", err)
	}
}

// TestSumStats: records and wire bytes add up, the window is the longest,
// and the latencies are those of the worker whose sink counted the most.
func TestSumStats(t *testing.T) {
	got := sumStats([]workerStats{
		{Index: 0, Records: 0, Seconds: 2.01, Total: 0, WireBytes: 1000, PeakRSSBytes: 100},
		{Index: 1, Records: 500, Seconds: 2.00, Total: 800, WireBytes: 3000, LatencyP50Ms: measured(1), LatencyP99Ms: measured(4), PeakRSSBytes: 200},
	})
	want := clusterTotals{records: 500, total: 800, seconds: 2.01, wireBytes: 4000, latencyP50Ms: measured(1), latencyP99Ms: measured(4), peakRSSBytes: 300}
	if got != want {
		t.Errorf("sumStats = %+v, want %+v", got, want)
	}
}

// TestPlacementCrossing: the placement of EventPlaced is read per task, and
// a keyed edge kept on one node is refused.
func TestPlacementCrossing(t *testing.T) {
	const spread = "source#0,sum#1 -> w-a@127.0.0.1:4001; sum#0,sink#0 -> w-b@127.0.0.1:4002"
	where, err := parsePlacement(spread)
	if err != nil {
		t.Fatal(err)
	}
	if where["source#0"] != "w-a@127.0.0.1:4001" || where["sum#0"] != "w-b@127.0.0.1:4002" || len(where) != 4 {
		t.Errorf("parsePlacement = %v", where)
	}
	if err := checkCrossing(spread, "source", "sum"); err != nil {
		t.Errorf("crossing placement refused: %v", err)
	}
	for _, c := range []struct{ placement, want string }{
		{"source#0,sum#0,sum#1 -> w-a@h:1; sink#0 -> w-b@h:2", "on one node"},
		{"source#0 -> w-a@h:1; sink#0 -> w-b@h:2", "no task of"},
		{"", "want"},
		{"source#0 w-a@h:1", "want"},
		{"source#0 -> w-a@h:1; source#0 -> w-b@h:2", "twice"},
	} {
		if err := checkCrossing(c.placement, "source", "sum"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("checkCrossing(%q) = %v, want an error with %q", c.placement, err, c.want)
		}
	}
}

// TestClusterRatiosAndCells: a cluster row's "% of off" is against the
// cluster row with checkpoints off, and its "% of in-proc off" against the
// abs one; the cluster columns and note appear only with cluster rows.
func TestClusterRatiosAndCells(t *testing.T) {
	cfg := func(mode, iv string) rowConfig {
		return rowConfig{Topology: "paritysum", Mode: mode, Interval: iv, Parallelism: 2}
	}
	rows := []Row{
		{rowConfig: cfg("abs", "off"), RecordsPerSec: measured(10e6)},
		{rowConfig: cfg("abs", "100ms"), RecordsPerSec: measured(9e6)},
		{rowConfig: cfg("cluster", "off"), RecordsPerSec: measured(4e6), WireBytesPerRecord: measured(24.06),
			Placement: "source#0,sum#1 -> w-a@127.0.0.1:4001; sum#0,sink#0 -> w-b@127.0.0.1:4002"},
		{rowConfig: cfg("cluster", "100ms"), RecordsPerSec: measured(3e6), WireBytesPerRecord: measured(24.1)},
		{rowConfig: cfg("protoactor", "off"), RecordsPerSec: measured(20e6)},
	}
	ratios(rows)
	want := map[string][]string{
		"% of off":         {"100.0%", "90.0%", "100.0%", "75.0%", "–"},
		"% of in-proc off": {"–", "–", "40.0%", "30.0%", "–"},
		"wire B/record":    {"–", "–", "24.1", "24.1", "–"},
		"interval":         {"off", "100ms", "off", "100ms", "–"},
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
	for _, w := range []string{"% of in-proc off", "wire B/record", "cluster placement: source#0,sum#1 -> w-a@127.0.0.1:4001;"} {
		if !strings.Contains(s, w) {
			t.Errorf("table lacks %q:\n%s", w, s)
		}
	}
	out.Reset()
	if err := printTable(&out, rows[:2]); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"in-proc", "wire", "cluster"} {
		if strings.Contains(out.String(), w) {
			t.Errorf("a table without cluster rows has %q:\n%s", w, out.String())
		}
	}
}

// TestPlanCluster: mode cluster gives a row per interval, for paritysum
// only, and its progress line names the interval.
func TestPlanCluster(t *testing.T) {
	f, err := parseFlags([]string{"-modes", "abs,cluster", "-intervals", "off,1s,100ms"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	configs, err := plan(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rc := range configs {
		got = append(got, describe(rc))
	}
	want := []string{"paritysum abs interval=off p=2", "paritysum abs interval=1s p=2", "paritysum abs interval=100ms p=2",
		"paritysum cluster interval=off p=2", "paritysum cluster interval=1s p=2", "paritysum cluster interval=100ms p=2"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("plan:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	f.topology = "chain-2"
	if configs, err = plan(f); err != nil || len(configs) != 3 {
		t.Errorf("chain-2: %d rows (%v), want the 3 abs rows only", len(configs), err)
	}
	f.topology, f.intervals = "paritysum", "off,soon"
	if _, err := plan(f); !errors.Is(err, errUsage) {
		t.Errorf("a bad interval: %v, want errUsage", err)
	}
}

// TestClusterSmoke runs a tiny cluster row of each kind through the bench
// program, with this test binary as the coordinator and worker processes
// (see TestMain). A bounded row carries exactly its records across the
// nodes; a timed row opens and closes its window on the workers. How fast
// is the machine's business.
func TestClusterSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 3 processes per row")
	}
	const records = 20_000 + 7
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		args []string
	}{
		{"bounded", []string{"-records", strconv.Itoa(records), "-intervals", "20ms"}},
		{"timed", []string{"-duration", "300ms", "-intervals", "off"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			jsonPath := filepath.Join(dir, c.name+".json")
			args := append([]string{"-modes", "cluster", "-repeat", "1", "-json", jsonPath, "-cpuprofile", filepath.Join(dir, "prof")}, c.args...)
			var stdout, stderr bytes.Buffer
			if err := run(context.Background(), args, &stdout, &stderr); err != nil {
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
			r := rows[0]
			if r.Mode != "cluster" || r.Runs != 1 {
				t.Errorf("row %+v: want one cluster run", r)
			}
			if err := checkCrossing(r.Placement, "source", "sum"); err != nil {
				t.Error(err)
			}
			if !strings.Contains(stdout.String(), "cluster placement: "+r.Placement) {
				t.Errorf("the table does not report the placement:\n%s", stdout.String())
			}
			if r.Seconds <= 0 {
				t.Errorf("seconds = %v: the window was never open", r.Seconds)
			}
			if c.name == "bounded" {
				if r.Records != records {
					t.Errorf("%d records reached the sink, want %d", r.Records, records)
				}
				// Some records cross nodes: the sink and a sum task share
				// no node with the source, or with each other.
				if v, ok := r.WireBytesPerRecord.value(); !ok || v <= 0 {
					t.Errorf("wire bytes per record = %+v, want a positive number", r.WireBytesPerRecord)
				}
			}
			if _, ok := r.RecordsPerSec.value(); ok != (r.Records > 0) {
				t.Errorf("records/s %+v for %d records", r.RecordsPerSec, r.Records)
			}
			if _, ok := r.CkptP99Ms.value(); ok != (r.Checkpoints > 0) {
				t.Errorf("ckpt p99 %+v with %d checkpoints", r.CkptP99Ms, r.Checkpoints)
			}
			for _, role := range []string{"coordinator", "worker0", "worker1"} {
				iv := "20ms"
				if c.name == "timed" {
					iv = "off"
				}
				p := filepath.Join(dir, "prof", "paritysum-cluster-"+iv+"-run1-"+role+".pprof")
				if st, err := os.Stat(p); err != nil || st.Size() == 0 {
					t.Errorf("no CPU profile %s: %v", p, err)
				}
			}
		})
	}
}

// TestWorkersAreReaped: workers that cannot join are killed and reaped by
// kill, and a worker whose stdin closes (its coordinator died) exits by
// itself.
func TestWorkersAreReaped(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Nothing listens on the port of a listener just closed: the workers
	// keep trying to register.
	spec := workerSpec{Join: closedAddr(t), Job: "bench-reap",
		Config: childConfig{rowConfig: rowConfig{Topology: "paritysum", Mode: "cluster", Interval: "off", Parallelism: 2, RecordSize: 16, Keys: 8}, Duration: time.Second}}
	ws, err := startWorkers(context.Background(), exe, spec, nodeauth.NewSecret(), 2, "")
	if err != nil {
		t.Fatal(err)
	}
	// Worker 1's coordinator "dies": its stdin closes.
	if err := ws.procs[1].stdin.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ws.procs[1].done:
	case <-time.After(2 * workerGrace):
		t.Errorf("worker 1 still runs %v after its stdin closed", 2*workerGrace)
	}
	if ws.procs[1].err == nil {
		t.Errorf("worker 1 exited 0 without its job ending")
	}
	ws.kill()
	for i, w := range ws.procs {
		select {
		case <-w.done: // cmd.Wait has returned: the process is reaped
		default:
			t.Errorf("worker %d not reaped by kill", i)
		}
	}
	if ws.procs[0].err == nil {
		t.Errorf("worker 0 exited 0 without its job ending")
	}
	if logs := ws.logs(); !strings.Contains(logs, "worker 1: ") {
		t.Errorf("worker 1's error is not in the logs kept:\n%s", logs)
	}
}

// closedAddr is the address of a loopback listener that is closed again.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// TestSurvive: a worker's error passes through, a panic that is not
// protoactor-go's shutdown panic goes on, and the shutdown panic is told by
// its frame.
func TestSurvive(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	boom := errors.New("boom")
	if err := survive(log, func() error { return boom }); err != boom {
		t.Errorf("survive = %v, want the serve error", err)
	}
	func() {
		defer func() {
			if r := recover(); r != "other" {
				t.Errorf("recovered %v, want the other panic to go on", r)
			}
		}()
		_ = survive(log, func() error { panic("other") })
		t.Error("survive returned from a panic that is not the shutdown's")
	}()
	shutdown := "goroutine 1 [running]:\ngithub.com/asynkron/protoactor-go/remote.(*endpointManager).stop.func1({0x17958a0, 0xc0005ec0b0})\n"
	if !isShutdownPanic([]byte(shutdown)) || isShutdownPanic([]byte("goroutine 1 [running]:\nmain.main()\n")) {
		t.Error("isShutdownPanic does not tell the shutdown panic from another")
	}
}
