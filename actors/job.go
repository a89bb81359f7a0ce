package actors

import (
	"context"

	"github.com/snapflow/snapflow/actors/internal/engine"
	"github.com/snapflow/snapflow/topology"
)

// Run starts the job and waits for it to end; see Start and Wait.
func Run(ctx context.Context, g *topology.Graph, opts ...Option) error {
	return engine.Run(ctx, g, opts...)
}

// Start validates and plans g, checks the store, finds the newest complete
// checkpoint of the job (by its name) and starts the job from it, or from
// the beginning when there is none. Cancelling ctx stops the job.
//
// Start refuses, before any record flows:
//   - a checkpoint that cannot be restored exactly into g (see
//     WithAllowTopologyChange, and docs/savepoints.md);
//   - a store whose complete checkpoints of the job are all unusable (an
//     error wrapping snapshots.ErrNoUsableCheckpoint);
//   - a job that already finished (ErrAlreadyFinished): its newest
//     checkpoint is the final one. WithStartOver runs it again from the
//     beginning.
func Start(ctx context.Context, g *topology.Graph, opts ...Option) (*Job, error) {
	return engine.Start(ctx, g, opts...)
}

// Job is a running topology. Its methods:
//
//	Wait() error          // blocks until the job ends: nil when it finished, ErrStopped, or a *JobError
//	Stop() error          // stops it; its checkpoints stay, and a new Start resumes from the newest
//	Done() <-chan struct{} // closed once it has ended and released its resources
//	Checkpoint(ctx) (uint64, error)                    // a checkpoint now; its id once complete
//	Savepoint(ctx, name) (uint64, error)               // a named, self-contained checkpoint; the job goes on
//	StopWithSavepoint(ctx, name) (uint64, error)       // one, and the job stops at its barrier
//	Stats() Stats                                      // counters of the job's life
//	DiskRestoreStats() DiskRestoreStats                // what restores did with on-disk state files
//	TaskMetrics() []TaskMetrics                        // each task's records, batches and backpressure
//	Checkpoints() *snapshots.Checkpoints               // its checkpoints in the store
//	Address() string                                   // the coordinator's address in cluster mode
//
// Each is documented in full on the runtime's type.
type Job = engine.Job

// Stats are counters of a job's life.
//
// Its fields:
//   - StaleMessages uint64: data-path messages of an older epoch that tasks
//     dropped on arrival (epoch fencing).
type Stats = engine.Stats

// DiskRestoreStats is what the restores of a job's tasks in this process
// did with the database files of their on-disk state (WithDiskState),
// summed since the job started; Job.DiskRestoreStats returns it. A task
// restored at another parallelism takes over the stored database that
// holds most of its key groups (Adopted), removes the key groups outside
// its range (Excised), and ingests the entries of its key groups in the
// other stored databases as tables written in key order (Ingested...);
// entries are written one by one (Rebuilt) only where a state's id changed.
//
// Its fields:
//   - Tasks int: task restores that read database files.
//   - LocalBytes int64: bytes of the files taken from local copies
//     (task-local recovery).
//   - DownloadedBytes int64: bytes of the files read from the store.
//   - SkippedBytes int64: bytes of the tables not read, as they hold no key
//     of the restoring task's key groups.
//   - Adopted int: stored databases that became a task's database, their
//     files taken over without a copy.
//   - Excised int: ranges of key groups removed from an adopted database.
//   - IngestedTables int: tables written in key order and ingested.
//   - IngestedBytes int64: their bytes.
//   - IngestedEntries int64: their entries.
//   - Rebuilt int64: entries written one by one, through batches.
//   - Download time.Duration: time the tasks spent putting the files in
//     place, summed over tasks.
//   - Rebuild time.Duration: time they spent building their databases from
//     them, summed over tasks.
//   - SlowestDownload time.Duration: Download of the task whose download and
//     rebuild together took longest (tasks restore side by side).
//   - SlowestRebuild time.Duration: that task's Rebuild.
type DiskRestoreStats = engine.DiskRestoreStats

// TaskMetrics are a task's counters since the job started: they keep
// counting across restores, so that they only grow.
//
// Its fields:
//   - Task string: the task's id ("sum#1").
//   - Operator string: its operator's name.
//   - Subtask int: its index among the operator's tasks.
//   - RecordsIn uint64: the records the task processed (0 for a source).
//   - RecordsOut uint64: the records it emitted downstream (0 for a sink),
//     each once however many edges or tasks receive it. After a restore,
//     the records replayed count again.
//   - QueuedBatches int: the batches waiting, now, for credit on its outputs.
//   - Backpressure time.Duration: the total time during which an output of
//     the task had no credit while batches waited for it.
type TaskMetrics = engine.TaskMetrics

// TaskCheckpoint is one task's part of a completed checkpoint.
//
// Its fields:
//   - Task string: the task's id.
//   - Bytes uint64: the size of the task's state snapshot.
//   - Uploaded uint64: what the task stored for the checkpoint (see
//     Event.Uploaded).
//   - InFlight uint64: the task's channel state in an unaligned checkpoint.
//   - Alignment time.Duration: from the first barrier's arrival to the
//     last's (0 for a task with one input, or a source).
//   - Sync time.Duration: the synchronous part of the snapshot (records
//     stop).
//   - Async time.Duration: the upload, which runs while records flow.
type TaskCheckpoint = engine.TaskCheckpoint

// Event is something that happened to a job, for listeners (see
// WithListener): its Kind, Time and Epoch; the Checkpoint concerned, with,
// on EventCheckpointCompleted, its Bytes, Uploaded bytes, Duration, longest
// Alignment and Upload, and each task's figures (Tasks); the failed Task,
// its Cause and Err on EventTaskFailed; the Node joined or lost; the
// Placement of a cluster's tasks; and the Savepoint a checkpoint is.
//
// Its fields:
//   - Kind EventKind: what happened.
//   - Time time.Time: when.
//   - Epoch uint64: the job's epoch then.
//   - Checkpoint uint64: the checkpoint concerned.
//   - Final bool: the checkpoint is the final one.
//   - Task string: the failed task on EventTaskFailed (the lost tasks,
//     comma-separated, for a lost worker); the declining task on
//     EventCheckpointAborted.
//   - Bytes uint64: on EventCheckpointCompleted, the state's bytes.
//   - Uploaded uint64: on EventCheckpointCompleted, the bytes the tasks
//     stored for it: less than Bytes when incremental, 0 for inline states.
//   - InFlight uint64: on EventCheckpointCompleted of an unaligned
//     checkpoint, the bytes of channel state stored with it.
//   - Duration time.Duration: on EventCheckpointCompleted, from trigger to
//     completion.
//   - Alignment time.Duration: the longest alignment of any task.
//   - Upload time.Duration: the longest state upload of any task.
//   - Err error: the failure or error, on EventTaskFailed, EventFailed,
//     EventNodeLost and EventCheckpointAborted.
//   - Node string: on EventNodeJoined and EventNodeLost, "worker-id@host:port".
//   - Placement string: on EventPlaced, "task,task -> worker; ...".
//   - Savepoint string: the savepoint that Checkpoint is, or the one
//     restored on EventRunning and EventRestoring.
//   - Tasks []TaskCheckpoint: on EventCheckpointCompleted, each task's
//     figures, by task id; their Bytes add up to Bytes.
//   - Settled bool: on EventCheckpointCompleted, the completion was settled
//     after a failover (its manifest landed while the job rolled back).
//   - Declined bool: on EventCheckpointAborted, a task (Task) declined it.
//   - Cause FailureCause: classifies Err on EventTaskFailed.
type Event = engine.Event

// EventKind says what happened to a job.
type EventKind = engine.EventKind

// FailureCause classifies why a task failed.
type FailureCause = engine.FailureCause

// JobError is returned by Wait when a job fails for good.
//
// Its fields:
//   - Job string: the job's name.
//   - Failures int: the failures counted by the restart strategy.
//   - Reason string: why the job gave up.
//   - Cause error: the last failure; a *TaskError for a task's.
type JobError = engine.JobError

// TaskError is a task's failure: a panic or an error returned by an
// operator.
//
// Its fields:
//   - Task string: the task's id ("sum#1").
//   - Operator string: its operator's name.
//   - Epoch uint64: the epoch it failed in.
//   - Value any: the panic value, or the error returned.
//   - Stack []byte: the stack of the code that panicked; nil for a returned
//     error.
type TaskError = engine.TaskError
