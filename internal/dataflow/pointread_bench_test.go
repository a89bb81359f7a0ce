package dataflow

import (
	"testing"

	"github.com/snapflow/snapflow/internal/diskstate"
)

// BenchmarkValueStatePointReads is the keyed sum of bench's parity job on
// one task: each record reads its key's sum and writes it back, keys in
// turn over 512 Ki keys, 256 records a batch, side by side on the heap, on
// disk, and on disk with a cache of 4 MiB, whose share for kept values
// (1 MiB) holds under 4% of the keys, so that reads go to the tree. It
// reports the wall time and the process's CPU time (with pebble's flushes
// and compactions) per record.
func BenchmarkValueStatePointReads(b *testing.B) {
	const keys = 512 << 10
	for _, c := range []struct {
		name string
		disk *diskstate.Config
	}{
		{"heap", nil},
		{"disk", &diskstate.Config{Dir: b.TempDir()}},
		{"disk-small-cache", &diskstate.Config{Dir: b.TempDir(), CacheBytes: 4 << 20}},
	} {
		b.Run(c.name, func(b *testing.B) {
			testDisk = c.disk
			defer func() { testDisk = nil }()
			g := New("bench", MaxParallelism(128))
			k := KeyBy(FromSlice(g, "src", []uint64{}), func(x uint64) uint64 { return x })
			Sink(Process(k, "sum", func(s *KeyedSetup[uint64]) ProcessFunc[uint64, uint64, uint64] {
				sum := Value[uint64](s, "sum")
				return func(ctx *Context[uint64], _ uint64, _ *Collector[uint64]) error {
					v, _ := sum.Get()
					sum.Set(v + 1)
					return nil
				}
			}), "sink", discard[uint64])
			inst := mustInstance(b, mustPlan(b, g), "sum#0", 256, noopSender{})
			batch := make([]uint64, 256)
			next := uint64(0)
			step := func() {
				for i := range batch {
					batch[i] = next
					next = (next + 1) % keys
				}
				if err := inst.ProcessBatch(0, batch, nil); err != nil {
					b.Fatal(err)
				}
			}
			for range 2 * keys / len(batch) { // every key written, then read and written again
				step()
			}
			cpu0, _ := processCPU()
			b.ResetTimer()
			for range b.N {
				step()
			}
			b.StopTimer()
			records := float64(b.N * len(batch))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/records, "ns/record")
			if cpu1, ok := processCPU(); ok {
				b.ReportMetric(float64(cpu1-cpu0)/records, "cpu-ns/record")
			}
		})
	}
}
