// Package actorstest is for tests and benchmarks of jobs, not for
// production: it injects failures into a running job, so that a user can
// check that their own operators, sources and sinks give the same result
// with failures as without, and it switches checkpoints to the
// stop-the-world baseline that the bench compares against.
//
//	var once sync.Once
//	faults := &actorstest.Faults{
//		// Fail the task "sum#0" once, at its 1000th record.
//		Process: func(task string) { ... panic("injected") ... },
//	}
//	err := actors.Run(ctx, g, actors.WithStore(store), actorstest.WithFaults(faults))
//
// The hooks of Faults (Batch, RemoteBatch, RemoteWatermark, Snapshot,
// Restore, Process, Complete) are each optional, are called from the task
// actor concerned, and may panic to fail that task; a Batch or RemoteBatch
// hook may also drop or duplicate a batch (Drop, Duplicate), and a
// RemoteWatermark hook drop a watermark between nodes, which the runtime
// must detect. Every hook left nil costs nothing.
//
// The guide to the failure tests is docs/guarantees.md in the repository.
package actorstest
