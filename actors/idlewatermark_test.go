package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// An idle status carries a watermark, and downstream tasks take it: two
// sources meet in one map task before the keyed windows; source b, far
// ahead in event time, goes idle first, source a, behind, later. The map
// is then idle at b's watermark, which it sends only with its idle
// status: the windows of b's records close while both sources wait.
func TestIdleStatusCarriesItsWatermark(t *testing.T) {
	const nA, nB, offB = 1000, 4000, 100000
	gateA, gateB := testsrc.NewGate(10), testsrc.NewGate(nB/2)
	idxA := func(v int64) int64 { return v - 1 }
	idxB := func(v int64) int64 { return offB + v - 1 }
	ref := map[windowKey]int64{}
	for v := int64(1); v <= 10; v++ {
		i := idxA(v)
		ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	for v := int64(1); v <= nB/2; v++ {
		i := idxB(v)
		ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	closed := make(chan struct{})
	var once sync.Once
	sink := newWindowSink(ref)
	sink.onWindow = func(w windowCount) {
		if w.End > etTime(offB).UnixNano() {
			once.Do(func() { close(closed) })
		}
	}
	g := etJobFrom("idle-watermark", func(g *topology.Graph) topology.Stream[click] {
		source := func(name string, gate *testsrc.Gate, n int64, idx func(int64) int64, idle time.Duration) topology.Stream[click] {
			src := topology.FromSource(g, name, func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} },
				topology.WithWatermarks(topology.WatermarkStrategy[int64]{
					Timestamp:      func(v int64) time.Time { return etTime(idx(v)) },
					OutOfOrderness: 10 * time.Millisecond,
					IdleTimeout:    idle,
				}))
			return topology.Map(src, name+"-click", func(v int64) click { return click{User: idx(v) % etUsers, I: idx(v)} })
		}
		both := topology.Union(source("a", gateA, nA, idxA, 400*time.Millisecond), source("b", gateB, nB, idxB, 20*time.Millisecond))
		return topology.Map(both, "pass", func(c click) click { return c })
	}, sink.bad, sink.out)
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	job, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	gateA.WaitReached(t, 10)
	gateB.WaitReached(t, nB/2)
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("no window of source b closed in 30 s while both sources were idle")
	}
	stopJob(t, job)
	t.Logf("%d windows closed while both sources were idle", sink.check(t, false))
}
