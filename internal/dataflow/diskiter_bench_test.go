package dataflow

import (
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// iterBenchSum keeps what the benchmark's ranges add up, so that the
// compiler keeps them.
var iterBenchSum int64

// iterBenchPlan is a keyed Process operator whose every record Puts one
// entry into its key's map and then ranges over the map, adding its
// values up.
func iterBenchPlan(b *testing.B) *Plan {
	g := New("iterbench")
	k := KeyBy(FromSlice(g, "src", []iterRec{}), func(r iterRec) int64 { return r.Key })
	Sink(Process(k, "p", func(s *KeyedSetup[int64]) ProcessFunc[int64, iterRec, int64] {
		buf := MapOf[int64, int64](s, "buf")
		return func(_ *Context[int64], r iterRec, _ *Collector[int64]) error {
			buf.Put(r.UK, r.V)
			for _, v := range buf.All {
				iterBenchSum += v
			}
			return nil
		}
	}), "sink", discard[int64])
	return mustPlan(b, g)
}

// iterBenchRecords are n records over keys keys, each with a user key of
// its own.
func iterBenchRecords(n, keys int) []iterRec {
	rs := make([]iterRec, n)
	for i := range rs {
		rs[i] = iterRec{Key: int64(i % keys), UK: int64(i), V: int64(i)}
	}
	return rs
}

// runIterBench feeds rs to a new instance on the given backend (cfg nil:
// the heap) in batches of 256 records, and returns the time it took.
// With pending, a checkpoint begins halfway and is taken at the end, so
// that the second half's writes and reads go through the writes held for
// it (on the heap: an asynchronous snapshot, finished at the end).
func runIterBench(b *testing.B, p *Plan, cfg *diskstate.Config, rs []iterRec, pending bool) time.Duration {
	b.Helper()
	inst, err := p.NewInstance(mustTask(b, p, "p#0").Index, InstanceContext{BatchSize: 256, Sender: noopSender{}, DiskState: cfg})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := inst.Close(); err != nil {
			b.Fatal(err)
		}
	}()
	var finish func() error
	start := time.Now()
	for i := 0; i < len(rs); i += 256 {
		if pending && i == len(rs)/2/256*256 {
			var st messages.TaskState
			if cfg != nil {
				f, err := inst.(DiskCheckpointer).SnapshotFiles(&st, nil, true, "1")
				if err != nil {
					b.Fatal(err)
				}
				finish = f.Take
				defer f.Release()
			} else if finish, err = inst.(AsyncSnapshotter).SnapshotAsync(&st, nil, true); err != nil {
				b.Fatal(err)
			}
		}
		if err := inst.ProcessBatch(0, rs[i:min(i+256, len(rs))], nil); err != nil {
			b.Fatal(err)
		}
	}
	took := time.Since(start)
	if finish != nil {
		if err := finish(); err != nil {
			b.Fatal(err)
		}
	}
	return took
}

// BenchmarkMapIterate is the shape of issue 45: a keyed Process that Puts
// one entry and then ranges over its key's map, 20,000 records over 100
// keys, on the heap and on disk in the same run. It reports the records
// per second of each backend and the ratio of their times (disk/heap).
// "held" begins a checkpoint halfway, which stays pending to the end;
// "scan" keeps no copy of the stored entries (a budget of 0), so that
// every range reads the disk: the cost of a scan.
func BenchmarkMapIterate(b *testing.B) {
	const records, keys = 20000, 100
	rs := iterBenchRecords(records, keys)
	for _, bc := range []struct {
		name    string
		pending bool
		budget  int
	}{{"plain", false, cacheBudget}, {"held", true, cacheBudget}, {"scan", false, 0}} {
		b.Run(bc.name, func(b *testing.B) {
			defer func(budget int) { cacheBudget = budget }(cacheBudget)
			cacheBudget = bc.budget
			p := iterBenchPlan(b)
			cfg := &diskstate.Config{Dir: b.TempDir()}
			var heap, disk time.Duration
			for b.Loop() {
				heap += runIterBench(b, p, nil, rs, bc.pending)
				disk += runIterBench(b, p, cfg, rs, bc.pending)
			}
			n := float64(b.N * records)
			b.ReportMetric(n/heap.Seconds(), "heap-records/s")
			b.ReportMetric(n/disk.Seconds(), "disk-records/s")
			b.ReportMetric(disk.Seconds()/heap.Seconds(), "disk/heap")
		})
	}
}
