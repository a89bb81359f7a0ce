package actors

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
)

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
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is something that happened to a job, for listeners.
type Event struct {
	Kind       EventKind
	Time       time.Time
	Epoch      uint64
	Checkpoint uint64
	Final      bool          // the final checkpoint
	Task       string        // EventTaskFailed (the lost tasks, comma-separated, for a lost worker)
	Bytes      uint64        // EventCheckpointCompleted: state bytes
	Duration   time.Duration // EventCheckpointCompleted: from trigger to completion
	Alignment  time.Duration // EventCheckpointCompleted: the longest alignment of any task
	Upload     time.Duration // EventCheckpointCompleted: the longest state upload of any task
	Err        error
	Node       string // EventNodeJoined, EventNodeLost: "worker-id@host:port"
	Placement  string // EventPlaced: "task,task -> worker; ..."
	// Savepoint names the savepoint that Checkpoint is, on
	// EventCheckpointCompleted and EventCheckpointAborted, and the savepoint
	// restored on EventRunning and EventRestoring ("": a checkpoint).
	Savepoint string
}
