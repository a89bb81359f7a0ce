package diskstate

import "testing"

func BenchmarkBeginCheckpoint(b *testing.B) {
	d, err := Open(Config{Dir: b.TempDir()}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	bt := d.NewBatch()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		p, err := d.BeginCheckpoint("x")
		if err != nil {
			b.Fatal(err)
		}
		_ = bt.Set(Prefix(nil, i%100, 1), []byte("v"))
		_ = d.Apply(bt)
		p.Release()
		_ = d.settle(true)
	}
}
