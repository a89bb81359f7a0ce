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
//	TaskMetrics() []TaskMetrics                        // each task's records, batches and backpressure
//	Checkpoints() *snapshots.Checkpoints               // its checkpoints in the store
//	Address() string                                   // the coordinator's address in cluster mode
//
// Each is documented in full on the runtime's type.
type Job = engine.Job

// Stats are counters of a job's life.
type Stats = engine.Stats

// TaskMetrics are a task's counters since the job started: they keep
// counting across restores, so that they only grow.
type TaskMetrics = engine.TaskMetrics

// TaskCheckpoint is one task's part of a completed checkpoint.
type TaskCheckpoint = engine.TaskCheckpoint

// Event is something that happened to a job, for listeners (see
// WithListener): its Kind, Time and Epoch; the Checkpoint concerned, with,
// on EventCheckpointCompleted, its Bytes, Uploaded bytes, Duration, longest
// Alignment and Upload, and each task's figures (Tasks); the failed Task,
// its Cause and Err on EventTaskFailed; the Node joined or lost; the
// Placement of a cluster's tasks; and the Savepoint a checkpoint is.
type Event = engine.Event

// EventKind says what happened to a job.
type EventKind = engine.EventKind

// FailureCause classifies why a task failed.
type FailureCause = engine.FailureCause

// JobError is returned by Wait when a job fails for good.
type JobError = engine.JobError

// TaskError is a task's failure: a panic or an error returned by an
// operator.
type TaskError = engine.TaskError
