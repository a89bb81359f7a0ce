package dataflow

import (
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// timerJob is a keyed operator over int64 records keyed by v%keys that
// keeps a count per key and, with timers, registers an event-time timer
// per record at v ns (records are their own event time).
func timerJob(b *testing.B, keys int64, timers bool) Instance {
	g := New("timers-bench")
	keyed := KeyBy(Sequence(g, "src", 0, 1), func(v int64) int64 { return v % keys })
	out := Process(keyed, "p", func(s *KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
		n := Value[int64](s, "n")
		if timers {
			OnTimer(s, func(*Context[int64], Timer, *Collector[int64]) error { return nil })
		}
		return func(ctx *Context[int64], v int64, _ *Collector[int64]) error {
			c, _ := n.Get()
			n.Set(c + 1)
			if timers {
				ctx.RegisterEventTimer(time.Unix(0, v))
			}
			return nil
		}
	})
	Sink(out, "sink", discard[int64])
	return mustInstance(b, mustPlan(b, g), "p#0", 256, noopSender{})
}

// BenchmarkTimerRegisterFire is the cost of one event-time timer per
// record, registered and fired a batch later, beside the same keyed work
// without timers (BenchmarkTimerBaseline): ns/op is per record.
func BenchmarkTimerRegisterFire(b *testing.B) { benchTimers(b, true) }
func BenchmarkTimerBaseline(b *testing.B)     { benchTimers(b, false) }
func benchTimers(b *testing.B, timers bool) {
	const batch = 256
	inst := timerJob(b, 4096, timers)
	l := inst.(WatermarkListener)
	recs := make([]int64, batch)
	ts := make([]int64, batch)
	var v int64
	b.ReportAllocs()
	for i := 0; i < b.N; i += batch {
		for j := range recs {
			recs[j], ts[j] = v, v
			v++
		}
		if err := inst.ProcessBatch(0, recs, ts); err != nil {
			b.Fatal(err)
		}
		recs = make([]int64, batch)                      // ProcessBatch returned it to the pool
		if err := l.OnWatermark(v - batch); err != nil { // the previous batch's timers fire
			b.Fatal(err)
		}
	}
}

// BenchmarkSnapshotTimers snapshots a task with 1M pending timers, and
// BenchmarkSnapshotState one whose state has 1M map entries of the same
// keys instead: the snapshot of timers against that of other state.
func BenchmarkSnapshotTimers(b *testing.B) { benchSnapshot(b, true) }
func BenchmarkSnapshotState(b *testing.B)  { benchSnapshot(b, false) }
func benchSnapshot(b *testing.B, timers bool) {
	const pending, keys = 1 << 20, 4096
	g := New("snap-bench")
	keyed := KeyBy(Sequence(g, "src", 0, 1), func(v int64) int64 { return v % keys })
	out := Process(keyed, "p", func(s *KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
		m := MapOf[int64, bool](s, "m")
		OnTimer(s, func(*Context[int64], Timer, *Collector[int64]) error { return nil })
		return func(ctx *Context[int64], v int64, _ *Collector[int64]) error {
			if timers {
				ctx.RegisterEventTimer(time.Unix(0, v))
			} else {
				m.Put(v, true)
			}
			return nil
		}
	})
	Sink(out, "sink", discard[int64])
	inst := mustInstance(b, mustPlan(b, g), "p#0", 256, noopSender{})
	for v := int64(0); v < pending; v += 256 {
		recs := make([]int64, 256)
		for j := range recs {
			recs[j] = v + int64(j)
		}
		if err := inst.ProcessBatch(0, recs, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		st := &messages.TaskState{}
		if err := inst.Snapshot(st); err != nil {
			b.Fatal(err)
		}
	}
}
