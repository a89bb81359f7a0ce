package main

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// plainStore hides every method of the store it wraps but those of
// snapshots.Store: a store that cannot read ranges.
type plainStore struct{ snapshots.Store }

// gatedStore holds every Get until release is closed, and says on
// entered when one has started.
type gatedStore struct {
	snapshots.Store
	entered chan struct{}
	release chan struct{}
}

func (g gatedStore) Get(ctx context.Context, key string) ([]byte, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Store.Get(ctx, key)
}

// TestCountingStoreRanges: the store a job is handed reads ranges exactly
// when the wrapped store does, its range reads are counted with the Gets,
// and reset returns every read and the most that were under way at once.
func TestCountingStoreRanges(t *testing.T) {
	ctx := context.Background()
	cs := newCountingStore(snapshots.NewMem())
	rr, ok := cs.store().(snapshots.RangeReader)
	if !ok {
		t.Fatal("a counting store over the memory store cannot read ranges")
	}
	if _, ok := newCountingStore(plainStore{snapshots.NewMem()}).store().(snapshots.RangeReader); ok {
		t.Fatal("a counting store over a store without ranges claims to read ranges")
	}
	if err := cs.Put(ctx, "a", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	if b, err := rr.GetRange(ctx, "a", 2, 3); err != nil || string(b) != "234" {
		t.Fatalf("GetRange(a, 2, 3) = %q, %v", b, err)
	}
	if _, err := cs.store().Get(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	s := cs.reset()
	want := []readOp{{key: "a", offset: 2, length: 3}, {key: "a", length: -1}}
	if s.bytes != 13 || s.gets != 2 || len(s.reads) != 2 || s.reads[0] != want[0] || s.reads[1] != want[1] || s.peak != 1 {
		t.Errorf("counted %+v, want 13 bytes in 2 reads %v, one at a time", s, want)
	}

	// Three Gets held at once: the peak is 3.
	g := gatedStore{Store: snapshots.NewMem(), entered: make(chan struct{}), release: make(chan struct{})}
	if err := g.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	gs := newCountingStore(g)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := gs.Get(ctx, "k"); err != nil {
				t.Error(err)
			}
		})
	}
	for range 3 {
		<-g.entered
	}
	close(g.release)
	wg.Wait()
	if s := gs.reset(); s.peak != 3 || s.gets != 3 {
		t.Errorf("three Gets at once: peak %d, %d reads; want 3, 3", s.peak, s.gets)
	}
}

// TestReplayReads: the reads a countingStore recorded, replayed on the
// store it wraps, return the same bytes, whatever the number of workers;
// a range read on a store that cannot read ranges is refused.
func TestReplayReads(t *testing.T) {
	ctx := context.Background()
	dir, err := snapshots.Open(ctx, filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	defer dir.Close()
	cs := newCountingStore(dir)
	for _, k := range []string{"x/1", "x/2", "x/3"} {
		if err := cs.Put(ctx, k, make([]byte, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	rr := cs.store().(snapshots.RangeReader)
	for _, k := range []string{"x/1", "x/2"} {
		if _, err := rr.GetRange(ctx, k, 100, 250); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cs.Get(ctx, "x/3"); err != nil {
		t.Fatal(err)
	}
	s := cs.reset()
	for _, workers := range []int{0, 1, 2, 8} {
		took, n, err := replayReads(ctx, dir, s.reads, workers)
		if err != nil || n != s.bytes || n != 1500 || took <= 0 {
			t.Errorf("%d workers: %v, %d bytes, %v; want the 1500 bytes read", workers, took, n, err)
		}
	}
	if _, _, err := replayReads(ctx, plainStore{dir}, s.reads, 2); err == nil {
		t.Error("range reads replayed on a store without ranges")
	}
	if _, _, err := replayReads(ctx, dir, []readOp{{key: "x/missing", length: -1}}, 2); err == nil {
		t.Error("a read of a missing object replayed without an error")
	}
}

// TestP99RatioToFull: an incremental row's checkpoint p99 is set against
// the full row's of the same interval and state, and not against another
// interval's.
func TestP99RatioToFull(t *testing.T) {
	row := func(iv, kind string, p99 float64) Row {
		return Row{rowConfig: rowConfig{Topology: "paritysum", Mode: "abs", Interval: iv, Parallelism: 2, StateSize: 64, Checkpointing: kind},
			RecordsPerSec: measured(1e6), CkptP99Ms: measured(p99)}
	}
	rows := []Row{row("1s", "full", 2000), row("1s", "incremental", 100), row("100ms", "full", 1000), row("100ms", "incremental", 300), row("20ms", "incremental", 50),
		row("5s", "full", 8000), row("5s", "incremental", 2), row("10s", "full", 10000), row("10s", "incremental", 17)}
	ratios(rows)
	for i, want := range []string{"–", "5.0%", "–", "30.0%", "–", "–", "0.025%", "–", "0.17%"} {
		if got := percent(rows[i].RatioP99ToFull); got != want {
			t.Errorf("row %d (%s %s): p99 against full %s, want %s", i, rows[i].Interval, rows[i].Checkpointing, got, want)
		}
	}
}

// TestPlotIncremental draws the rows of -sweep incremental (a value not
// measured has no bar): the legend covers no data, and rows of no sweep
// are refused.
func TestPlotIncremental(t *testing.T) {
	var rows []Row
	for _, iv := range []string{"1s", "100ms"} {
		rows = append(rows,
			Row{rowConfig: rowConfig{Mode: "abs", Interval: iv, Checkpointing: "full"}, UploadedBytesPerCkpt: measured(256 << 20), StateBytes: measured(256 << 20), CkptP99Ms: measured(3000)},
			Row{rowConfig: rowConfig{Mode: "abs", Interval: iv, Checkpointing: "incremental"}, UploadedBytesPerCkpt: measured(5 << 20), StateBytes: measured(256 << 20), CkptP99Ms: metric{}})
	}
	_, layout, err := drawIncremental(rows)
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
	if err := plotRows(filepath.Join(t.TempDir(), "incremental.png"), rows); err != nil {
		t.Fatal(err)
	}
	if _, _, err := drawIncremental([]Row{{rowConfig: rowConfig{Mode: "abs", Interval: "off"}}}); err == nil {
		t.Error("rows of no sweep drawn")
	}
}
