package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
)

func TestParseStateSize(t *testing.T) {
	for _, c := range []struct {
		in     string
		keys   uint64
		per    int
		total  bool
		failed bool
	}{
		{in: "0", keys: 1024},
		{in: "1024", keys: 1024, per: 1024},
		{in: "65536", keys: 8, per: 65536},
		{in: "64MiB", keys: 1024, per: 64 << 10, total: true},
		{in: "256KiB", keys: 1024, per: 256, total: true},
		{in: "1GiB", keys: 1 << 20, per: 1024, total: true},
		{in: "1000KiB", keys: 3, per: 1000 << 10 / 3, total: true}, // rounded down
		{in: "1KiB", keys: 2048, failed: true},                     // less than a byte per key
		{in: "0MiB", keys: 1, failed: true},
		{in: "-1", keys: 1, failed: true},
		{in: "1.5MiB", keys: 1, failed: true},
		{in: "64MB", keys: 1, failed: true},
		{in: "9223372036854775807GiB", keys: 1, failed: true},
	} {
		per, total, err := parseStateSize(c.in, c.keys)
		if (err != nil) != c.failed || per != c.per || total != c.total {
			t.Errorf("parseStateSize(%q, %d) = %d, %v, %v; want %d, %v, failed %v", c.in, c.keys, per, total, err, c.per, c.total, c.failed)
		}
	}
}

// TestIncrementalUsage: a bad -update-fraction or -state-size is a usage
// error (exit 2) that names the flag.
func TestIncrementalUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-update-fraction", "0"},
		{"-update-fraction", "-0.5"},
		{"-update-fraction", "1.01"},
		{"-update-fraction", "NaN"},
		{"-sweep", "incremental", "-update-fraction", "2"},
		{"-keys", "4096", "-state-size", "1KiB"},
		{"-state-size", "lots"},
		{"-sweep", "incremental", "-intervals", "off"},
		{"-parallelism", "4", "-max-parallelism", "2"},
		{"-sweep", "incremental", "-rewrite-every", "-1"},
	} {
		err := run(context.Background(), args, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) || exitCode(err, io.Discard) != 2 {
			t.Errorf("%q: %v, want a usage error", args, err)
			continue
		}
		if name := strings.TrimPrefix(args[len(args)-2], "-"); !strings.Contains(err.Error(), "-"+name) {
			t.Errorf("%q: %q does not name -%s", args, err, name)
		}
	}
}

func TestPlanIncremental(t *testing.T) {
	for _, c := range []struct {
		args      []string
		intervals []string
		perKey    int
		fraction  float64
	}{
		// The sweep's defaults: 64 MiB over 1024 keys, 1% updated.
		{[]string{"-sweep", "incremental"}, []string{"100ms"}, 64 << 10, 0.01},
		{[]string{"-sweep", "incremental", "-state-size", "256KiB", "-keys", "1024", "-update-fraction", "0.1"}, []string{"100ms"}, 256, 0.1},
		{[]string{"-sweep", "incremental", "-state-size", "512", "-intervals", "1s,20ms", "-rewrite-every", "7"}, []string{"1s", "20ms"}, 512, 0.01},
		// Every key: the row records no fraction (as rows before the flag).
		{[]string{"-sweep", "incremental", "-update-fraction", "1"}, []string{"100ms"}, 64 << 10, 0},
	} {
		f, err := parseFlags(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		rows, err := plan(f)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if len(rows) != 1+len(c.intervals)*len(checkpointKinds) {
			t.Fatalf("%q: %d rows, want %d", c.args, len(rows), 1+len(c.intervals)*len(checkpointKinds))
		}
		if off := rows[0]; off.Mode != "abs" || off.Interval != "off" || off.Checkpointing != "" || off.StateSize != c.perKey || off.UpdateFraction != c.fraction {
			t.Errorf("%q: first row %+v, want abs with checkpoints off, %d B/key, fraction %v", c.args, off, c.perKey, c.fraction)
		}
		// At each interval a full row, then an incremental one with
		// -rewrite-every (the full row has none).
		for i, rc := range rows[1:] {
			iv, kind, rewrite := c.intervals[i/2], "full", 0
			if i%2 == 1 {
				kind, rewrite = "incremental", f.rewrite
			}
			if rc.Mode != "abs" || rc.Interval != iv || rc.Checkpointing != kind || rc.RewriteEvery != rewrite || rc.StateSize != c.perKey || rc.UpdateFraction != c.fraction {
				t.Errorf("%q: row %d = %+v, want abs at %s, %s, rewrite every %d, %d B/key, fraction %v", c.args, i+1, rc, iv, kind, rewrite, c.perKey, c.fraction)
			}
		}
	}
	// -max-parallelism sets the job's key groups; 0 keeps the default.
	for _, c := range []struct {
		args []string
		want int
	}{{nil, 128}, {[]string{"-parallelism", "4"}, 128}, {[]string{"-max-parallelism", "1024"}, 1024}, {[]string{"-parallelism", "3", "-max-parallelism", "3"}, 3}} {
		f, err := parseFlags(append([]string{"-sweep", "incremental"}, c.args...), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := plan(f)
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		g, err := buildJob("maxp", rows[1], &probe{})
		if err != nil {
			t.Fatal(err)
		}
		if g.MaxParallelism() != c.want {
			t.Errorf("%q: the job has %d key groups, want %d", c.args, g.MaxParallelism(), c.want)
		}
	}
	// Outside the sweep, -state-size keeps its meaning and -update-fraction
	// its default of every key.
	f, err := parseFlags([]string{"-state-size", "4096"}, io.Discard)
	if err != nil || f.stateSize != 4096 || f.fraction != 1 {
		t.Errorf("-state-size 4096: %+v, %v; want 4096 B/key, fraction 1", f, err)
	}
}

// TestFullCheckpointUploadsTheState runs the benchmark's job with a 256 KiB
// state over 1024 keys and 10% of them updated per second, on a counting
// store, takes checkpoints by hand and feeds them to the row's statistics:
// the state is all there (every key was filled first), and a full
// checkpoint writes about the whole state to the store.
func TestFullCheckpointUploadsTheState(t *testing.T) {
	const total = 256 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mem, err := snapshots.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	store := newCountingStore(mem)
	rc := rowConfig{Topology: "paritysum", Mode: "abs", Parallelism: 2, RecordSize: 16, Keys: 1024, StateSize: total / 1024, UpdateFraction: 0.1, Rate: 100_000}
	var p probe
	g, err := buildJob("full-upload", rc, &p)
	if err != nil {
		t.Fatal(err)
	}
	type completion struct {
		e       actors.Event
		written int64
	}
	done := make(chan completion, 256)
	j, err := actors.Start(ctx, g, actors.WithStore(store), actors.WithCheckpointInterval(0), actors.WithCheckpointTimeout(time.Minute),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted {
				done <- completion{e, store.written()}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = j.Stop() }()
	var stats ckptStats
	checkpoint := func(inWindow bool) actors.Event {
		t.Helper()
		id, err := j.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case c := <-done:
				stats.completed(c.e, c.written, inWindow)
				if c.e.Checkpoint == id {
					return c.e
				}
			case <-ctx.Done():
				t.Fatalf("checkpoint %d: no completion event", id)
			}
		}
	}
	// Until every key's state has reached the keyed tasks.
	for n := 0; checkpoint(false).Bytes < total; n++ {
		if n == 100 {
			t.Fatalf("100 checkpoints and the state is still short of %d bytes", total)
		}
	}
	for range 3 {
		checkpoint(true)
	}
	var row Row
	stats.fill(&row)
	st, _ := row.StateBytes.value()
	up, _ := row.UploadedBytesPerCkpt.value()
	if row.Checkpoints != 3 || st < total || up < 0.9*st || up > 1.5*st {
		t.Errorf("%d checkpoints, state %v bytes, %v uploaded per checkpoint: want 3, at least %d, and about the state", row.Checkpoints, st, up, total)
	}
	t.Logf("state %.0f bytes, uploaded %.0f per checkpoint", st, up)
}

// TestIncrementalSweepSmoke runs -sweep incremental at a small size through
// the bench program (2 MiB: each keyed task's state is above the default
// inline limit, so that it is stored as an object of its own, which an
// incremental checkpoint can reference): a row with checkpoints off, then a
// full and an incremental one at 100ms with the state size and fraction
// asked for. Each
// checkpointed row has a checkpoint in its window (the window waits for
// one) holding the whole state; the full one uploads about all of it, the
// incremental one far less (one hot key a second: one or two of 128 key
// groups, and a spread share rewritten);
// and each restored its newest checkpoint, reading at least the state, with
// the raw reads of the checkpoint's bytes measured.
func TestIncrementalSweepSmoke(t *testing.T) {
	const state = 2 << 20
	rows, stdout := benchRows(t, "-sweep", "incremental", "-state-size", "2MiB", "-keys", "1024", "-update-fraction", "0.001",
		"-duration", "1s", "-rate", "60000", "-repeat", "1")
	if len(rows) != 3 || rows[0]["interval"] != "off" || rows[0]["checkpoints"] != 0.0 || rows[0]["state_bytes"] != nil || rows[0]["uploaded_bytes_per_ckpt"] != nil || rows[0]["restore_ms"] != nil {
		t.Fatalf("rows %v: want 3, the first with checkpoints off and no checkpoint or restore figures:\n%s", rows, stdout)
	}
	num := func(r map[string]any, k string) float64 {
		t.Helper()
		v, ok := r[k].(float64)
		if !ok {
			t.Fatalf("%s row: %s = %v, want a number", r["checkpointing"], k, r[k])
		}
		return v
	}
	for i, kind := range []string{"full", "incremental"} {
		r := rows[1+i]
		if r["checkpointing"] != kind || r["interval"] != "100ms" || r["state_size"] != float64(state/1024) || r["update_fraction"] != 0.001 {
			t.Errorf("row %v: want %s at 100ms, %d B/key, fraction 0.001", r, kind, state/1024)
		}
		if num(r, "checkpoints") < 1 {
			t.Errorf("%s row: no checkpoint in the window", kind)
		}
		st, up, stateUp := num(r, "state_bytes"), num(r, "uploaded_bytes_per_ckpt"), num(r, "state_uploaded_bytes_per_ckpt")
		switch {
		case st < state:
			t.Errorf("%s row: state %v bytes, want at least %d", kind, st, state)
		case kind == "full" && up < 0.9*st:
			t.Errorf("full row: %v uploaded per checkpoint, state %v: want about the state", up, st)
		case kind == "incremental" && up >= 0.75*st:
			t.Errorf("incremental row: %v uploaded per checkpoint, state %v: want well below the state", up, st)
		case stateUp > up:
			t.Errorf("%s row: the tasks stored %v bytes per checkpoint, more than the %v Put to the store", kind, stateUp, up)
		}
		rb, cb := num(r, "restore_read_bytes"), num(r, "restored_checkpoint_bytes")
		if rb < state || cb < state || num(r, "restore_ms") <= 0 || num(r, "raw_read_ms") < 0 || num(r, "restore_ratio_to_raw_read") < 0 {
			t.Errorf("%s row: restore %v ms reading %v bytes of a checkpoint of %v, raw reads %v ms: want a restore that read at least the %d bytes of state, and the raw reads of at least those",
				kind, r["restore_ms"], rb, cb, r["raw_read_ms"], state)
		}
		t.Logf("%s: %v checkpoints, state %v bytes, %v uploaded per checkpoint (%v by the tasks), p99 %v ms, restore %v ms, raw %v ms",
			kind, r["checkpoints"], st, up, stateUp, r["ckpt_p99_ms"], r["restore_ms"], r["raw_read_ms"])
	}
	if rows[1]["ckpt_p99_ratio_to_full"] != nil || rows[2]["ckpt_p99_ratio_to_full"] == nil {
		t.Errorf("p99 ratio to full: full %v, incremental %v; want none, then one", rows[1]["ckpt_p99_ratio_to_full"], rows[2]["ckpt_p99_ratio_to_full"])
	}
	for _, col := range []string{"updated/s", "ckpt kind", "state B", "uploaded B/ckpt", "% uploaded", "p99 % of full", "restore ms", "ckpt B", "raw read ms", "restore % of raw"} {
		if !strings.Contains(stdout, col) {
			t.Errorf("table lacks column %q:\n%s", col, stdout)
		}
	}
}

// TestPlanStateBackendOff: -sweep statebackend -intervals off plans the
// two backends' checkpoints-off rows alone, heap first.
func TestPlanStateBackendOff(t *testing.T) {
	f, err := parseFlags([]string{"-sweep", "statebackend", "-intervals", "off", "-keys", "1048576", "-state-size", "256MiB", "-update-fraction", "1"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := plan(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(rows), rows)
	}
	for i, backend := range []string{"", "disk"} {
		if rc := rows[i]; rc.Mode != "abs" || rc.Interval != "off" || rc.Backend != backend || rc.StateSize != 256 || rc.Recovery || rc.Checkpointing != "" {
			t.Errorf("row %d = %+v, want abs with checkpoints off, backend %q, 256 B/key", i, rc, backend)
		}
	}
}

// TestStateBackendOffSmoke runs the two checkpoints-off rows of -sweep
// statebackend on a small state: both measure records, and each writes
// the CPU profile of its window.
func TestStateBackendOffSmoke(t *testing.T) {
	prof := t.TempDir()
	rows, table := benchRows(t, "-sweep", "statebackend", "-intervals", "off", "-keys", "256", "-state-size", "64", "-update-fraction", "1",
		"-duration", "300ms", "-repeat", "1", "-cpuprofile", prof)
	if len(rows) != 2 || rows[0]["backend"] != nil || rows[1]["backend"] != "disk" {
		t.Fatalf("rows %v, want heap then disk:\n%s", rows, table)
	}
	for _, r := range rows {
		if n, _ := r["records"].(float64); n <= 0 {
			t.Errorf("row %v counted no record", r)
		}
	}
	for _, p := range []string{"paritysum-abs-off-state64-run1.pprof", "paritysum-abs-off-state64-run1-row2.pprof"} {
		if st, err := os.Stat(filepath.Join(prof, p)); err != nil || st.Size() == 0 {
			t.Errorf("no CPU profile %s: %v", p, err)
		}
	}
}

// TestNexmarkDiskSmoke runs a query of state with -backend disk: its rows
// on disk are checked against the reference, and the table has the rows
// on disk beside the heap's.
func TestNexmarkDiskSmoke(t *testing.T) {
	var stdout, stderr strings.Builder
	if err := run(context.Background(), []string{"-topology", "nexmark", "-queries", "q3", "-backend", "disk", "-records", "200000", "-repeat", "1"}, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "events, state on disk, equal to the reference") {
		t.Errorf("no check of the rows on disk:\n%s", stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "disk/heap eo-1s") || strings.Count(out, "\n     q3") != 2 {
		t.Errorf("want a row of q3 on the heap and one on disk:\n%s", out)
	}
	err := run(context.Background(), []string{"-topology", "nexmark", "-queries", "q3", "-backend", "disk-nolocal", "-records", "1000"}, io.Discard, io.Discard)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-backend") {
		t.Errorf("-backend disk-nolocal: %v, want a usage error naming -backend", err)
	}
}
