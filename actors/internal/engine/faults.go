package engine

// BatchFault is what a Faults.Batch hook does to one batch.
type BatchFault uint8

const (
	// Deliver sends the batch normally.
	Deliver BatchFault = iota
	// Drop loses the batch, as a broken remote link would.
	Drop
	// Duplicate delivers the batch twice.
	Duplicate
)

// Faults injects failures into a running job, for tests, soaks and
// benchmarks; production jobs leave it nil. Each hook is optional, is called
// from the task actor concerned, and may panic to fail that task.
type Faults struct {
	// Batch decides the fate of the seq-th batch on the channel from task
	// from to task to.
	Batch func(from, to string, seq uint64) BatchFault
	// RemoteBatch is Batch for the channels between nodes only (cluster
	// mode: see Worker.Faults), where a broken stream loses batches.
	RemoteBatch func(from, to string, seq uint64) BatchFault
	// RemoteWatermark decides the fate of the seq-th watermark (or idle
	// status) on a channel between nodes, from task from to task to:
	// Drop loses it (Duplicate delivers it once).
	RemoteWatermark func(from, to string, seq uint64) BatchFault
	// Snapshot runs before a task snapshots its state for a checkpoint.
	Snapshot func(task string, checkpoint uint64)
	// Restore runs before a task loads its state from a checkpoint.
	Restore func(task string, checkpoint uint64)
	// Process runs before a task processes each batch; blocking in it makes
	// the task a straggler.
	Process func(task string)
	// Complete runs before a task handles the completion of a checkpoint,
	// where transactional sinks commit: a panic there is a failure in the
	// window between a checkpoint's completion and its commit.
	Complete func(task string, checkpoint uint64)
	// Priority runs when a barrier or an alignment timeout is posted to a
	// task's mailbox, in the poster's goroutine, in the modes where they
	// overtake the mailbox (see task_priority.go).
	Priority func(task string, msg any)
	// Retained runs, in the goroutine of the retention pass that followed
	// the completion of checkpoint, when that pass ends, with its error. It
	// injects nothing: tests wait on it.
	Retained func(checkpoint uint64, err error)
}

// WithFaults installs fault-injection hooks.
func WithFaults(f *Faults) Option { return func(c *config) { c.faults = f } }

// Stats are counters of a job's life.
type Stats struct {
	// StaleMessages counts data-path messages of an older epoch that tasks
	// dropped on arrival (epoch fencing).
	StaleMessages uint64
}

// Stats returns the job's counters.
func (j *Job) Stats() Stats { return Stats{StaleMessages: j.sh.stale.Load()} }
