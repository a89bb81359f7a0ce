package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// TestRescaleSmoke runs -sweep rescale at a tiny state size through the
// bench program, with this test binary as its child (see TestMain): every
// row restored its savepoint, read each stored object once, and its tasks'
// shares add up to the state. How fast is the machine's business.
func TestRescaleSmoke(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "rescale.json")
	args := []string{"-sweep", "rescale", "-sizes", "64KiB", "-keys", "64", "-repeat", "2", "-json", jsonPath,
		"-cpuprofile", filepath.Join(dir, "prof")}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []RescaleRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(rescalePairs) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(rescalePairs), stdout.String())
	}
	for i, r := range rows {
		if r.pair() != rescalePairs[i] || r.Runs != 2 || len(r.RestoresMs) != 2 || r.StateBytes != 64<<10 || r.Keys != 64 || r.Store != "mem://" {
			t.Errorf("row %d: %+v, want %s over 2 runs of 64 KiB", i, r, rescalePairs[i])
		}
		if v, ok := r.RestoreP50Ms.value(); !ok || v <= 0 {
			t.Errorf("%s: restore p50 %+v, want a positive time", r.pair(), r.RestoreP50Ms)
		}
		// The keyed state is at least its blobs; the restore reads the
		// manifest once, and with it every task's state (source, sum tasks,
		// sink): at 64 KiB each is below the default inline limit
		// (actors.WithInlineStateLimit) and travels inside the manifest.
		if r.SavepointBytes < r.StateBytes || r.ReadBytes <= r.SavepointBytes {
			t.Errorf("%s: savepoint %d bytes, read %d: want the state's %d bytes stored and more read", r.pair(), r.SavepointBytes, r.ReadBytes, r.StateBytes)
		}
		if r.ReadGets != 1 {
			t.Errorf("%s: %d objects read, want 1: the manifest, with the %d task states inline", r.pair(), r.ReadGets, 1+r.From+1)
		}
		// The new tasks' shares are the stored key groups, split up.
		shares := r.TaskShareMeanBytes.or(0) * float64(r.To)
		if shares < float64(r.StateBytes) || shares > float64(r.SavepointBytes) {
			t.Errorf("%s: the tasks' shares add up to %.0f bytes, want between the state's %d and the stored %d", r.pair(), shares, r.StateBytes, r.SavepointBytes)
		}
		if r.TaskReadMaxBytes.or(0) < r.TaskShareMaxBytes.or(1) {
			t.Errorf("%s: the largest task read %v bytes, less than the largest share %v", r.pair(), r.TaskReadMaxBytes, r.TaskShareMaxBytes)
		}
		// A task reads about its share, rescaled or not: the key-group
		// index leaves only the envelope and the neighbours' framing.
		if v := r.TaskReadOverShare.or(0); v < 1 || v > 1.1 {
			t.Errorf("%s: a task reads %.2f× its share, want about 1×", r.pair(), v)
		}
		if r.From == r.To {
			if v, ok := r.RatioToSameP.value(); !ok || v != 1 {
				t.Errorf("%s: ratio to itself %+v, want 1", r.pair(), r.RatioToSameP)
			}
		} else if _, ok := r.PairedRatio.value(); !ok {
			t.Errorf("%s: no paired ratio", r.pair())
		}
		for k := 1; k <= 2; k++ {
			p := filepath.Join(dir, "prof", fmt.Sprintf("rescale-64KiB-%dto%d-run%d.pprof", r.From, r.To, k))
			if st, err := os.Stat(p); err != nil || st.Size() == 0 {
				t.Errorf("no CPU profile %s: %v", p, err)
			}
		}
	}
	for _, w := range []string{"restore p50 ms", "2→3", "4→2", "Target: at most 1.5×", "store: mem://"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("the table lacks %q:\n%s", w, stdout.String())
		}
	}
	// -from prints the same table without measuring.
	var again bytes.Buffer
	if err := run(context.Background(), []string{"-sweep", "rescale", "-from", jsonPath}, &again, &stderr); err != nil {
		t.Fatal(err)
	}
	if again.String() != stdout.String() {
		t.Errorf("-from printed\n%s\nwant\n%s", again.String(), stdout.String())
	}
}

// TestRescaleRatios: a rescaling row is compared with the same-parallelism
// row of its savepoint and size only: the ratio of the medians, and the
// median of the run-by-run ratios.
func TestRescaleRatios(t *testing.T) {
	row := func(size int64, from, to int, runs ...float64) RescaleRow {
		r := RescaleRow{StateBytes: size, Keys: 8, From: from, To: to, RestoresMs: runs}
		r.RestoreP50Ms = measured(lowerMedian(append([]float64(nil), runs...)))
		return r
	}
	rows := []RescaleRow{
		row(1, 2, 2, 10, 20, 30),
		row(1, 2, 3, 30, 20, 60), // paired: 3, 1, 2
		row(1, 4, 4, 100, 100, 100),
		row(1, 4, 2, 50, 50, 200),
		row(2, 2, 3, 5, 5, 5), // no baseline of its size
	}
	rescaleRatios(rows)
	want := []struct{ ratio, paired string }{
		{"1.00×", "1.00×"}, {"1.50×", "2.00×"}, {"1.00×", "1.00×"}, {"0.50×", "0.50×"}, {"–", "–"},
	}
	for i, r := range rows {
		if got := ratioCell(r.RatioToSameP); got != want[i].ratio {
			t.Errorf("row %d %s: ratio %s, want %s", i, r.pair(), got, want[i].ratio)
		}
		if got := ratioCell(r.PairedRatio); got != want[i].paired {
			t.Errorf("row %d %s: paired %s, want %s", i, r.pair(), got, want[i].paired)
		}
	}
}

// TestCountingStore: the wrapper counts the bytes of each Get by key, not
// the misses, and reset starts the count again.
func TestCountingStore(t *testing.T) {
	ctx := context.Background()
	cs := newCountingStore(snapshots.NewMem())
	defer cs.Close()
	if err := cs.Put(ctx, "a", []byte("12345")); err != nil {
		t.Fatal(err)
	}
	if err := cs.Put(ctx, "b", []byte("12")); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "a", "b"} {
		if _, err := cs.Get(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.Get(ctx, "missing"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Fatalf("get missing: %v, want ErrNotFound", err)
	}
	s := cs.reset()
	if s.bytes != 12 || s.gets != 3 || s.byKey["a"] != 10 || s.byKey["b"] != 2 || len(s.byKey) != 2 {
		t.Errorf("counted %+v, want 12 bytes in 3 gets: a 10, b 2", s)
	}
	if s := cs.reset(); s.bytes != 0 || s.gets != 0 {
		t.Errorf("after reset: %+v, want nothing", s)
	}
}

func TestParseSizes(t *testing.T) {
	got, err := parseSizes("16MiB, 64KiB,1GiB,100")
	if err != nil || len(got) != 4 || got[0] != 16<<20 || got[1] != 64<<10 || got[2] != 1<<30 || got[3] != 100 {
		t.Errorf("parseSizes = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0MiB", "-1", "16MB", "x"} {
		if _, err := parseSizes(bad); err == nil {
			t.Errorf("parseSizes(%q) accepted", bad)
		}
	}
}

// TestRescaleUsage: what -sweep rescale cannot do is a usage error, before
// anything runs.
func TestRescaleUsage(t *testing.T) {
	for _, args := range [][]string{
		{"-sweep", "rescale", "-plot", "x.png"},
		{"-sweep", "rescale", "-sizes", "1KiB", "-keys", "2048"},
		{"-sweep", "rescale", "-sizes", "16MB"},
	} {
		if err := run(context.Background(), args, &bytes.Buffer{}, &bytes.Buffer{}); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want errUsage", args, err)
		}
	}
}

// TestRescaleDiskSmoke runs -sweep rescale -backend disk at a tiny state
// size: every row restored its checkpoint from database files, the
// same-parallelism rows by adopting one stored database per task, the
// rescaled rows by ingesting where a task spans two, none entry by entry,
// and each restore's parts are no longer than the restore.
func TestRescaleDiskSmoke(t *testing.T) {
	dir := t.TempDir()
	jsonPath := filepath.Join(dir, "rescale.json")
	args := []string{"-sweep", "rescale", "-backend", "disk", "-sizes", "1MiB", "-repeat", "1", "-store", filepath.Join(dir, "store"), "-json", jsonPath}
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rows []RescaleRow
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(diskRescalePairs) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(diskRescalePairs), stdout.String())
	}
	for i, r := range rows {
		if r.pair() != diskRescalePairs[i] || r.Backend != "disk" || r.Runs != 1 || r.Keys != (1<<20)/diskRescaleValueBytes || r.StoredBytes <= 0 {
			t.Errorf("row %d: %+v, want %s on disk, one run, a key per %d bytes", i, r, diskRescalePairs[i], diskRescaleValueBytes)
		}
		total, _ := r.RestoreP50Ms.value()
		parts := r.DownloadP50Ms.or(-1) + r.RebuildP50Ms.or(-1)
		if total <= 0 || parts < 0 || parts > total {
			t.Errorf("%s: restore %v ms, download and rebuild %v ms", r.pair(), total, parts)
		}
		wantAdopted, rescaled := r.To, r.From != r.To
		if r.Adopted != wantAdopted || r.RebuiltEntries != 0 || (r.IngestedBytes > 0) != rescaled {
			t.Errorf("%s: adopted %d, ingested %d bytes, rebuilt %d entries; want %d adopted, ingested only when rescaled, none rebuilt",
				r.pair(), r.Adopted, r.IngestedBytes, r.RebuiltEntries, wantAdopted)
		}
	}
	for _, w := range []string{"rebuild ms", "2→3", "3→2", "Target: at most 1.5×"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("the table lacks %q:\n%s", w, stdout.String())
		}
	}
}
