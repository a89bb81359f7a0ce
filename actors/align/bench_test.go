package align

import "testing"

// BenchmarkStepData is the hot path: data on an unblocked input. It must not
// allocate.
func BenchmarkStepData(b *testing.B) {
	const inputs = 4
	a := New[[]int](inputs)
	batch := make([]int, 256)
	out := make([]Action[[]int], 0, 1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		out = a.Step(Event[[]int]{Kind: Data, Input: i, Data: batch}, out[:0])
		i = (i + 1) % inputs
	}
	if len(out) != 1 || out[0].Kind != Process {
		b.Fatalf("got %v", out)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "steps/s")
}

// BenchmarkCheckpointCycle runs whole checkpoints on 4 inputs: each barrier
// is followed by data on its input, buffered until the last barrier
// snapshots and releases them.
func BenchmarkCheckpointCycle(b *testing.B) {
	const inputs, perInput = 4, 8
	a := New[int](inputs)
	out := make([]Action[int], 0, inputs*perInput+1)
	b.ReportAllocs()
	var id uint64
	for b.Loop() {
		id++
		for in := range inputs {
			out = a.Step(Event[int]{Kind: Barrier, Input: in, Checkpoint: id}, out[:0])
			for range perInput {
				out = a.Step(Event[int]{Kind: Data, Input: in}, out) // buffered
			}
		}
	}
	if a.LastSnapshot() != id || len(out) != 1+inputs*perInput {
		b.Fatalf("last snapshot %d, want %d; last actions %v", a.LastSnapshot(), id, out)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "checkpoints/s")
}

func TestStepDataAllocs(t *testing.T) {
	a := New[[]int](2)
	batch := []int{1}
	out := make([]Action[[]int], 0, 1)
	n := testing.AllocsPerRun(1000, func() {
		out = a.Step(Event[[]int]{Kind: Data, Input: 1, Data: batch}, out[:0])
	})
	if n != 0 {
		t.Fatalf("data step: %v allocs, want 0", n)
	}
}
