package topology

import (
	"context"
	"log/slog"

	"github.com/snapflow/snapflow/messages"
)

// Sender takes the batches a task emits. The runtime implements it; output is
// an index into the task's TaskPlan.Outputs, and batch is a []T of the
// stream's element type, owned by the receiver from then on.
type Sender interface {
	Send(output int, batch any)
}

// InstanceContext is what the runtime gives a task's instance when it creates it.
type InstanceContext struct {
	Job       string
	Task      *TaskPlan
	BatchSize int // records per batch (>= 1)
	// BatchBytes bounds the estimated bytes of a batch (0: no bound): a
	// batch is sent once it holds BatchSize records or BatchBytes bytes,
	// the record that reaches the bound included, so a batch holds at most
	// BatchBytes plus one record. A source task also reads fewer records at
	// a time when they are large, about BatchBytes per read. The memory in
	// flight on a channel is therefore bounded by credits x (BatchBytes +
	// one record), whatever the size of the records.
	//
	// Sizes are estimates from the record's type: records of a type without
	// strings, slices, maps, pointers or interfaces have the static size of
	// the type, which costs nothing per record; others are sized one by one
	// (the bytes of strings, the capacity of slices, the values behind
	// pointers and interfaces, an estimate for maps).
	BatchBytes int
	Sender     Sender
	Logger     *slog.Logger
	// Context ends with the task's incarnation (a failover, a stop or a
	// failure of the job); nil means context.Background.
	Context context.Context
}

// Instance is the runtime's type-erased view of one task. Methods are called
// from one goroutine at a time (the task actor).
type Instance interface {
	// ProcessBatch processes one batch received on input (the task's input
	// channel index); batch is a []T of that input's element type.
	ProcessBatch(input int, batch any) error
	// Flush sends every partly filled output batch.
	Flush()
	// Snapshot serialises the task's state into st synchronously.
	Snapshot(st *messages.TaskState) error
	// Restore loads the task's state from st before any record is processed.
	Restore(st *messages.TaskState) error
	// EndOfInput is called once all inputs have ended, before the final flush.
	EndOfInput() error
	// Close releases resources; it is called on every stop, also after failures.
	Close() error
}

// Starter is implemented by instances that must do something once their
// state is restored (or when there is none), before any record: the
// runtime calls Start then.
type Starter interface {
	Start() error
}

// CheckpointListener is implemented by instances that act when a
// checkpoint completes: transactional sinks commit there. commit is false
// for a savepoint the job runs on after (recovery restores checkpoints, so
// what it made visible could be replayed). An error fails the task.
type CheckpointListener interface {
	CheckpointComplete(id uint64, commit bool) error
}

// SourceStatus is what a source read reports besides its records.
type SourceStatus uint8

const (
	// SourceMore means more records may be read at once.
	SourceMore SourceStatus = iota + 1
	// SourceIdle means no record is available now; the source calls its wake
	// function when there is.
	SourceIdle
	// SourceDone means the source has no more records.
	SourceDone
)

// SourceInstance is the runtime's view of a source task.
type SourceInstance interface {
	Instance
	// Open positions the source at the offset restored by Restore, or at the
	// beginning. wake may be called from any goroutine after Produce returned
	// SourceIdle.
	Open(ctx context.Context, wake func()) error
	// Produce reads and emits up to max records, fewer when records are
	// large (see InstanceContext.BatchBytes).
	Produce(max int) (n int, status SourceStatus, err error)
}
