package topology

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"unsafe"

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
	return Stream[T]{g: g, parts: []part{{node: n}}}
}

type sourceInstance[T any] struct {
	stateless
	src       Source[T]
	out       *Collector[T]
	buf       []T
	offset    []byte
	hasOffset bool
	// size estimates the bytes of a record when they vary per record and
	// reads are bounded in bytes (nil otherwise); want is then the number of
	// records to read next, adapted to the sizes seen so that one read
	// holds about batchBytes.
	size       func(unsafe.Pointer) int
	batchBytes int
	want       int
}

// newSourceInstance sizes the read buffer: BatchSize records, fewer when
// records of a static size would exceed BatchBytes. Records of variable size
// are read adaptively, starting with one.
func newSourceInstance[T any](src Source[T], out *Collector[T], ic *InstanceContext) *sourceInstance[T] {
	limit, size := byteLimits[T](ic.BatchSize, ic.BatchBytes)
	return &sourceInstance[T]{src: src, out: out, buf: make([]T, limit), size: size, batchBytes: ic.BatchBytes, want: 1}
}

func (s *sourceInstance[T]) Open(ctx context.Context, wake func()) error {
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
	n, err := s.src.Read(buf)
	if s.size == nil {
		for i := 0; i < n; i++ {
			s.out.Emit(buf[i])
		}
	} else {
		bytes := 0
		for i := 0; i < n; i++ {
			size := s.size(unsafe.Pointer(&buf[i]))
			bytes += size
			s.out.emitSized(buf[i], size)
		}
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

func (s *sourceInstance[T]) ProcessBatch(int, any) error {
	return fmt.Errorf("a source has no inputs")
}

func (s *sourceInstance[T]) Flush() { s.out.flush() }

func (s *sourceInstance[T]) Snapshot(st *messages.TaskState) error {
	st.SourceOffset = append([]byte(nil), s.src.Offset()...)
	st.HasSourceOffset = true
	return nil
}

func (s *sourceInstance[T]) Restore(st *messages.TaskState) error {
	s.offset, s.hasOffset = st.SourceOffset, st.HasSourceOffset
	return nil
}

func (s *sourceInstance[T]) Close() error { return s.src.Close() }

// Generate adds a source whose records are gen(i) for i = 0, 1, ... count-1
// (unbounded when count < 0). With parallelism p, task s produces the indices
// i with i % p == s. The offset is the number of records produced.
func Generate[T any](g *Graph, name string, count int64, gen func(i int64) T, opts ...Option) Stream[T] {
	if gen == nil {
		g.problem("operator %q: nil generator function", name)
	}
	return FromSource(g, name, func(subtask, parallelism int) Source[T] {
		return &generator[T]{gen: gen, count: count, start: int64(subtask), step: int64(parallelism)}
	}, opts...)
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

// generator produces gen(start), gen(start+step), ... below count.
type generator[T any] struct {
	gen         func(int64) T
	count       int64
	start, step int64
	emitted     int64 // records produced so far: the offset
}

func (s *generator[T]) Open(_ context.Context, offset []byte) error {
	s.emitted = 0
	if offset != nil {
		n, err := DecodeCountOffset(offset)
		if err != nil {
			return err
		}
		s.emitted = n
	}
	return nil
}

func (s *generator[T]) Read(buf []T) (int, error) {
	n := 0
	i := s.start + s.emitted*s.step
	for n < len(buf) {
		if s.count >= 0 && i >= s.count {
			s.emitted += int64(n)
			return n, io.EOF
		}
		buf[n] = s.gen(i)
		n++
		i += s.step
	}
	s.emitted += int64(n)
	return n, nil
}

func (s *generator[T]) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(s.emitted)) }

func (s *generator[T]) Close() error { return nil }

// DecodeCountOffset decodes the offset of the built-in sources (Generate,
// Sequence, FromSlice): the number of records the task has produced.
func DecodeCountOffset(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("topology: source offset of %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}
