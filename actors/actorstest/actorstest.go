package actorstest

import (
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/internal/engine"
)

// Faults injects failures into a running job, for tests, soaks and
// benchmarks; production jobs leave it nil. Each hook is optional, is called
// from the task actor concerned, and may panic to fail that task.
//
// Its fields:
//   - Batch func(from, to string, seq uint64) BatchFault: decides the fate
//     of the seq-th batch on the channel from task from to task to.
//   - RemoteBatch func(from, to string, seq uint64) BatchFault: Batch for
//     the channels between nodes only (cluster mode), where a broken stream
//     loses batches.
//   - RemoteWatermark func(from, to string, seq uint64) BatchFault: decides
//     the fate of the seq-th watermark (or idle status) on a channel between
//     nodes: Drop loses it, which the link watch detects.
//   - Snapshot func(task string, checkpoint uint64): runs before a task
//     snapshots its state for a checkpoint.
//   - Restore func(task string, checkpoint uint64): runs before a task
//     loads its state from a checkpoint.
//   - Process func(task string): runs before a task processes each batch;
//     blocking in it makes the task a straggler.
//   - Complete func(task string, checkpoint uint64): runs before a task
//     handles the completion of a checkpoint, where transactional sinks
//     commit.
//   - Priority func(task string, msg any): runs when a barrier or an
//     alignment timeout is posted to a task's mailbox, in the poster's
//     goroutine, in the modes where they overtake the mailbox.
//   - Retained func(checkpoint uint64, err error): runs when the retention
//     pass that followed the completion of checkpoint ends, with its error;
//     it injects nothing (tests wait on it).
type Faults = engine.Faults

// BatchFault is what a Faults.Batch hook does to one batch.
type BatchFault = engine.BatchFault

// WithFaults installs fault-injection hooks.
func WithFaults(f *Faults) actors.Option { return engine.WithFaults(f) }

// WithSynchronousSnapshots replaces asynchronous barrier snapshots by a
// stop-the-world checkpoint, the baseline of the ABS paper: the sources
// pause from the trigger until the checkpoint ends, and every task uploads
// its state before it processes anything else. For benchmarks.
func WithSynchronousSnapshots() actors.Option { return engine.WithSynchronousSnapshots() }

// What a Faults.Batch hook does to one batch.
const (
	Deliver   = engine.Deliver   // send the batch normally
	Drop      = engine.Drop      // lose it, as a broken remote link would
	Duplicate = engine.Duplicate // deliver it twice
)
