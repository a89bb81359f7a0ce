package dataflow

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/watermark"
)

const ms = int64(time.Millisecond)

func newSplitClocks(idle time.Duration) *splitClocks {
	return &splitClocks{outOfOrder: 0, idle: idle, fallback: watermark.Min}
}

// readAt reads timestamps ts from split k at processing time now.
func readAt(t *testing.T, c *splitClocks, k int, now int64, ts ...int64) {
	t.Helper()
	hi := watermark.Min
	for _, x := range ts {
		hi = max(hi, x)
	}
	if err := c.read(SplitRead{N: len(ts), Split: k}, hi, now); err != nil {
		t.Fatal(err)
	}
}

func wantStatus(t *testing.T, c *splitClocks, want watermark.Status) {
	t.Helper()
	if got, _ := c.status(); got != want {
		t.Fatalf("status = %v, want %v", got, want)
	}
}

// The task's watermark is the lowest over its splits: a split that has
// read nothing yet holds it at Min, a lagging one holds it back.
func TestSplitClocksLowest(t *testing.T) {
	c := newSplitClocks(0)
	c.open(2)
	readAt(t, c, 0, 1, 100, 300, 200)
	wantStatus(t, c, watermark.Status{Watermark: watermark.Min})
	readAt(t, c, 1, 2, 50)
	wantStatus(t, c, watermark.Status{Watermark: 49})
	readAt(t, c, 1, 3, 400)
	wantStatus(t, c, watermark.Status{Watermark: 299})
	// A split behind the watermark does not take it back.
	readAt(t, c, 0, 4, 10)
	wantStatus(t, c, watermark.Status{Watermark: 299})
}

// An idle split holds nothing back; it is active again with its next
// read. All splits idle: the task is idle at the highest watermark. A
// split is idle once the task's read attempts have found none of its
// records for the timeout, each attempt counting for at most a quarter of
// it.
func TestSplitClocksIdle(t *testing.T) {
	c := newSplitClocks(10 * time.Millisecond)
	c.open(2)
	readAt(t, c, 0, 1*ms)
	readAt(t, c, 0, 2*ms, 1000)
	wantStatus(t, c, watermark.Status{Watermark: watermark.Min})
	if d, ok := c.period(); !ok || d != 10*time.Millisecond/4 {
		t.Fatalf("period = %v, %v; want 2.5ms", d, ok)
	}
	for now := 3 * ms; now <= 11*ms; now += 2 * ms { // split 1 quiet for 10 ms, split 0 for 9
		readAt(t, c, 1, now)
		if now == 9*ms {
			wantStatus(t, c, watermark.Status{Watermark: watermark.Min})
		}
	}
	wantStatus(t, c, watermark.Status{Watermark: 999}) // split 1 idle
	readAt(t, c, 1, 12*ms)
	wantStatus(t, c, watermark.Status{Watermark: 999, Idle: true})
	if _, ok := c.period(); ok {
		t.Fatal("a period with every split idle")
	}
	readAt(t, c, 1, 13*ms, 2000)
	wantStatus(t, c, watermark.Status{Watermark: 1999})
}

// A stall between two read attempts counts for one check period: after a
// pause of the process longer than the timeout, no split is idle, and the
// one whose records the task reads first stays active.
func TestSplitClocksStallIsNotIdleness(t *testing.T) {
	c := newSplitClocks(300 * time.Millisecond)
	c.open(2)
	readAt(t, c, 0, 1*ms, 100)
	readAt(t, c, 1, 2*ms, 200)
	readAt(t, c, 0, 902*ms) // a stall of 900 ms, then nothing on either
	readAt(t, c, 0, 903*ms, 300)
	wantStatus(t, c, watermark.Status{Watermark: 199})
}

// A snapshot keeps how long each split has been quiet: a split idle at the
// checkpoint is idle again after one period of empty read attempts after
// the restore (not before: records may have come while the job was down),
// one on its way there counts on from where it was.
func TestSplitClocksQuietRestored(t *testing.T) {
	c := newSplitClocks(8 * time.Millisecond)
	c.open(3)
	readAt(t, c, 0, 1*ms, 500)
	for now := 2 * ms; now <= 12*ms; now += 2 * ms {
		readAt(t, c, 0, now, 500)
		if now == 6*ms {
			readAt(t, c, 2, now, 700)
		}
	}
	_, per, quiet := c.snapshot(3)
	if want := []int64{0, 8 * ms, 6 * ms}; !slices.Equal(quiet, want) {
		t.Fatalf("quiet = %v, want %v", quiet, want)
	}
	r := newSplitClocks(8 * time.Millisecond)
	r.restored, r.restoredQuiet, r.fallback = per, quiet, watermark.Min
	r.open(3)
	wantStatus(t, r, watermark.Status{Watermark: watermark.Min}) // split 1 not idle before a read attempt
	readAt(t, r, 0, 100*ms, 600)                                 // the time since the checkpoint does not count
	readAt(t, r, 0, 102*ms, 600)
	wantStatus(t, r, watermark.Status{Watermark: 599}) // split 1: 6 + 2 ms quiet, split 2: 6 + 2 ms
	if !r.comb.Input(2).Idle {
		t.Fatal("split 2 did not count on from its restored quiet time")
	}
}

// A split that is done holds nothing back, and may not read again; a
// split the source adds later counts from its first read.
func TestSplitClocksDoneAndNew(t *testing.T) {
	c := newSplitClocks(0)
	c.open(2)
	readAt(t, c, 0, 1, 500)
	if err := c.read(SplitRead{Split: 1, Done: true}, watermark.Min, 2); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, c, watermark.Status{Watermark: 499})
	if err := c.read(SplitRead{N: 1, Split: 1}, 1, 3); err == nil || !strings.Contains(err.Error(), "said was done") {
		t.Fatalf("a read of a done split: %v", err)
	}
	readAt(t, c, 3, 4, 450) // splits 2 and 3 are new; 2 has read nothing
	wantStatus(t, c, watermark.Status{Watermark: 499})
	readAt(t, c, 2, 5, 800)
	readAt(t, c, 0, 5, 900)
	wantStatus(t, c, watermark.Status{Watermark: 499}) // split 3 at 449 holds it
	readAt(t, c, 3, 6, 1000)
	wantStatus(t, c, watermark.Status{Watermark: 799})
	for _, r := range []SplitRead{{N: 1, Split: -1}, {N: 1, Split: maxSplits}} {
		if err := c.read(r, 1, 7); err == nil {
			t.Fatalf("split %d accepted", r.Split)
		}
	}
	// Nothing read names no split: no generator is made for it.
	if err := c.read(SplitRead{Split: 40}, watermark.Min, 7); err != nil || len(c.gens) != 4 {
		t.Fatalf("an empty read: %v, %d splits", err, len(c.gens))
	}
}

// A snapshot keeps each split's position (Max for a done one, Min for
// one without records); the splits restored from it resume there, and a
// checkpoint without per-split positions restores every split at the
// task's.
func TestSplitClocksSnapshotRestore(t *testing.T) {
	c := newSplitClocks(0)
	c.open(2)
	readAt(t, c, 0, 1, 700)
	readAt(t, c, 1, 1, 300)
	if err := c.read(SplitRead{N: 1, Split: 2, Done: true}, 900, 1); err != nil {
		t.Fatal(err)
	}
	lowest, per, _ := c.snapshot(4)
	if want := []int64{700, 300, watermark.Max, watermark.Min}; lowest != watermark.Min || !slices.Equal(per, want) {
		t.Fatalf("snapshot = %d, %v; want %d, %v", lowest, per, int64(watermark.Min), want)
	}
	lowest, per, _ = c.snapshot(3)
	if lowest != 300 || len(per) != 3 {
		t.Fatalf("snapshot of 3 = %d, %v; want lowest 300", lowest, per)
	}

	r := newSplitClocks(0)
	r.restored, r.fallback = per, lowest
	r.open(3)
	wantStatus(t, r, watermark.Status{Watermark: 299})
	if !r.ended[2] {
		t.Fatal("the done split was restored active")
	}

	f := newSplitClocks(0)
	f.restored, f.fallback = per[:2], 300 // another number of splits: the task's position
	f.open(3)
	wantStatus(t, f, watermark.Status{Watermark: 299})
	readAt(t, f, 0, 1, 100) // behind: holds nothing back, goes nowhere
	wantStatus(t, f, watermark.Status{Watermark: 299})
}

// Rescaling deals each split's position out with the split; a divided
// split's halves both keep it; without a position for every split, none.
func TestRedistributeSplitPositions(t *testing.T) {
	div := func(b []byte) ([]byte, []byte, bool) {
		if len(b) < 2 {
			return nil, nil, false
		}
		return b[:1], b[1:], true
	}
	old := [][][]byte{{[]byte("ab"), []byte("c")}, {[]byte("d")}}
	splits, ts := redistributeSplits(old, [][]int64{{10, 20}, {30}}, 2, div)
	if len(splits[0]) != 2 || len(splits[1]) != 1 || !slices.Equal(ts[0], []int64{10, 30}) || !slices.Equal(ts[1], []int64{20}) {
		t.Fatalf("dealt %q %v", splits, ts)
	}
	splits, ts = redistributeSplits(old, [][]int64{{10, 20}, {30}}, 4, div)
	if want := [][]int64{{10}, {20}, {30}, {10}}; len(ts) != 4 || !slices.EqualFunc(ts, want, slices.Equal[[]int64]) {
		t.Fatalf("divided: %q %v, want %v", splits, ts, want)
	}
	if _, ts = redistributeSplits(old, [][]int64{{10, 20}}, 2, div); ts != nil {
		t.Fatalf("positions dealt without one for every task: %v", ts)
	}
}

// A task whose splits have all ended is idle, not at the end of time: a
// split found later (a new Kafka partition) holds event time back again.
// A task without splits leaves the decision to the task's clock.
func TestSplitClocksAllEndedThenNew(t *testing.T) {
	c := newSplitClocks(0)
	c.open(1)
	if err := c.read(SplitRead{Split: 0, Done: true}, watermark.Min, 1); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, c, watermark.Status{Watermark: watermark.Min, Idle: true})
	readAt(t, c, 1, 2, 100)
	wantStatus(t, c, watermark.Status{Watermark: 99})
	readAt(t, c, 2, 3, 50) // a third split, behind: it holds the task where it is
	readAt(t, c, 1, 4, 300)
	wantStatus(t, c, watermark.Status{Watermark: 99})

	none := newSplitClocks(10 * time.Millisecond)
	none.open(0)
	if _, ok := none.status(); ok {
		t.Fatal("a task without splits decided its own status")
	}
}
