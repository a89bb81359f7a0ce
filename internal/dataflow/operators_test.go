package dataflow

import (
	"slices"
	"testing"
)

// TestSinkBatchKeepsItsBound: a SinkBatch never gets more records at a time
// than the job's batch size, even from a batch that holds more (channel
// state replayed from an unaligned checkpoint of a job with larger
// batches): it writes it in parts, in order.
func TestSinkBatchKeepsItsBound(t *testing.T) {
	g := New("sinkbatch")
	var writes [][]int64
	SinkBatch(Sequence(g, "src", 1, 10), "sink", func(b []int64) error {
		writes = append(writes, slices.Clone(b))
		return nil
	})
	p := mustPlan(t, g)
	inst, err := p.NewInstance(mustTask(t, p, "sink#0").Index, InstanceContext{BatchSize: 4, Sender: noopSender{}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 4, 10} {
		writes = nil
		if err := inst.ProcessBatch(0, seq(n), nil); err != nil {
			t.Fatal(err)
		}
		var got []int64
		for _, w := range writes {
			if len(w) == 0 || len(w) > 4 {
				t.Errorf("a batch of %d: write got %d records, want 1 to 4", n, len(w))
			}
			got = append(got, w...)
		}
		if !slices.Equal(got, seq(n)) {
			t.Errorf("a batch of %d: written %v, want %v", n, got, seq(n))
		}
		if want := (n + 3) / 4; len(writes) != want {
			t.Errorf("a batch of %d: %d writes, want %d", n, len(writes), want)
		}
	}
}
