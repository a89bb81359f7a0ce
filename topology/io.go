package topology

import (
	"context"

	"github.com/snapflow/snapflow/internal/dataflow"
)

// Source is a replayable source of records of type T, one instance per
// source task; the runtime calls its methods from one goroutine at a time:
//
//	Open(ctx context.Context, offset []byte) error // at offset (nil: the beginning)
//	Read(buf []T) (n int, err error)               // io.EOF at the end, ErrSourceIdle when none yet
//	Offset() []byte                                // the position just after the last record read
//	Close() error
//
// Read must return promptly: while it runs, its task handles nothing else
// (no barrier, no credit, no stop). A source waiting for records returns
// ErrSourceIdle and calls the wake function of Waker once they arrive; one
// that must block returns as soon as the context given to Open is done.
// The interface's definition documents each method in full.
type Source[T any] = dataflow.Source[T]

// Waker is implemented by sources that can be idle: the runtime calls
// SetWake before Open, and the source calls wake (from any goroutine) when
// records become available after Read returned ErrSourceIdle.
//
//	SetWake(wake func()) // called once, before Open
type Waker = dataflow.Waker

// FromSource adds a source operator. newSource is called once per task
// (and again after every restore) with the task's subtask index and the
// operator's parallelism; each task keeps its own offset.
func FromSource[T any](g *Graph, name string, newSource func(subtask, parallelism int) Source[T], opts ...Option) Stream[T] {
	return dataflow.FromSource(g, name, newSource, opts...)
}

// SplitSource is a replayable source whose position is a list of splits
// (one per partition of a topic, say), which can move between tasks: a job
// restored at another parallelism deals them out again. It is a Source
// whose Open takes the states of its splits and whose Splits returns them:
//
//	Open(ctx context.Context, splits [][]byte) error // may be empty: the task ends at once
//	Read(buf []T) (n int, err error)                 // as Source.Read
//	Splits() [][]byte                                // every split's state after the last record read
//	Close() error
type SplitSource[T any] = dataflow.SplitSource[T]

// SplitReader is implemented by a SplitSource whose every read returns
// records of one split:
//
//	ReadSplit(buf []T) (SplitRead, error) // Read, saying which split the records came from
//
// With a watermark strategy (WithWatermarks), such a source keeps a
// watermark per split, and its task's watermark is the lowest over the
// splits that are neither idle nor ended: one lagging split holds event
// time back, an idle one does not. Splits hold event time back from the
// start until they read, go idle or end (SplitRead.Done). Generate,
// Sequence, FromSlice and the Kafka source are SplitReaders.
type SplitReader[T any] = dataflow.SplitReader[T]

// SplitRead is what one ReadSplit returned: the number of records, the
// split's index in the list Splits returns, and whether that split has no
// more records.
//
// Its fields:
//   - N int: the number of records read into the buffer.
//   - Split int: the index of the split the records came from, in the list
//     Splits returns: the splits given to Open, in that order, then those
//     the source added since, in the order it added them.
//   - Done bool: the split has no more records, so its watermark no longer
//     holds the task back. A read may say so with N = 0.
type SplitRead = dataflow.SplitRead

// Splits describes the splits of a FromSplits source: Initial returns the
// splits of a job that starts without state, for a parallelism (the same
// ones every time, in every process), and the optional Divide splits one
// in two when a job is restored at a parallelism above its number of
// splits.
//
// Its fields:
//   - Initial func(parallelism int) [][]byte: the splits of a job that
//     starts without state; split i is read by task i % parallelism. Every
//     task calls it, in every process of a cluster, so it must return the
//     same splits for the same parallelism each time.
//   - Divide func(split []byte) (a, b []byte, ok bool): optional; divides
//     a split's state into two splits that together hold exactly the
//     records it has left, or returns ok false when it cannot. Splits are
//     divided until every task has one (or none can be divided further);
//     tasks without a split end at once.
type Splits = dataflow.Splits

// FromSplits adds a source whose position is a list of splits (see
// SplitSource). newSource is called once per task (and again after every
// restore) with the task's subtask index and the operator's parallelism.
func FromSplits[T any](g *Graph, name string, splits Splits, newSource func(subtask, parallelism int) SplitSource[T], opts ...Option) Stream[T] {
	return dataflow.FromSplits(g, name, splits, newSource, opts...)
}

// Sequence adds a source of the numbers from..to inclusive, in order.
func Sequence(g *Graph, name string, from, to int64, opts ...Option) Stream[int64] {
	return dataflow.Sequence(g, name, from, to, opts...)
}

// Generate adds a source whose records are gen(i) for i = 0, 1, ... count-1
// (unbounded when count < 0). With parallelism p, task s produces the
// indices i with i % p == s, in order; a job restored at another
// parallelism still produces every index exactly once.
func Generate[T any](g *Graph, name string, count int64, gen func(i int64) T, opts ...Option) Stream[T] {
	return dataflow.Generate(g, name, count, gen, opts...)
}

// FromSlice adds a source of the items of a slice, which must not change
// while the job runs.
func FromSlice[T any](g *Graph, name string, items []T, opts ...Option) Stream[T] {
	return dataflow.FromSlice(g, name, items, opts...)
}

// Sink adds a sink that calls write for every record. Records replayed
// after a recovery are written again (at-least-once output): make write
// idempotent, or use TwoPhaseCommitSink.
func Sink[T any](s Stream[T], name string, write func(T) error, opts ...Option) {
	dataflow.Sink(s, name, write, opts...)
}

// SinkBatch adds a sink that calls write with the records as they arrive,
// a batch at a time: never empty, in order per input, and at most the
// job's batch size (actors.WithBatchSize), records replayed from an
// unaligned checkpoint of a job with larger batches included. write must
// not keep the slice, which is reused once it returns. Records replayed
// after a recovery are written again, as with Sink.
func SinkBatch[T any](s Stream[T], name string, write func([]T) error, opts ...Option) {
	dataflow.SinkBatch(s, name, write, opts...)
}

// TwoPhaseSink is a transactional sink, one instance per sink task, whose
// writes become visible exactly once, through the checkpoints (two-phase
// commit, as Flink's TwoPhaseCommitSinkFunction):
//
//	Recover(ctx, checkpoint uint64, pending [][]byte, open []byte) error // commit pending, abort the rest
//	Begin(ctx, after uint64) (txn []byte, err error)
//	Write(ctx, txn []byte, records []T) error
//	PreCommit(ctx, txn []byte) ([]byte, error) // at the barrier: durable, handle stored in the checkpoint
//	Commit(ctx, txn []byte) error              // once the checkpoint completes; idempotent
//	Close() error                              // must not commit
//
// Recover must abort only what incarnations older than Incarnation(ctx)
// left. Package filesink is a complete implementation; package kafka is
// another.
type TwoPhaseSink[T any] = dataflow.TwoPhaseSink[T]

// TwoPhaseCommitSink adds a transactional sink (see TwoPhaseSink): every
// record reaches it exactly once in what it commits, given replayable
// sources and deterministic operators. newSink is called once per task (and
// again after every restore). A job restored at another parallelism of the
// sink is refused: its transactions are not redistributed.
func TwoPhaseCommitSink[T any](s Stream[T], name string, newSink func(subtask, parallelism int) TwoPhaseSink[T], opts ...Option) {
	dataflow.TwoPhaseCommitSink(s, name, newSink, opts...)
}

// Incarnation returns the epoch of the task incarnation that calls a
// TwoPhaseSink with ctx, 0 if unknown. Epochs grow with every restore of
// the job and across the processes that hold it one after another, so a
// sink fences an older incarnation that still runs (a paused process that
// woke up) by naming what each incarnation writes by its epoch.
func Incarnation(ctx context.Context) uint64 { return dataflow.Incarnation(ctx) }

// WithIncarnation returns ctx carrying an incarnation's epoch, as the
// runtime passes it to a TwoPhaseSink: for tests of a sink's fencing.
func WithIncarnation(ctx context.Context, epoch uint64) context.Context {
	return dataflow.WithIncarnation(ctx, epoch)
}

// A transactional sink's commit is tried CommitRetries times before the
// task fails, first after CommitBackoff, then after twice the previous
// pause.
const (
	CommitRetries = dataflow.CommitRetries
	CommitBackoff = dataflow.CommitBackoff
)
