package actorstest

import (
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/internal/engine"
)

// Faults injects failures into a running job, for tests, soaks and
// benchmarks; production jobs leave it nil. Each hook is optional, is called
// from the task actor concerned, and may panic to fail that task.
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
