package topology

import (
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// WatermarkStrategy tells a source how to stamp its records with event time
// (Timestamp), how far out of order they may arrive and still be on time
// (OutOfOrderness), and after how long without records the source is idle
// and holds no event time back (IdleTimeout). See WithWatermarks and
// docs/time.md.
//
// Its fields:
//   - Timestamp func(T) time.Time: a record's event time. It is called once
//     per record, in the source's task, and must not block.
//   - OutOfOrderness time.Duration: how far a record may be behind the
//     highest timestamp read before it and still be on time: the watermark
//     is that highest timestamp less OutOfOrderness (less one nanosecond).
//   - IdleTimeout time.Duration: when positive, the source task (or split)
//     is idle once it has read nothing for that long, so that it holds no
//     other input's event time back; it is active again with its next
//     record. Zero: never idle.
type WatermarkStrategy[T any] = dataflow.WatermarkStrategy[T]

// WithWatermarks gives a source a watermark strategy: its records carry
// event timestamps, and watermarks travel downstream with them, each
// operator's being the minimum over its inputs. A source's position in
// event time is part of its checkpointed state. It applies to sources
// only, for their record type; Validate refuses it otherwise.
func WithWatermarks[T any](strategy WatermarkStrategy[T]) Option {
	return dataflow.WithWatermarks(strategy)
}

// TimeDomain is the clock a timer follows: EventTime or ProcessingTime.
type TimeDomain = dataflow.TimeDomain

// The time domains of timers.
const (
	// EventTime timers fire when the task's watermark reaches their time.
	EventTime = dataflow.EventTime
	// ProcessingTime timers fire when the task's wall clock reaches their
	// time.
	ProcessingTime = dataflow.ProcessingTime
)

// Timer is a timer that fired: when it was due, and on which clock.
//
// Its fields:
//   - Time time.Time: when the timer was due.
//   - Domain TimeDomain: EventTime or ProcessingTime.
type Timer = dataflow.Timer

// TimerFunc handles a timer of ctx.Key() that fired, with the key's state
// in scope. Records it emits carry the timer's time as their timestamp
// (event-time timers) or none (processing-time timers).
type TimerFunc[K Key, O any] = dataflow.TimerFunc[K, O]

// OnTimer declares, in a Process operator's setup, the function that
// handles the timers its process function registers through the Context
// (RegisterEventTimer, RegisterProcessingTimer). Timers are keyed state:
// in every checkpoint and savepoint, tracked by incremental checkpoints,
// redistributed when rescaling. O must be the operator's output type.
func OnTimer[K Key, O any](s *KeyedSetup[K], fn TimerFunc[K, O]) { dataflow.OnTimer(s, fn) }

// SideOutput names a typed side output of a Process operator (late
// records, errors): a stream of its own. Make it with NewSideOutput, emit
// to it from the process or timer function (o.Emit(ctx, v)), and take its
// stream with SideOutputOf.
type SideOutput[T any] = dataflow.SideOutput[T]

// SideEmitter is the context a side output is emitted through: the
// *Context of a process or timer function.
type SideEmitter = dataflow.SideEmitter

// NewSideOutput returns a side output called name.
func NewSideOutput[T any](name string) SideOutput[T] { return dataflow.NewSideOutput[T](name) }

// SideOutputOf returns the stream of side output o of the Process operator
// whose main output is s. Records emitted to a side output that nothing
// consumes are dropped.
func SideOutputOf[T, O any](s Stream[O], o SideOutput[T]) Stream[T] {
	return dataflow.SideOutputOf(s, o)
}

// CoProcessFunc is the pair of functions of a two-input keyed operator:
// First handles the first input's records, Second the second's, with the
// same keyed state, timers and side outputs.
//
// Its fields:
//   - First ProcessFunc[K, A, O]: handles a record of the first input.
//   - Second ProcessFunc[K, B, O]: handles a record of the second input.
type CoProcessFunc[K Key, A, B, O any] = dataflow.CoProcessFunc[K, A, B, O]

// CoProcess adds a keyed operator with two inputs of different types and
// the same key type, for joins and enrichment: records of one key from
// either input go to the task that holds the key's state and timers. Its
// watermark is the minimum of its inputs'. Both inputs must be keyed with
// KeyBy.
func CoProcess[K Key, A, B, O any](a KeyedStream[A, K], b KeyedStream[B, K], name string,
	setup func(*KeyedSetup[K]) CoProcessFunc[K, A, B, O], opts ...Option) Stream[O] {
	return dataflow.CoProcess(a, b, name, setup, opts...)
}

// PendingTimers counts the timers stored in a task's state (a checkpoint's
// or savepoint's), by time domain: those pending when it was taken.
func PendingTimers(st *messages.TaskState) (event, processing int, err error) {
	return dataflow.PendingTimers(st)
}
