package diskstate

import (
	"encoding/binary"
	"testing"
)

// BenchmarkGetApply is the per-batch path of a task on disk: 64 point
// reads of stored keys (a table, then the memtable) and a write of 64
// entries in one batch.
func BenchmarkGetApply(b *testing.B) {
	d, err := Open(Config{Dir: b.TempDir()}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	const keys = 10_000
	key := func(i int) []byte { return binary.BigEndian.AppendUint32(Prefix(nil, i%256, 1), uint32(i)) }
	bt := d.NewBatch()
	for i := range keys {
		_ = bt.Set(key(i), make([]byte, 32))
	}
	if err := d.Apply(bt); err != nil {
		b.Fatal(err)
	}
	if _, err := d.Checkpoint("table"); err != nil { // the keys in a table
		b.Fatal(err)
	}
	val := make([]byte, 0, 64)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k := range 64 {
			if val, _, err = d.Get(val[:0], key((i*64+k)*7919%keys)); err != nil {
				b.Fatal(err)
			}
			_ = bt.Set(key((i*64+k)%keys), val)
		}
		if err := d.Apply(bt); err != nil {
			b.Fatal(err)
		}
	}
}
