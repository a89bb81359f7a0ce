package actors

import "github.com/snapflow/snapflow/actors/internal/engine"

// The errors of a job's life: check them with errors.Is.
var (
	// ErrStopped is returned by Wait when the job was stopped by Stop or by
	// the cancellation of its context before it finished.
	ErrStopped = engine.ErrStopped
	// ErrFinished is returned by Checkpoint once the job has finished.
	ErrFinished = engine.ErrFinished
	// ErrAlreadyFinished is wrapped by the error of Start for a job whose
	// newest checkpoint is its final one: it ran to the end, and resuming
	// it would process nothing. Start it with WithStartOver to run it
	// again.
	ErrAlreadyFinished = engine.ErrAlreadyFinished
	// ErrNotStopped is wrapped by the error of StopWithSavepoint when the
	// savepoint completed but the job did not stop there (recording it as
	// the job's origin failed) and goes on: stop it again under another
	// name.
	ErrNotStopped = engine.ErrNotStopped
	// ErrStopTimeout is wrapped by Stop's error when the job did not stop
	// within the stop timeout (see WithStopTimeout).
	ErrStopTimeout = engine.ErrStopTimeout
	// ErrActorStopped is the cause of a job whose job actor, or of a worker
	// whose host actor, was stopped by something other than the job's end
	// (a Stop or PoisonPill message): the job did not finish.
	ErrActorStopped = engine.ErrActorStopped
)

// Event kinds, in the order a job usually meets them.
const (
	EventRunning             = engine.EventRunning             // every task has started (and restored its state)
	EventCheckpointTriggered = engine.EventCheckpointTriggered // the coordinator started a checkpoint or savepoint
	EventCheckpointCompleted = engine.EventCheckpointCompleted // its manifest is written
	EventCheckpointAborted   = engine.EventCheckpointAborted   // it failed, timed out or was declined
	EventTaskFailed          = engine.EventTaskFailed          // a task failed: the job rolls back
	EventRestoring           = engine.EventRestoring           // the job restores a checkpoint
	EventFinished            = engine.EventFinished            // every source ended, the final checkpoint completed
	EventFailed              = engine.EventFailed              // the restart policy gave up
	EventNodeJoined          = engine.EventNodeJoined          // cluster mode: a worker registered
	EventNodeLost            = engine.EventNodeLost            // cluster mode: a worker was lost
	EventPlaced              = engine.EventPlaced              // cluster mode: the tasks were placed on the workers
)

// Failure causes (Event.Cause, TaskError.Cause, and the cause label of the
// task failures metric).
const (
	CausePanic    = engine.CausePanic    // an operator or the runtime panicked
	CauseError    = engine.CauseError    // an operator returned an error
	CauseCommit   = engine.CauseCommit   // a transactional sink could not commit (topology.ErrCommit)
	CauseRestore  = engine.CauseRestore  // restoring state failed
	CauseNodeLost = engine.CauseNodeLost // its worker was lost (cluster mode)
	CauseLinkLost = engine.CauseLinkLost // a channel to another node lost its link (cluster mode)
	CauseOther    = engine.CauseOther
)

// Defaults and bounds of the options.
const (
	DefaultBatchSize          = engine.DefaultBatchSize
	DefaultBatchBytes         = engine.DefaultBatchBytes
	DefaultLinger             = engine.DefaultLinger
	DefaultCredits            = engine.DefaultCredits
	DefaultStopTimeout        = engine.DefaultStopTimeout
	DefaultCheckpointInterval = engine.DefaultCheckpointInterval
	DefaultRetained           = engine.DefaultRetained
	DefaultInlineStateLimit   = engine.DefaultInlineStateLimit
	// InlineManifestBudget bounds the inline states of one manifest: each
	// task's limit is at most InlineManifestBudget divided by the number of
	// tasks.
	InlineManifestBudget = engine.InlineManifestBudget
	MaxCredits           = engine.MaxCredits
	MaxBatchSize         = engine.MaxBatchSize
	MaxInlineStateLimit  = engine.MaxInlineStateLimit
)
