package monitor

import "time"

// The states of a job (JobStatus.State).
const (
	// StateStarting: the job has not reported running yet.
	StateStarting = "starting"
	// StateRunning: every task restored its state and records flow.
	StateRunning = "running"
	// StateRestoring: a task failed and the job rolls back to its newest
	// complete checkpoint (from the failure until it runs again).
	StateRestoring = "restoring"
	// StateFinished: every source ended and the final checkpoint completed.
	StateFinished = "finished"
	// StateFailed: the job failed for good.
	StateFailed = "failed"
	// StateStopped: the attached job was stopped (actors.Job.Stop,
	// StopWithSavepoint, or its context ended), which no event reports:
	// the monitor sees it when the job is done.
	StateStopped = "stopped"
)

// The statuses of a checkpoint (Checkpoint.Status).
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusAborted    = "aborted"
	// StatusDeclined: a task declined the checkpoint (Checkpoint.Task).
	StatusDeclined = "declined"
)

// The kinds of an Update.
const (
	UpdateCheckpoint = "checkpoint" // Update.Checkpoint is set
	UpdateTimeline   = "timeline"   // Update.Timeline is set
	UpdateJob        = "job"        // the job's state or placement changed; Update.State is set
)

// JobStatus is what the monitor knows about the job now.
type JobStatus struct {
	// Name is the job's name (Options.Job, else the plan's).
	Name string `json:"name"`
	// State is one of StateStarting, StateRunning, StateRestoring,
	// StateFinished, StateFailed and StateStopped.
	State string `json:"state"`
	// Epoch is the job's current epoch (it grows at every restore).
	Epoch uint64 `json:"epoch"`
	// Started is when the monitor first heard of the job (its first event
	// or Attach).
	Started time.Time `json:"started,omitzero"`
	// Now is when the status was taken.
	Now time.Time `json:"now"`
	// Error is why the job failed (StateFailed).
	Error     string     `json:"error,omitempty"`
	Operators []Operator `json:"operators"`
	Tasks     []Task     `json:"tasks"`
	Edges     []Edge     `json:"edges"`
	// Nodes are the workers seen in cluster mode (empty in one process).
	Nodes []Node `json:"nodes"`
	// LastCheckpoint is the newest completed checkpoint or savepoint, nil
	// before the first.
	LastCheckpoint *LastCheckpoint `json:"last_checkpoint"`
	Counts         Counts          `json:"counts"`
}

// Operator is one operator of the plan, with its tasks' counters summed.
type Operator struct {
	// ID is the operator's stable id (topology.OperatorID, by default its
	// name), which Edge and Task refer to.
	ID   string `json:"id"`
	Name string `json:"name"`
	// Kind is "source", "operator" or "sink".
	Kind        string `json:"kind"`
	Parallelism int    `json:"parallelism"`
	// Keyed says that the operator keeps keyed state.
	Keyed               bool    `json:"keyed"`
	RecordsIn           uint64  `json:"records_in"`
	RecordsOut          uint64  `json:"records_out"`
	BackpressureSeconds float64 `json:"backpressure_seconds"`
	QueuedBatches       int     `json:"queued_batches"`
}

// Task is one task (a parallel instance of an operator) with its counters
// (see actors.TaskMetrics).
type Task struct {
	// ID is "name#subtask".
	ID string `json:"id"`
	// Operator is the operator's id (Operator.ID).
	Operator string `json:"operator"`
	Subtask  int    `json:"subtask"`
	// Node is the id of the worker hosting the task in cluster mode.
	Node                string  `json:"node,omitempty"`
	RecordsIn           uint64  `json:"records_in"`
	RecordsOut          uint64  `json:"records_out"`
	BackpressureSeconds float64 `json:"backpressure_seconds"`
	QueuedBatches       int     `json:"queued_batches"`
}

// Edge joins two operators (by Operator.ID).
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Partitioning is "forward", "rebalance", "broadcast" or "hash" (see
	// topology.Partition).
	Partitioning string `json:"partitioning"`
}

// Node is a worker of a cluster.
type Node struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	// State is "up" or "lost".
	State string `json:"state"`
}

// LastCheckpoint is the newest completed checkpoint or savepoint.
type LastCheckpoint struct {
	ID   uint64    `json:"id"`
	Time time.Time `json:"time"`
	// AgeSeconds is how long ago it completed, at JobStatus.Now.
	AgeSeconds float64 `json:"age_seconds"`
	// Savepoint names it when it is a savepoint.
	Savepoint string `json:"savepoint"`
}

// Counts are the job's totals since the monitor started, as reported by its
// events.
type Counts struct {
	Completed    uint64 `json:"completed"`
	Aborted      uint64 `json:"aborted"`
	Declined     uint64 `json:"declined"`
	TaskFailures uint64 `json:"task_failures"`
	Restores     uint64 `json:"restores"`
}

// Checkpoint is one checkpoint or savepoint of the history.
type Checkpoint struct {
	ID uint64 `json:"id"`
	// Savepoint names it when it is a savepoint.
	Savepoint string `json:"savepoint"`
	// Status is StatusInProgress, StatusCompleted, StatusAborted or
	// StatusDeclined.
	Status string `json:"status"`
	// Final is the final checkpoint of a job whose sources ended.
	Final bool `json:"final"`
	// Epoch is the job's epoch when the checkpoint was last reported on.
	Epoch uint64 `json:"epoch"`
	// Triggered is when it started, Ended when it completed or was aborted
	// (zero, and left out of JSON, while in progress).
	Triggered time.Time `json:"triggered,omitzero"`
	Ended     time.Time `json:"ended,omitzero"`
	// DurationSeconds is from trigger to completion.
	DurationSeconds float64 `json:"duration_seconds"`
	// Settled says that its completion was settled after a failover (its
	// manifest landed while the job rolled back): DurationSeconds then
	// includes the failover, and the duration histogram leaves it out.
	Settled bool `json:"settled,omitempty"`
	// Bytes is the state size of every task.
	Bytes uint64 `json:"bytes"`
	// UploadedBytes is what the tasks stored for it: less than Bytes when
	// it was incremental, 0 for states inline in the manifest.
	UploadedBytes uint64 `json:"uploaded_bytes"`
	// InFlightBytes is the channel state (records in flight) an unaligned
	// checkpoint stored with the tasks' states (0 when it aligned).
	InFlightBytes uint64 `json:"in_flight_bytes"`
	// AlignmentSeconds and UploadSeconds are the longest alignment and
	// state upload of any task.
	AlignmentSeconds float64 `json:"alignment_seconds"`
	UploadSeconds    float64 `json:"upload_seconds"`
	// Error says why it was aborted or declined.
	Error string `json:"error,omitempty"`
	// Task names the task that declined it (StatusDeclined).
	Task string `json:"task,omitempty"`
	// Tasks are the per-task figures of a completed checkpoint, by task id.
	Tasks []TaskCheckpoint `json:"tasks"`
}

// TaskCheckpoint is one task's part of a completed checkpoint.
type TaskCheckpoint struct {
	Task             string  `json:"task"`
	Bytes            uint64  `json:"bytes"`
	UploadedBytes    uint64  `json:"uploaded_bytes"`
	InFlightBytes    uint64  `json:"in_flight_bytes"`
	AlignmentSeconds float64 `json:"alignment_seconds"`
	SyncSeconds      float64 `json:"sync_seconds"`
	AsyncSeconds     float64 `json:"async_seconds"`
}

// TimelineEntry is a failure, restore, start or node change of the job.
type TimelineEntry struct {
	Time time.Time `json:"time"`
	// Kind is "task-failed", "restoring", "running", "node-joined",
	// "node-lost", "failed", "finished" or "stopped" (the attached job
	// was stopped).
	Kind  string `json:"kind"`
	Epoch uint64 `json:"epoch"`
	// Checkpoint is the checkpoint restored ("restoring", "running"; 0:
	// none) and Savepoint the savepoint restored.
	Checkpoint uint64 `json:"checkpoint"`
	Savepoint  string `json:"savepoint,omitempty"`
	// Task is the failed task ("task-failed"; the lost tasks,
	// comma-separated, for a lost worker).
	Task string `json:"task,omitempty"`
	// Cause classifies a task failure (see actors.FailureCause).
	Cause string `json:"cause,omitempty"`
	// Node is the worker ("worker-id@host:port").
	Node  string `json:"node,omitempty"`
	Error string `json:"error,omitempty"`
}

// Update is a live change, for Subscribe. Its Checkpoint and Timeline are
// shared by every subscriber: read them, do not change them.
type Update struct {
	// Kind is UpdateCheckpoint, UpdateTimeline or UpdateJob.
	Kind       string         `json:"kind"`
	Checkpoint *Checkpoint    `json:"checkpoint,omitempty"`
	Timeline   *TimelineEntry `json:"timeline,omitempty"`
	// State is the job's state after the change.
	State string `json:"state"`
	// Epoch is the job's epoch after the change.
	Epoch uint64 `json:"epoch"`
}
