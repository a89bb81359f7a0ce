package dataflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// sourceTask creates the source instance of task id with its own fake sender.
func sourceTask(t *testing.T, p *Plan, id string, batchSize int) (SourceInstance, *fakeSender) {
	t.Helper()
	f := &fakeSender{}
	inst := mustInstance(t, p, id, batchSize, f)
	si, ok := inst.(SourceInstance)
	if !ok {
		t.Fatalf("%s: %T is not a SourceInstance", id, inst)
	}
	return si, f
}

// drain produces from src in reads of up to max records until it is done,
// and returns the records emitted.
func drain[T any](t *testing.T, src SourceInstance, f *fakeSender, max int) []T {
	t.Helper()
	for range 10000 {
		n, status, err := src.Produce(max)
		if err != nil {
			t.Fatalf("Produce: %v", err)
		}
		if n > max {
			t.Fatalf("Produce(%d) read %d records", max, n)
		}
		if status == SourceDone {
			src.Flush()
			return records[T](t, f)
		}
		if status != SourceMore {
			t.Fatalf("Produce status %d", status)
		}
	}
	t.Fatal("the source never finished")
	return nil
}

// runSource plans the stream's graph with a sink and returns what every
// source task emits, by task id.
func runSource[T any](t *testing.T, g *Graph, s Stream[T], parallelism int) map[string][]T {
	t.Helper()
	Sink(s, "sink", discard[T], Parallelism(parallelism))
	p := mustPlan(t, g)
	out := map[string][]T{}
	for i := range parallelism {
		id := fmt.Sprintf("src#%d", i)
		src, f := sourceTask(t, p, id, 4)
		if err := src.Open(t.Context(), func() {}); err != nil {
			t.Fatal(err)
		}
		out[id] = drain[T](t, src, f, 3)
		if err := src.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func TestBuiltinSources(t *testing.T) {
	items := []string{"a", "b", "c", "d", "e", "f", "g"}
	for _, par := range []int{1, 3} {
		t.Run(fmt.Sprint("parallelism ", par), func(t *testing.T) {
			g := New("job")
			checkSplit(t, runSource(t, g, Sequence(g, "src", 10, 20, Parallelism(par)), par),
				[]int64{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
			g = New("job")
			checkSplit(t, runSource(t, g, Generate(g, "src", 6, func(i int64) string { return strings.Repeat("x", int(i)) }, Parallelism(par)), par),
				[]string{"", "x", "xx", "xxx", "xxxx", "xxxxx"})
			g = New("job")
			checkSplit(t, runSource(t, g, FromSlice(g, "src", items, Parallelism(par)), par), items)
			g = New("job")
			checkSplit(t, runSource(t, g, Sequence(g, "src", 5, 4, Parallelism(par)), par), []int64(nil))
		})
	}
}

// checkSplit checks that subtask s of p emitted exactly want[i] for i % p == s, in order.
func checkSplit[T comparable](t *testing.T, got map[string][]T, want []T) {
	t.Helper()
	p := len(got)
	for s := range p {
		var w []T
		for i := s; i < len(want); i += p {
			w = append(w, want[i])
		}
		id := fmt.Sprintf("src#%d", s)
		if !slices.Equal(got[id], w) {
			t.Errorf("%s of %d emitted %v, want %v", id, p, got[id], w)
		}
	}
}

func TestSourceDoneStatus(t *testing.T) {
	g := New("job")
	Sink(Sequence(g, "src", 1, 6), "sink", discard[int64])
	p := mustPlan(t, g)
	src, _ := sourceTask(t, p, "src#0", 3)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 4 {
		n, status, err := src.Produce(3)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d/%d", n, status))
	}
	// Two full reads, then the end with nothing, and it stays done.
	want := fmt.Sprintf("[3/%d 3/%d 0/%d 0/%d]", SourceMore, SourceMore, SourceDone, SourceDone)
	if fmt.Sprint(got) != want {
		t.Errorf("Produce results %v, want %s", got, want)
	}

	src, _ = sourceTask(t, p, "src#0", 4)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n, status, err := src.Produce(100); n != 4 || status != SourceMore || err != nil {
		t.Errorf("Produce(100) with batches of 4 = %d, %d, %v; want 4 records", n, status, err)
	}
	if n, status, err := src.Produce(100); n != 2 || status != SourceDone || err != nil {
		t.Errorf("last Produce = %d, %d, %v; want the 2 last records and SourceDone", n, status, err)
	}
}

func TestSourceResumeAtOffset(t *testing.T) {
	for _, par := range []int{1, 3} {
		for _, before := range []int{0, 1, 2, 5, 100} {
			t.Run(fmt.Sprintf("p=%d/after %d reads", par, before), func(t *testing.T) {
				g := New("job")
				Sink(Sequence(g, "src", 0, 40, Parallelism(par)), "sink", discard[int64])
				p := mustPlan(t, g)
				var all []int64
				for s := range par {
					id := fmt.Sprintf("src#%d", s)
					src, f := sourceTask(t, p, id, 4)
					if err := src.Open(t.Context(), nil); err != nil {
						t.Fatal(err)
					}
					for range before {
						if _, _, err := src.Produce(2); err != nil {
							t.Fatal(err)
						}
					}
					src.Flush()
					first := records[int64](t, f)
					var st messages.TaskState
					if err := src.Snapshot(&st); err != nil {
						t.Fatal(err)
					}
					if !st.HasSplits || len(st.Splits) != 1 {
						t.Fatalf("a source snapshot holds %d splits (has_splits %t), want its one split", len(st.Splits), st.HasSplits)
					}
					n, err := GeneratedRecords(&st)
					if err != nil || n != int64(len(first)) {
						t.Errorf("offset after %d records = %d, %v", len(first), n, err)
					}

					again, f2 := sourceTask(t, p, id, 4)
					if err := again.Restore(&st); err != nil {
						t.Fatal(err)
					}
					if err := again.Open(t.Context(), nil); err != nil {
						t.Fatal(err)
					}
					rest := drain[int64](t, again, f2, 3)
					all = append(all, first...)
					all = append(all, rest...)
				}
				slices.Sort(all)
				want := make([]int64, 41)
				for i := range want {
					want[i] = int64(i)
				}
				if !slices.Equal(all, want) {
					t.Errorf("records before and after the restore = %v, want 0..40 once each", all)
				}
			})
		}
	}
}

func TestSourceRestoreWithoutOffset(t *testing.T) {
	g := New("job")
	Sink(Sequence(g, "src", 1, 3), "sink", discard[int64])
	src, f := sourceTask(t, mustPlan(t, g), "src#0", 8)
	if err := src.Restore(&messages.TaskState{}); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if got := drain[int64](t, src, f, 8); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Errorf("a source restored without offset emitted %v, want 1..3", got)
	}
}

func TestSourceBadOffset(t *testing.T) {
	g := New("job")
	Sink(Sequence(g, "src", 1, 3), "sink", discard[int64])
	src, _ := sourceTask(t, mustPlan(t, g), "src#0", 8)
	// An offset from before splits is converted when it is restored.
	if err := src.Restore(&messages.TaskState{SourceOffset: []byte{1, 2}, HasSourceOffset: true}); err == nil || !strings.Contains(err.Error(), "source offset of 2 bytes, want 8") {
		t.Errorf("Restore at a 2-byte offset: %v", err)
	}
	src, _ = sourceTask(t, mustPlan(t, g), "src#0", 8)
	if err := src.Restore(&messages.TaskState{Splits: [][]byte{{1, 2}}, HasSplits: true}); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(t.Context(), nil); err == nil || !strings.Contains(err.Error(), "generator split of 2 bytes, want 24") {
		t.Errorf("Open at a 2-byte split: %v", err)
	}
}

func TestDecodeCountOffset(t *testing.T) {
	for _, b := range [][]byte{nil, {}, {1}, make([]byte, 7), make([]byte, 9)} {
		if _, err := DecodeCountOffset(b); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%d bytes, want 8", len(b))) {
			t.Errorf("DecodeCountOffset(%d bytes) = %v", len(b), err)
		}
	}
	if n, err := DecodeCountOffset([]byte{0, 0, 0, 0, 0, 0, 1, 2}); n != 258 || err != nil {
		t.Errorf("DecodeCountOffset = %d, %v, want 258", n, err)
	}
}

func TestGenerateUnbounded(t *testing.T) {
	g := New("job")
	Sink(Generate(g, "src", -1, func(i int64) int64 { return i * i }, Parallelism(2)), "sink", discard[int64], Parallelism(2))
	src, f := sourceTask(t, mustPlan(t, g), "src#1", 100)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		if n, status, err := src.Produce(50); n != 50 || status != SourceMore || err != nil {
			t.Fatalf("Produce = %d, %d, %v", n, status, err)
		}
	}
	src.Flush()
	got := records[int64](t, f)
	if len(got) != 500 || got[0] != 1 || got[1] != 9 || got[499] != 999*999 {
		t.Errorf("unbounded generator of subtask 1 emitted %d records starting %v", len(got), got[:min(3, len(got))])
	}
}

// scripted is a Source whose reads follow a script.
type scripted struct {
	reads    []error // the error of each read; each read returns one record
	i        int
	wake     func()
	opened   bool
	offset   []byte // the offset Open received
	gotNil   bool   // Open received a nil offset
	emptyOff bool   // Offset returns an empty, non-nil offset
}

func (s *scripted) SetWake(wake func()) {
	if s.opened {
		panic("SetWake after Open")
	}
	s.wake = wake
}

func (s *scripted) Open(_ context.Context, offset []byte) error {
	s.opened, s.offset, s.gotNil = true, offset, offset == nil
	return nil
}

func (s *scripted) Read(buf []int) (int, error) {
	if s.i >= len(s.reads) {
		return 0, io.EOF
	}
	err := s.reads[s.i]
	s.i++
	if errors.Is(err, ErrSourceIdle) {
		return 0, err
	}
	buf[0] = s.i
	return 1, err
}

func (s *scripted) Offset() []byte {
	if s.emptyOff {
		return []byte{}
	}
	return []byte{byte(s.i)}
}

func (s *scripted) Close() error { return nil }

func scriptedPlan(t *testing.T, src *scripted) *Plan {
	t.Helper()
	g := New("job")
	Sink(FromSource(g, "src", func(int, int) Source[int] { return src }), "sink", discard[int])
	return mustPlan(t, g)
}

func TestSourceIdleAndWake(t *testing.T) {
	boom := errors.New("boom")
	s := &scripted{reads: []error{nil, ErrSourceIdle, nil, boom, io.EOF}}
	src, f := sourceTask(t, scriptedPlan(t, s), "src#0", 4)
	woken := make(chan struct{}, 1)
	if err := src.Open(t.Context(), func() { woken <- struct{}{} }); err != nil {
		t.Fatal(err)
	}
	if s.wake == nil {
		t.Fatal("SetWake was not called before Open")
	}
	type result struct {
		n      int
		status SourceStatus
		err    error
	}
	var got []result
	for range 5 {
		n, status, err := src.Produce(4)
		got = append(got, result{n, status, err})
		if status == SourceIdle {
			go s.wake() // as a source would, from its own goroutine
			<-woken
		}
	}
	want := []result{{1, SourceMore, nil}, {0, SourceIdle, nil}, {1, SourceMore, nil}, {1, SourceMore, boom}, {1, SourceDone, nil}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Produce results %v, want %v", got, want)
	}
	if !errors.Is(got[3].err, boom) {
		t.Errorf("a read error is not returned: %v", got[3].err)
	}
	src.Flush()
	if r := records[int](t, f); !slices.Equal(r, []int{1, 3, 4, 5}) {
		t.Errorf("emitted %v, want [1 3 4 5]", r)
	}
}

// TestSourceEmptyOffset checks that an empty offset, once restored, does not
// reach Open as nil, which means "from the beginning".
func TestSourceEmptyOffset(t *testing.T) {
	s := &scripted{emptyOff: true}
	p := scriptedPlan(t, s)
	src, _ := sourceTask(t, p, "src#0", 1)
	var st messages.TaskState
	if err := src.Snapshot(&st); err != nil {
		t.Fatal(err)
	}
	st2 := wireRoundTrip(t, &st)
	if err := src.Restore(st2); err != nil {
		t.Fatal(err)
	}
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if s.gotNil || len(s.offset) != 0 {
		t.Errorf("Open after restoring an empty offset got %v (nil: %t), want an empty non-nil offset", s.offset, s.gotNil)
	}

	s2 := &scripted{}
	src, _ = sourceTask(t, scriptedPlan(t, s2), "src#0", 1)
	if err := src.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if !s2.gotNil {
		t.Error("Open without a restored offset did not get nil")
	}
}

func TestSourceInstanceErrors(t *testing.T) {
	g := New("job")
	Sink(FromSource(g, "src", func(int, int) Source[int] { return nil }), "sink", discard[int])
	p := mustPlan(t, g)
	if _, err := p.NewInstance(0, InstanceContext{Sender: noopSender{}}); err == nil ||
		err.Error() != "topology: task src#0: source function returned nil" {
		t.Errorf("NewInstance with a nil source: %v", err)
	}
	s := &scripted{}
	src, _ := sourceTask(t, scriptedPlan(t, s), "src#0", 1)
	if err := src.ProcessBatch(0, []int{1}, nil); err == nil {
		t.Error("ProcessBatch of a source succeeded")
	}
}

// byteSource creates the source instance of task src#0 of a graph with a
// byte bound on batches, and opens it.
func byteSource(t *testing.T, g *Graph, batchSize, batchBytes int, s Sender) SourceInstance {
	t.Helper()
	p := mustPlan(t, g)
	inst, err := p.NewInstance(mustTask(t, p, "src#0").Index, InstanceContext{BatchSize: batchSize, BatchBytes: batchBytes, Sender: s})
	if err != nil {
		t.Fatal(err)
	}
	src := inst.(SourceInstance)
	if err := src.Open(t.Context(), func() {}); err != nil {
		t.Fatal(err)
	}
	return src
}

// reads produces until the source is done and returns the records of each
// Produce.
func reads(t *testing.T, src SourceInstance, maxRecords int) []int {
	t.Helper()
	var ns []int
	for range 100000 {
		n, status, err := src.Produce(maxRecords)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, n)
		if status == SourceDone {
			return ns
		}
	}
	t.Fatal("the source never finished")
	return nil
}

// TestProduceLargeRecords checks that a source reads 1 MiB records one at a
// time with a bound of 1 MiB, though the runtime asks for 256, and still
// emits every record in order.
func TestProduceLargeRecords(t *testing.T) {
	const mib = 1 << 20
	g := New("job")
	Sink(Generate(g, "src", 20, func(i int64) []byte {
		b := make([]byte, mib)
		b[0] = byte(i)
		return b
	}), "sink", discard[[]byte])
	f := &fakeSender{}
	src := byteSource(t, g, 256, mib, f)
	ns := reads(t, src, 256)
	if slices.Max(ns) != 1 {
		t.Errorf("records per read %v, want at most 1", ns)
	}
	src.Flush()
	got := records[[]byte](t, f)
	if len(got) != 20 {
		t.Fatalf("emitted %d records, want 20", len(got))
	}
	for i, b := range got {
		if len(b) != mib || b[0] != byte(i) {
			t.Fatalf("record %d: %d bytes starting %d", i, len(b), b[0])
		}
	}
}

// TestProduceAdaptsToRecordSize checks that reads of variable-size records
// hold about the byte bound: they grow from one record while records are
// small, up to what fits, and shrink at once when records grow.
func TestProduceAdaptsToRecordSize(t *testing.T) {
	const kib = 1 << 10
	medium := strings.Repeat("m", 100*kib)
	g := New("job")
	Sink(Generate(g, "src", 300, func(int64) string { return medium }), "sink", discard[string])
	ns := reads(t, byteSource(t, g, 256, 1<<20, noopSender{}), 256)
	// 1 MiB holds 10 records of 100 KiB (and 16 bytes).
	if want := []int{1, 2, 4, 8, 10, 10}; !slices.Equal(ns[:6], want) {
		t.Errorf("records per read of 100 KiB strings %v, want %v then 10s", ns, want)
	}
	if slices.Max(ns) != 10 {
		t.Errorf("records per read of 100 KiB strings %v, want at most 10", ns)
	}

	g = New("job")
	Sink(Generate(g, "src", 2000, func(int64) string { return "abc" }), "sink", discard[string])
	ns = reads(t, byteSource(t, g, 256, 1<<20, noopSender{}), 256)
	if !slices.Contains(ns[:12], 256) {
		t.Errorf("records per read of small strings %v, want full reads of 256 within 12 reads", ns)
	}

	// Small records, then large ones: the read after the first large
	// records takes one.
	g = New("job")
	big := strings.Repeat("b", 2<<20)
	Sink(Generate(g, "src", 400, func(i int64) string {
		if i < 100 {
			return "abc"
		}
		return big
	}), "sink", discard[string])
	ns = reads(t, byteSource(t, g, 64, 1<<20, noopSender{}), 64)
	total := 0
	for i, n := range ns {
		total += n
		if total > 100 {
			if i+1 < len(ns) && ns[i+1] != 1 {
				t.Errorf("records per read %v: after the first 2 MiB records came, a read of %d", ns, ns[i+1])
			}
			break
		}
	}
}

// TestProduceStaticSizeRecords checks that records of a large static size
// are read in a fixed number per read, from the first read.
func TestProduceStaticSizeRecords(t *testing.T) {
	type block [128 << 10]byte
	g := New("job")
	Sink(Generate(g, "src", 40, func(int64) block { return block{} }), "sink", discard[block])
	ns := reads(t, byteSource(t, g, 256, 1<<20, noopSender{}), 256)
	if want := []int{8, 8, 8, 8, 8, 0}; !slices.Equal(ns, want) {
		t.Errorf("records per read of 128 KiB arrays %v, want %v", ns, want)
	}

	g = New("job")
	Sink(Sequence(g, "src", 1, 1000), "sink", discard[int64])
	ns = reads(t, byteSource(t, g, 256, 1<<20, noopSender{}), 256)
	if want := []int{256, 256, 256, 232}; !slices.Equal(ns, want) {
		t.Errorf("records per read of int64 %v, want %v", ns, want)
	}
}

// TestProduceSizedAllocs checks that sizing the records a source reads
// allocates nothing per record.
func TestProduceSizedAllocs(t *testing.T) {
	g := New("job")
	Sink(Generate(g, "src", -1, func(int64) string { return "payload" }), "sink", discard[string])
	src := byteSource(t, g, 4096, 1<<40, noopSender{})
	for range 20 { // grow the reads to 4096 records
		if _, _, err := src.Produce(4096); err != nil {
			t.Fatal(err)
		}
	}
	if a := testing.AllocsPerRun(20, func() {
		if n, _, err := src.Produce(4096); n != 4096 || err != nil {
			t.Fatalf("Produce = %d, %v; want 4096 records", n, err)
		}
	}); a > 4 {
		t.Errorf("a Produce of 4096 sized records allocates %.1f times, want at most a few per batch", a)
	}
}
