package nexmark_test

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/internal/nexmark"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

// small is a stream of 0.6 s of event time, with windows scaled down to
// match, so that every query's windows fire many times.
var (
	small       = nexmark.Config{Events: 60_000, Splits: 4, OutOfOrder: 5 * time.Millisecond, Seed: 7}
	smallParams = nexmark.Params{Parallelism: 2, Window: 100 * time.Millisecond, Slide: 20 * time.Millisecond, Gap: 10 * time.Millisecond}
)

// TestQueriesMatchReferences runs every query on the runtime and compares
// its rows with the plain Go reference over the same events, exactly.
func TestQueriesMatchReferences(t *testing.T) {
	for _, q := range nexmark.Queries {
		t.Run(q.Name, func(t *testing.T) {
			t.Parallel()
			want := q.Reference(small, smallParams)
			if len(want) == 0 {
				t.Fatal("the reference has no rows: the test would check nothing")
			}
			g := topology.New("nexmark-" + q.Name)
			out := q.Build(nexmark.Source(g, "events", small, topology.Parallelism(2)), smallParams)
			var mu sync.Mutex
			var got []string
			topology.Sink(out.Lines(), "rows", func(r string) error { mu.Lock(); got = append(got, r); mu.Unlock(); return nil })
			err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(10*time.Millisecond),
				actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("%d rows, want %d; %s", len(got), len(want), diff(got, want))
			}
			t.Logf("%s: %d rows", q.Name, len(got))
		})
	}
}

func diff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return "first difference at row " + strconv.Itoa(i) + ": got " + got[i] + ", want " + want[i]
		}
	}
	return "one is a prefix of the other"
}

// TestGeneratorProportionsAndOrder checks the model's proportions, that
// events are a function of their number, and that each split emits its
// events once, within the out-of-orderness.
func TestGeneratorProportionsAndOrder(t *testing.T) {
	c := small
	kinds := map[nexmark.Kind]int{}
	for n := range c.Events {
		e := c.Event(n)
		kinds[e.Kind]++
		if e2 := c.Event(n); e2.Time() != e.Time() || e2.Kind != e.Kind || (e.Kind == nexmark.BidEvent && e2.Bid != e.Bid) {
			t.Fatalf("event %d differs between two calls", n)
		}
		if e.Kind == nexmark.BidEvent && (e.Bid.Auction < 1000 || e.Bid.Bidder < 1000) {
			t.Fatalf("event %d: bid %+v refers to no auction or person", n, e.Bid)
		}
	}
	if kinds[nexmark.PersonEvent]*50 != int(c.Events) || kinds[nexmark.AuctionEvent]*50 != 3*int(c.Events) {
		t.Fatalf("kinds %v of %d events, want 2%%, 6%%, 92%%", kinds, c.Events)
	}
	seen := make([]bool, c.Events)
	shuffled := false
	for s := range c.Splits {
		maxT := int64(0)
		for k, n := range c.Order(s) {
			if seen[n] || int(n)%c.Splits != s {
				t.Fatalf("split %d emits event %d twice or not its own", s, n)
			}
			seen[n] = true
			at := c.Event(n).Time()
			if maxT-at >= int64(c.OutOfOrder) {
				t.Fatalf("split %d: event %d (the %d-th) is %v behind the newest", s, n, k, time.Duration(maxT-at))
			}
			shuffled = shuffled || at < maxT
			maxT = max(maxT, at)
		}
	}
	if slices.Contains(seen, false) {
		t.Fatal("some event is in no split")
	}
	if !shuffled {
		t.Fatal("no split emits out of order")
	}
}
