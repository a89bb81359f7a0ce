package dataflow

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
	"unsafe"

	"github.com/snapflow/snapflow/internal/watermark"
	"github.com/snapflow/snapflow/messages"
)

// ErrSourceIdle is returned by Source.Read when no record is available now.
// A source that returns it must call the wake function given to SetWake (see
// Waker) once records are available; until then its task waits without
// spinning.
var ErrSourceIdle = errors.New("topology: source idle")

// Source is a replayable source of records of type T, one instance per source
// task. The runtime calls its methods from one goroutine at a time.
type Source[T any] interface {
	// Open positions the source at offset, a value earlier returned by Offset,
	// or at the beginning when offset is nil. ctx stays valid until the task
	// ends: it is cancelled when the job stops, fails or rolls back, and a
	// source may keep it to interrupt a blocking Read.
	Open(ctx context.Context, offset []byte) error
	// Read fills buf with up to len(buf) records and returns how many. It
	// returns io.EOF when the source is exhausted (possibly with n > 0), and
	// ErrSourceIdle when no record is available yet. len(buf) varies: it is
	// smaller when records are large, so that a read holds about the
	// runtime's bound on batch bytes.
	//
	// Read must return promptly: while it runs, its task handles nothing
	// else (no barrier, no credit, no stop). A source waiting for records
	// returns ErrSourceIdle and calls the wake function (see Waker) once
	// they arrive; one that must block returns as soon as the context given
	// to Open is done (its error is then ignored). The runtime logs a warning
	// when a Read takes a second or more.
	Read(buf []T) (n int, err error)
	// Offset is the position just after the last record Read returned.
	Offset() []byte
	// Close releases the source.
	Close() error
}

// Waker is implemented by sources that can be idle: the runtime calls SetWake
// before Open, and the source calls wake (from any goroutine) when records
// become available after Read returned ErrSourceIdle.
type Waker interface {
	SetWake(wake func())
}

// FromSource adds a source operator. newSource is called once per task (and
// again after every restore) with the task's subtask index and the
// operator's parallelism.
func FromSource[T any](g *Graph, name string, newSource func(subtask, parallelism int) Source[T], opts ...Option) Stream[T] {
	if newSource == nil {
		g.problem("operator %q: nil source function", name)
	}
	n := g.addNode(name, KindSource, opts, func(ic *InstanceContext) (Instance, error) {
		out, err := newCollector[T](ic)
		if err != nil {
			return nil, err
		}
		src := newSource(ic.Task.Subtask, ic.Task.Parallelism)
		if src == nil {
			return nil, fmt.Errorf("source function returned nil")
		}
		return newSourceInstance(src, out, ic), nil
	})
	checkWatermarks[T](g, n)
	return Stream[T]{g: g, parts: []part{{node: n}}}
}

type sourceInstance[T any] struct {
	stateless
	// src is the source of a FromSource operator, whose position is one
	// opaque offset; split that of a FromSplits operator, whose position
	// is a list of splits. Exactly one is set.
	src       Source[T]
	split     *splitReader[T]
	buf       []T
	out       *Collector[T]
	offset    []byte
	hasOffset bool
	// size estimates the bytes of a record when they vary per record and
	// reads are bounded in bytes (nil otherwise); want is then the number of
	// records to read next, adapted to the sizes seen so that one read
	// holds about batchBytes.
	size       func(unsafe.Pointer) int
	batchBytes int
	want       int
	// clock stamps the records and derives the watermark of a source with
	// a watermark strategy (nil otherwise).
	clock *sourceClock[T]
}

// newSourceInstance sizes the read buffer: BatchSize records, fewer when
// records of a static size would exceed BatchBytes. Records of variable size
// are read adaptively, starting with one.
func newSourceInstance[T any](src Source[T], out *Collector[T], ic *InstanceContext) *sourceInstance[T] {
	limit, size := byteLimits[T](ic.BatchSize, ic.BatchBytes)
	s := &sourceInstance[T]{src: src, out: out, buf: make([]T, limit), size: size, batchBytes: ic.BatchBytes, want: 1}
	if n := ic.Task.node; n != nil {
		if ws, ok := n.watermarks.(WatermarkStrategy[T]); ok {
			s.clock = newSourceClock(ws, limit)
		}
	}
	return s
}

func (s *sourceInstance[T]) Open(ctx context.Context, wake func()) error {
	if s.split != nil {
		if err := s.split.open(ctx, wake); err != nil {
			return err
		}
		if s.clock != nil && s.clock.splits != nil {
			// Splits the source added in Open (partitions it found, say)
			// count from the start too.
			s.clock.splits.open(s.split.opened)
			s.clock.splits.grow(len(s.split.src.Splits()))
		}
		return nil
	}
	if w, ok := s.src.(Waker); ok {
		w.SetWake(wake)
	}
	var off []byte
	if s.hasOffset {
		// A restored offset may be empty, and a snapshot read back from
		// protobuf holds nil for it; it must still not read as "from the
		// beginning", which Source.Open reserves for a nil offset.
		off = s.offset
		if off == nil {
			off = []byte{}
		}
	}
	return s.src.Open(ctx, off)
}

func (s *sourceInstance[T]) read(buf []T) (int, error) {
	if s.split != nil {
		return s.split.src.Read(buf)
	}
	return s.src.Read(buf)
}

// readStamped reads into buf and stamps the records with event time when
// the source has a watermark strategy (ts nil otherwise).
func (s *sourceInstance[T]) readStamped(buf []T) (n int, ts []int64, err error) {
	if s.split != nil && s.split.reader != nil {
		r, err := s.split.reader.ReadSplit(buf)
		if r.N < 0 || r.N > len(buf) {
			return 0, nil, fmt.Errorf("ReadSplit returned %d records for a buffer of %d", r.N, len(buf))
		}
		if s.clock != nil {
			var serr error
			if ts, serr = s.clock.stampSplit(buf[:r.N], r, time.Now().UnixNano()); serr != nil {
				return 0, nil, serr
			}
		}
		return r.N, ts, err
	}
	n, err = s.read(buf)
	if s.clock != nil {
		ts = s.clock.stampAll(buf[:n], time.Now().UnixNano())
	}
	return n, ts, err
}

// Produce reads up to maxRecords records, fewer when they are large (see
// newSourceInstance), and emits them.
func (s *sourceInstance[T]) Produce(maxRecords int) (int, SourceStatus, error) {
	buf := s.buf
	if s.size != nil && s.want < len(buf) {
		buf = buf[:s.want]
	}
	if maxRecords < len(buf) {
		buf = buf[:max(0, maxRecords)]
	}
	n, ts, err := s.readStamped(buf)
	if bytes := s.out.emitAll(buf[:n], ts); s.size != nil {
		s.adapt(n, bytes)
	}
	clear(buf[:n])
	switch {
	case err == nil:
		return n, SourceMore, nil
	case errors.Is(err, io.EOF):
		return n, SourceDone, nil
	case errors.Is(err, ErrSourceIdle):
		return n, SourceIdle, nil
	}
	return n, SourceMore, err
}

// adapt sets the number of records to read next from the n records of
// bytes just read: as many as fit batchBytes at their average size, growing
// at most twofold per read (records may grow too) and shrinking at once.
func (s *sourceInstance[T]) adapt(n, bytes int) {
	if n == 0 {
		return
	}
	fit := max(1, s.batchBytes/max(1, bytes/n))
	s.want = min(len(s.buf), fit, 2*s.want)
}

func (s *sourceInstance[T]) ProcessBatch(int, any, []int64) error {
	return fmt.Errorf("a source has no inputs")
}

func (s *sourceInstance[T]) Flush()        { s.out.flush() }
func (s *sourceInstance[T]) Pending() bool { return s.out.pending() }

// SourceWatermark implements WatermarkSource.
func (s *sourceInstance[T]) SourceWatermark() watermark.Status {
	if s.clock == nil {
		return watermark.Status{Watermark: minTime}
	}
	return s.clock.status()
}

// IdleCheck implements WatermarkSource.
func (s *sourceInstance[T]) IdleCheck() (time.Duration, bool) {
	if s.clock == nil {
		return 0, false
	}
	return s.clock.idleCheck()
}

func (s *sourceInstance[T]) Snapshot(st *messages.TaskState) error {
	if s.clock != nil {
		st.EventTime = &messages.SourceEventTime{MaxTimestamp: s.clock.gen.MaxTimestamp(), QuietNanos: s.clock.gen.Idleness().Quiet()}
	}
	if s.split != nil {
		if err := s.split.snapshot(st); err != nil {
			return err
		}
		if s.clock != nil && s.clock.splits != nil {
			et := st.EventTime
			et.MaxTimestamp, et.SplitMaxTimestamps, et.SplitQuietNanos = s.clock.splits.snapshot(len(st.Splits))
		}
		return nil
	}
	st.SourceOffset = append([]byte(nil), s.src.Offset()...)
	st.HasSourceOffset = true
	return nil
}

func (s *sourceInstance[T]) Restore(st *messages.TaskState) error {
	if et := st.GetEventTime(); et != nil && s.clock != nil {
		s.clock.gen.Restore(et.GetMaxTimestamp())
		s.clock.gen.Idleness().Restore(et.GetQuietNanos())
		if sc := s.clock.splits; sc != nil {
			sc.fallback, sc.restored, sc.restoredQuiet = et.GetMaxTimestamp(), nil, nil
			if len(et.GetSplitMaxTimestamps()) == len(st.GetSplits()) {
				sc.restored = et.GetSplitMaxTimestamps()
			}
			if len(et.GetSplitQuietNanos()) == len(st.GetSplits()) {
				sc.restoredQuiet = et.GetSplitQuietNanos()
			}
		}
	}
	if s.split != nil {
		return s.split.restore(st)
	}
	if st.GetHasSplits() {
		return fmt.Errorf("the checkpoint holds the source's position as %d splits (it was a split source, see FromSplits), but the source now keeps one offset: restore it with a split source",
			len(st.GetSplits()))
	}
	s.offset, s.hasOffset = st.SourceOffset, st.HasSourceOffset
	return nil
}

func (s *sourceInstance[T]) Close() error {
	if s.split != nil {
		return s.split.src.Close()
	}
	return s.src.Close()
}

// Generate adds a source whose records are gen(i) for i = 0, 1, ... count-1
// (unbounded when count < 0). With parallelism p, task s produces the indices
// i with i % p == s, in order.
//
// Its position is a list of splits (see FromSplits), one per task when the
// job starts: the residue class of the task's indices and how many it has
// produced. A job restored at another parallelism deals the splits out to
// its tasks, and divides them (a class modulo p into two modulo 2p) when
// there are more tasks than splits, so every index is produced exactly
// once. GeneratedRecords reads the count back from a stored state.
func Generate[T any](g *Graph, name string, count int64, gen func(i int64) T, opts ...Option) Stream[T] {
	if gen == nil {
		g.problem("operator %q: nil generator function", name)
	}
	spec := &splitSpec{
		initial: func(parallelism int) [][]byte {
			out := make([][]byte, parallelism)
			for s := range out {
				out[s] = genSplit{next: int64(s), step: int64(parallelism)}.encode()
			}
			return out
		},
		divide: func(b []byte) ([]byte, []byte, bool) {
			sp, err := decodeGenSplit(b)
			if err != nil || (count >= 0 && sp.next+sp.step >= count) {
				return nil, nil, false // fewer than two records left
			}
			a := genSplit{next: sp.next, step: 2 * sp.step, emitted: sp.emitted}
			c := genSplit{next: sp.next + sp.step, step: 2 * sp.step}
			return a.encode(), c.encode(), true
		},
		fromOffset: func(subtask, parallelism int, offset []byte) ([][]byte, error) {
			n, err := DecodeCountOffset(offset)
			if err != nil {
				return nil, err
			}
			sp := genSplit{next: int64(subtask) + n*int64(parallelism), step: int64(parallelism), emitted: n}
			return [][]byte{sp.encode()}, nil
		},
	}
	return fromSplits(g, name, spec, func(int, int) SplitSource[T] {
		return &generator[T]{gen: gen, count: count}
	}, opts)
}

// Sequence adds a source of the numbers from..to inclusive, in order.
func Sequence(g *Graph, name string, from, to int64, opts ...Option) Stream[int64] {
	return Generate(g, name, max(0, to-from+1), func(i int64) int64 { return from + i }, opts...)
}

// FromSlice adds a source of the items of a slice, which must not change
// while the job runs.
func FromSlice[T any](g *Graph, name string, items []T, opts ...Option) Stream[T] {
	return Generate(g, name, int64(len(items)), func(i int64) T { return items[i] }, opts...)
}

// genSplit is a split of a generator: the indices next, next+step, ...
// below the count, and the records produced from the split so far.
type genSplit struct {
	next, step, emitted int64
}

const genSplitSize = 24

func (s genSplit) encode() []byte {
	b := make([]byte, 0, genSplitSize)
	b = binary.BigEndian.AppendUint64(b, uint64(s.next))
	b = binary.BigEndian.AppendUint64(b, uint64(s.step))
	return binary.BigEndian.AppendUint64(b, uint64(s.emitted))
}

func decodeGenSplit(b []byte) (genSplit, error) {
	if len(b) != genSplitSize {
		return genSplit{}, fmt.Errorf("topology: generator split of %d bytes, want %d", len(b), genSplitSize)
	}
	s := genSplit{
		next:    int64(binary.BigEndian.Uint64(b)),
		step:    int64(binary.BigEndian.Uint64(b[8:])),
		emitted: int64(binary.BigEndian.Uint64(b[16:])),
	}
	if s.next < 0 || s.step < 1 || s.emitted < 0 {
		return genSplit{}, fmt.Errorf("topology: generator split next=%d step=%d emitted=%d is invalid", s.next, s.step, s.emitted)
	}
	return s, nil
}

// generator produces gen(i) for the indices of its splits, below count. A
// read fills the buffer from one split; the next read moves to the next.
// It is a SplitReader: each split keeps its own watermark.
type generator[T any] struct {
	gen    func(int64) T
	count  int64
	splits []genSplit
	told   []bool // the split's end was reported (SplitRead.Done)
	cur    int
}

func (s *generator[T]) Open(_ context.Context, splits [][]byte) error {
	s.splits, s.told, s.cur = make([]genSplit, len(splits)), make([]bool, len(splits)), 0
	for i, b := range splits {
		sp, err := decodeGenSplit(b)
		if err != nil {
			return err
		}
		s.splits[i] = sp
	}
	return nil
}

func (s *generator[T]) done(sp *genSplit) bool { return s.count >= 0 && sp.next >= s.count }

func (s *generator[T]) Read(buf []T) (int, error) {
	r, err := s.ReadSplit(buf)
	return r.N, err
}

// ReadSplit implements SplitReader.
func (s *generator[T]) ReadSplit(buf []T) (SplitRead, error) {
	for range s.splits {
		i := s.cur
		sp := &s.splits[i]
		s.cur = (s.cur + 1) % len(s.splits)
		if s.done(sp) {
			if !s.told[i] {
				s.told[i] = true
				return SplitRead{Split: i, Done: true}, nil
			}
			continue
		}
		n := 0
		for n < len(buf) && !s.done(sp) {
			buf[n] = s.gen(sp.next)
			n++
			sp.next += sp.step
		}
		sp.emitted += int64(n)
		r := SplitRead{N: n, Split: i, Done: s.done(sp)}
		s.told[i] = r.Done
		if n < len(buf) && s.exhausted() { // as a full read, the end shows on the next one
			return r, io.EOF
		}
		return r, nil
	}
	return SplitRead{}, io.EOF
}

func (s *generator[T]) exhausted() bool {
	for i := range s.splits {
		if !s.done(&s.splits[i]) {
			return false
		}
	}
	return true
}

func (s *generator[T]) Splits() [][]byte {
	out := make([][]byte, len(s.splits))
	for i, sp := range s.splits {
		out[i] = sp.encode()
	}
	return out
}

func (s *generator[T]) Close() error { return nil }

// DecodeCountOffset decodes the offset that the built-in sources (Generate,
// Sequence, FromSlice) stored before their position became a list of
// splits: the number of records the task had produced.
func DecodeCountOffset(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("topology: source offset of %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// GeneratedRecords returns how many records the task of a built-in source
// (Generate, Sequence, FromSlice) whose stored state is st had produced: the
// sum over its splits, or its offset in states that predate splits. After a
// restore at another parallelism a task's splits carry the counts of the
// tasks they came from (a divided split's count stays with its first
// half), so the sum over all the operator's tasks is the operator's total.
func GeneratedRecords(st *messages.TaskState) (int64, error) {
	switch {
	case st.GetHasSplits():
		var n int64
		for _, b := range st.GetSplits() {
			sp, err := decodeGenSplit(b)
			if err != nil {
				return 0, fmt.Errorf("topology: task %s: %w", st.GetTaskId(), err)
			}
			n += sp.emitted
		}
		return n, nil
	case st.GetHasSourceOffset():
		return DecodeCountOffset(st.GetSourceOffset())
	}
	return 0, fmt.Errorf("topology: task %s holds no source position", st.GetTaskId())
}
