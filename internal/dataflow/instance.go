package dataflow

import (
	"context"
	"github.com/snapflow/snapflow/internal/diskstate"
	"log/slog"

	"github.com/snapflow/snapflow/messages"
)

// Sender takes the batches a task emits. The runtime implements it; output is
// an index into the task's TaskPlan.Outputs, and batch is a []T of the
// stream's element type, owned by the receiver from then on. ts holds the
// records' event timestamps, one per record, when the task's output is
// timed (TaskPlan.Timed), and is nil otherwise; it is owned by the
// receiver too (see ReleaseTimestamps).
type Sender interface {
	Send(output int, batch any, ts []int64)
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
	// Epoch numbers the task's incarnation: it grows with every restore,
	// and across the instances that hold the job one after another (see
	// Incarnation). 0 means unknown.
	Epoch uint64
	// SkipDirtyKeyGroups tells a keyed instance (see KeyGroupSnapshotter)
	// that the runtime will not ask which key groups were written, because
	// checkpoints are full or off: it spares the hash of the key of every
	// record that writes state. TakeDirtyKeyGroups then reports every key
	// group.
	SkipDirtyKeyGroups bool
	// DiskState, when not nil, keeps the keyed value and map states of the
	// task on local disk (see package diskstate), in a database of the
	// instance's own that Close removes; nil keeps them on the heap.
	DiskState *diskstate.Config
}

// Instance is the runtime's type-erased view of one task. Methods are called
// from one goroutine at a time (the task actor).
type Instance interface {
	// ProcessBatch processes one batch received on input (the task's input
	// channel index); batch is a []T of that input's element type, and ts
	// the records' event timestamps (nil when the input is not timed). The
	// instance keeps neither past the call: the caller releases ts.
	ProcessBatch(input int, batch any, ts []int64) error
	// Flush sends every partly filled output batch.
	Flush()
	// Pending reports whether an output batch is partly filled: whether
	// Flush would send anything. The runtime arms its linger timer only
	// then, so that a task whose batches leave full is not woken for
	// nothing.
	Pending() bool
	// Snapshot serialises the task's state into st synchronously.
	Snapshot(st *messages.TaskState) error
	// Restore loads the task's state from st before any record is processed.
	Restore(st *messages.TaskState) error
	// EndOfInput is called once all inputs have ended, before the final flush.
	EndOfInput() error
	// Close releases resources; it is called on every stop, also after failures.
	Close() error
}

// KeyGroupSnapshotter is implemented by instances whose keyed state records
// which key groups were written, for incremental checkpoints: the runtime
// keeps the key groups written since each task's last complete checkpoint
// and snapshots only those. Both methods are called from the task's
// goroutine, between batches.
//
// Key groups are absolute numbers (not relative to the task's range), in
// bit sets of uint64 words: key group kg is bit kg%64 of word kg/64.
type KeyGroupSnapshotter interface {
	// TakeDirtyKeyGroups ORs into dst every key group written since the
	// last call, or since the instance was created or restored, and
	// forgets them. A restore writes nothing but the key groups where it
	// left out entries that had expired, or whose state's time-to-live
	// changed (see ttl_restore.go). len(dst) must be at least
	// KeyGroupWords(maxParallelism); it panics otherwise. An instance
	// created with InstanceContext.SkipDirtyKeyGroups tracks nothing and
	// reports every key group.
	//
	// "Written" errs on the side of safety: it includes state reads that
	// hand out a value reaching a reference (see Value and MapOf), and
	// writes that change nothing.
	TakeDirtyKeyGroups(dst []uint64)
	// SnapshotKeyGroups is Snapshot restricted to the key groups whose bit
	// is set in groups: the same descriptors and non-keyed parts, and the
	// entries of those key groups only. A selected key group that holds
	// nothing is absent, and stands for an empty key group. Snapshot stays
	// the full snapshot. Its cost is that of encoding the selected key
	// groups, plus hashing every key of the task to find its key group.
	SnapshotKeyGroups(st *messages.TaskState, groups []uint64) error
}

// AsyncSnapshotter is implemented by instances whose state can be captured
// in a moment and encoded afterwards, off the task's goroutine (the
// on-disk state backend takes a snapshot of its database). SnapshotAsync
// does the synchronous part of Snapshot (full) or of SnapshotKeyGroups
// (groups) and returns finish, which completes st: it is called at most
// once, from any goroutine, and may run while the task goes on processing.
// A snapshot whose finish is never called is released when the instance
// closes.
type AsyncSnapshotter interface {
	SnapshotAsync(st *messages.TaskState, groups []uint64, full bool) (finish func() error, err error)
}

// KeyGroupRestorer is implemented by instances that can be restored key
// group by key group, so that the runtime never holds the whole decoded
// state at once: Restore(st) with st holding the descriptors and non-keyed
// parts (and possibly some key groups), then RestoreKeyGroup for each
// further key group, each loaded as Restore would load it (a key group
// outside the task's range is skipped). Restoring the same key group twice
// merges its entries, the later ones winning.
type KeyGroupRestorer interface {
	// RestoreKeyGroup loads one key group. It fails, wrapping
	// ErrRestoreRefused, when Restore has not accepted the checkpoint's
	// descriptors first, and with ErrIncompatibleState for a state the
	// operator does not declare.
	RestoreKeyGroup(g *messages.KeyGroupState) error
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
