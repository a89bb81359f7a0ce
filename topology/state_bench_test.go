package topology

import (
	"fmt"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// benchProfile is a JSON-encoded state value.
type benchProfile struct {
	Name  string
	Tags  []string
	Score float64
}

// benchStates fills one task's int64 value state, map state and JSON value
// state with keys entries each, and returns the task's instance.
func benchStates(b *testing.B, keys int) Instance {
	b.Helper()
	g := New("bench")
	byUser := KeyBy(FromSlice(g, "src", []event{}), func(e event) string { return e.User })
	out := Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, int64] {
		sum := Value[int64](s, "sum")
		parity := MapOf[string, int64](s, "parity")
		prof := Value[benchProfile](s, "profile")
		return func(ctx *Context[string], e event, _ *Collector[int64]) error {
			sum.Set(e.N)
			parity.Put("even", e.N)
			prof.Set(benchProfile{Name: ctx.Key(), Tags: []string{"a", "b"}, Score: float64(e.N)})
			return nil
		}
	})
	Sink(out, "sink", discard[int64])
	p := mustPlan(b, g)
	inst := mustInstance(b, p, "agg#0", 256, noopSender{})
	batch := make([]event, keys)
	for i := range batch {
		batch[i] = event{User: fmt.Sprintf("user-%d", i), N: int64(i)}
	}
	if err := inst.ProcessBatch(0, batch); err != nil {
		b.Fatal(err)
	}
	return inst
}

// BenchmarkSnapshotKeyedState snapshots 10,000 keys of three states.
func BenchmarkSnapshotKeyedState(b *testing.B) {
	const keys = 10000
	inst := benchStates(b, keys)
	b.ReportAllocs()
	for b.Loop() {
		var st messages.TaskState
		if err := inst.Snapshot(&st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*keys)/b.Elapsed().Seconds(), "keys/s")
}

// BenchmarkRestoreKeyedState restores 10,000 keys of three states into a
// fresh instance.
func BenchmarkRestoreKeyedState(b *testing.B) {
	const keys = 10000
	inst := benchStates(b, keys)
	var st messages.TaskState
	if err := inst.Snapshot(&st); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		fresh := benchStates(b, 0)
		b.StartTimer()
		if err := fresh.Restore(&st); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*keys)/b.Elapsed().Seconds(), "keys/s")
}
