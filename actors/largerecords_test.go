package actors_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// bigRecords is a replayable source of n records of size bytes each; record
// i starts with i. It remembers, across restores, the largest buffer the
// runtime offered to one Read.
type bigRecords struct {
	n, size int
	next    int
	maxBuf  *atomic.Int64
}

func (s *bigRecords) Open(_ context.Context, offset []byte) error {
	s.next = 0
	if offset != nil {
		if len(offset) != 8 {
			return errors.New("bigRecords: bad offset")
		}
		s.next = int(binary.BigEndian.Uint64(offset))
	}
	return nil
}

func (s *bigRecords) Read(buf [][]byte) (int, error) {
	for {
		old := s.maxBuf.Load()
		if int64(len(buf)) <= old || s.maxBuf.CompareAndSwap(old, int64(len(buf))) {
			break
		}
	}
	n := 0
	for n < len(buf) && s.next < s.n {
		b := make([]byte, s.size)
		binary.BigEndian.PutUint64(b, uint64(s.next))
		buf[n] = b
		n++
		s.next++
	}
	if s.next == s.n {
		return n, io.EOF
	}
	return n, nil
}

func (s *bigRecords) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(s.next)) }

func (s *bigRecords) Close() error { return nil }

// TestLargeRecordsBoundedInBytes runs 400 records of 1 MiB through a keyed
// sum with checkpoints and one failure, with the default batch size (256)
// and byte bound (1 MiB). The source must be asked for one record at a time
// (not 256 MiB at once), and the result must be exactly once.
func TestLargeRecordsBoundedInBytes(t *testing.T) {
	const n, size = 400, 1 << 20
	maxBuf := &atomic.Int64{}
	fail := newFailures(250)
	g := topology.New("largerecords")
	src := topology.FromSource(g, "source", func(int, int) topology.Source[[]byte] {
		return &bigRecords{n: n, size: size, maxBuf: maxBuf}
	})
	keyed := topology.KeyBy(src, func(b []byte) int64 { return int64(binary.BigEndian.Uint64(b)) % 4 })
	sums := topology.Process(keyed, "sum", func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, []byte, kv] {
		total := topology.Value[int64](ks, "total")
		return func(ctx *topology.Context[int64], b []byte, out *topology.Collector[kv]) error {
			if len(b) != size {
				t.Errorf("record of %d bytes, want %d", len(b), size)
			}
			v := int64(binary.BigEndian.Uint64(b))
			fail.maybePanic(ctx.TaskID(), v)
			s, _ := total.Get()
			s += v
			total.Set(s)
			out.Emit(kv{ctx.Key(), s})
			return nil
		}
	}, topology.Parallelism(2))
	out := newLatest()
	topology.Sink(sums, "sink", out.put)

	store := snapshots.NewMem()
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(10*time.Millisecond), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxFailures: 5}))
	if err != nil {
		t.Fatal(err)
	}
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}

	want := map[int64]int64{}
	for v := range int64(n) {
		want[v%4] += v
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "largerecords", "sum"), want)
	assertEqualMaps(t, "sink", out.snapshot(), want)
	if fail.injected.Load() != 1 || ev.count(actors.EventRestoring) < 1 {
		t.Errorf("%d failures injected, %d restores; want one failure and a restore", fail.injected.Load(), ev.count(actors.EventRestoring))
	}
	if got := maxBuf.Load(); got != 1 {
		t.Errorf("the source was asked for up to %d records of 1 MiB in one read, want 1 (batch bytes 1 MiB)", got)
	}
}
