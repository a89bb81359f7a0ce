package actors_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// bufferedClicksJob counts each user's events per 50ms event-time window
// as a buffer: every click goes into the user's map (click index ->
// window end), and the timer at a window's end ranges over the map,
// counting and deleting that window's clicks.
func bufferedClicksJob(out func(windowCount) error) *topology.Graph {
	g := topology.New("buffered")
	src := topology.Generate(g, "clicks", etEvents, func(i int64) click { return click{User: i % etUsers, I: i} },
		topology.Parallelism(2),
		topology.WithWatermarks(topology.WatermarkStrategy[click]{
			Timestamp:      func(c click) time.Time { return etTime(c.I) },
			OutOfOrderness: 10 * time.Millisecond,
		}))
	counts := topology.Process(topology.KeyBy(src, func(c click) int64 { return c.User }), "buffer",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, click, windowCount] {
			buf := topology.MapOf[int64, int64](s, "clicks")
			topology.OnTimer(s, func(ctx *topology.Context[int64], tm topology.Timer, out *topology.Collector[windowCount]) error {
				end := tm.Time.UnixNano()
				var n int64
				for i, e := range buf.All {
					if e == end {
						n++
						buf.Delete(i)
					}
				}
				out.Emit(windowCount{windowKey{ctx.Key(), end}, n})
				return nil
			})
			return func(ctx *topology.Context[int64], c click, _ *topology.Collector[windowCount]) error {
				end := etWindowEnd(etTime(c.I))
				buf.Put(c.I, end.UnixNano())
				ctx.RegisterEventTimer(end)
				return nil
			}
		}, topology.Parallelism(3))
	topology.Sink(counts, "sink", out)
	return g
}

// TestBufferedClicksOnBothBackends runs the buffered-clicks job on the
// heap and with its state on disk, checkpointing every 20ms, with a
// failure of a buffering task: every window's count, replays included,
// equals the one computed in plain Go, and the disk run kept its state in
// databases.
func TestBufferedClicksOnBothBackends(t *testing.T) {
	ref := etReference()
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "heap", true: "disk"}[disk], func(t *testing.T) {
			sink := newWindowSink(ref)
			var failed atomic.Bool
			var batches atomic.Int64
			opts := []actors.Option{actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(20 * time.Millisecond),
				actors.WithLogger(testLogger(t)),
				actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
					if task == "buffer#1" && batches.Add(1) == 20 && !failed.Swap(true) {
						panic("injected failure")
					}
				}})}
			if disk {
				opts = append(opts, actors.WithDiskState(actors.DiskState{Dir: t.TempDir()}))
			}
			before := diskstate.Opened()
			ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
			defer cancel()
			if err := actors.Run(ctx, bufferedClicksJob(sink.out), opts...); err != nil {
				t.Fatal(err)
			}
			sink.check(t, true)
			if !failed.Load() {
				t.Fatal("the failure was never injected")
			}
			if opened := diskstate.Opened() - before; disk != (opened >= 6) {
				t.Fatalf("on disk: %t, but %d task databases were opened", disk, opened)
			}
		})
	}
}
