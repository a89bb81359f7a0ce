package engine

import (
	"fmt"
	"time"
)

// EventKind says what happened to a job.
type EventKind uint8

// The events a listener receives.
const (
	// EventRunning: every task has restored its state and records flow.
	// Checkpoint is the checkpoint restored (0: none).
	EventRunning EventKind = iota + 1
	// EventCheckpointCompleted: the manifest of Checkpoint is written.
	EventCheckpointCompleted
	// EventCheckpointAborted: Checkpoint will not complete; Err says why.
	EventCheckpointAborted
	// EventTaskFailed: Task failed with Err; a restore follows unless the
	// restart strategy is exhausted.
	EventTaskFailed
	// EventRestoring: the job rolls back to Checkpoint in Epoch.
	EventRestoring
	// EventFinished: every source ended, the final checkpoint completed and
	// every task finished.
	EventFinished
	// EventFailed: the job failed for good with Err.
	EventFailed
	// EventNodeJoined: a worker (Node) registered with the coordinator.
	EventNodeJoined
	// EventNodeLost: a worker (Node) was lost; Err says why. Its tasks
	// fail.
	EventNodeLost
	// EventPlaced: the tasks of Epoch were placed on workers, restoring
	// Checkpoint; Placement says where.
	EventPlaced
	// EventCheckpointTriggered: the coordinator started Checkpoint (a
	// savepoint when Savepoint is set); its barriers are on their way.
	EventCheckpointTriggered
)

// String returns the event kind's name, for logs: "running", "checkpoint-completed", ...
func (k EventKind) String() string {
	switch k {
	case EventRunning:
		return "running"
	case EventCheckpointCompleted:
		return "checkpoint-completed"
	case EventCheckpointAborted:
		return "checkpoint-aborted"
	case EventTaskFailed:
		return "task-failed"
	case EventRestoring:
		return "restoring"
	case EventFinished:
		return "finished"
	case EventFailed:
		return "failed"
	case EventNodeJoined:
		return "node-joined"
	case EventNodeLost:
		return "node-lost"
	case EventPlaced:
		return "placed"
	case EventCheckpointTriggered:
		return "checkpoint-triggered"
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is something that happened to a job, for listeners.
type Event struct {
	Kind       EventKind
	Time       time.Time
	Epoch      uint64
	Checkpoint uint64
	Final      bool   // the final checkpoint
	Task       string // EventTaskFailed (the lost tasks, comma-separated, for a lost worker); the declining task on EventCheckpointAborted
	Bytes      uint64 // EventCheckpointCompleted: state bytes
	// Uploaded is, on EventCheckpointCompleted, the bytes the tasks stored
	// for the checkpoint: less than Bytes when it was incremental (see
	// WithIncrementalCheckpoints), 0 for states inline in the manifest.
	Uploaded uint64
	// InFlight is, on EventCheckpointCompleted of an unaligned checkpoint,
	// the bytes of channel state (records in flight) stored with it.
	InFlight  uint64
	Duration  time.Duration // EventCheckpointCompleted: from trigger to completion
	Alignment time.Duration // EventCheckpointCompleted: the longest alignment of any task
	Upload    time.Duration // EventCheckpointCompleted: the longest state upload of any task
	Err       error
	Node      string // EventNodeJoined, EventNodeLost: "worker-id@host:port"
	Placement string // EventPlaced: "task,task -> worker; ..."
	// Savepoint names the savepoint that Checkpoint is, on
	// EventCheckpointTriggered, EventCheckpointCompleted and
	// EventCheckpointAborted, and the savepoint restored on EventRunning and
	// EventRestoring ("": a checkpoint).
	Savepoint string
	// Tasks are the figures of every task's part of the checkpoint, on
	// EventCheckpointCompleted, ordered by task id (operator name, then
	// subtask). Their Bytes add up to Bytes.
	Tasks []TaskCheckpoint
	// Settled is set on EventCheckpointCompleted for a checkpoint whose
	// completion was settled after a failover (its manifest landed while
	// the job rolled back): its Duration then runs to the settlement, and
	// includes the failover.
	Settled bool
	// Declined is set on EventCheckpointAborted when a task declined the
	// checkpoint (Task names it); otherwise it was aborted (a timeout, a
	// failure, a store error, ...).
	Declined bool
	// Cause classifies Err on EventTaskFailed.
	Cause FailureCause
}

// TaskCheckpoint is one task's part of a completed checkpoint.
type TaskCheckpoint struct {
	Task string
	// Bytes is the size of the task's state snapshot.
	Bytes uint64
	// Uploaded is what the task stored for the checkpoint (see
	// Event.Uploaded).
	Uploaded uint64
	// InFlight is the task's channel state in an unaligned checkpoint (see
	// Event.InFlight).
	InFlight uint64
	// Alignment is from the first barrier's arrival to the last's (0 for a
	// task with one input, or a source).
	Alignment time.Duration
	// Sync is the synchronous part of the snapshot (records stop), Async
	// the upload that runs while records flow.
	Sync, Async time.Duration
}

// FailureCause classifies why a task failed.
type FailureCause string

// The causes of EventTaskFailed.
const (
	CausePanic    FailureCause = "panic"     // an operator or the runtime panicked
	CauseError    FailureCause = "error"     // an operator returned an error
	CauseCommit   FailureCause = "commit"    // a transactional sink could not commit (topology.ErrCommit)
	CauseRestore  FailureCause = "restore"   // restoring state failed
	CauseNodeLost FailureCause = "node-lost" // its worker was lost (cluster)
	CauseLinkLost FailureCause = "link-lost" // a channel to another node lost its link (cluster; see package actors/linkwatch)
	CauseOther    FailureCause = "other"
)

// TaskMetrics are a task's counters since the job started: they keep
// counting across restores, so that they only grow.
type TaskMetrics struct {
	Task     string
	Operator string
	Subtask  int
	// RecordsIn counts the records the task processed (0 for a source),
	// RecordsOut those it emitted downstream (0 for a sink), each once
	// however many edges or tasks receive it: a record broadcast to three
	// tasks, or sent on three edges, counts once. After a restore, the
	// records replayed count again.
	RecordsIn, RecordsOut uint64
	// QueuedBatches is how many batches wait, now, for credit on the
	// task's outputs.
	QueuedBatches int
	// Backpressure is the total time during which an output of the task
	// had no credit while batches waited for it.
	Backpressure time.Duration
}
