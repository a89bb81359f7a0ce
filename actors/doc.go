// Package actors runs a topology.Graph: every operator instance as a
// supervised protoactor-go actor, with aligned barrier checkpoints into a
// snapshot store and consistent recovery.
//
//	job, err := actors.Start(ctx, g, actors.WithStore(store), actors.WithCheckpointInterval(time.Second))
//	...
//	err = job.Wait() // nil once every source has ended and the final checkpoint completed
//
// Run is Start and Wait in one call. A Job also takes checkpoints and
// savepoints on demand (Checkpoint, Savepoint, StopWithSavepoint), stops
// (Stop), and reports its counters (Stats, TaskMetrics) and, to listeners
// (WithListener), every Event of its life.
//
// # Checkpoints and recovery
//
// The job actor triggers checkpoints at the sources, which store their
// offsets and send barriers downstream on the data path; every task aligns
// the barriers of its inputs, snapshots its state, uploads it
// asynchronously and acknowledges; the manifest is written last. When any
// task fails (a panic, an error returned by an operator), the whole job
// rolls back to the newest complete checkpoint, and messages of the failed
// attempt are fenced out by epoch. Restarts follow a restart.Policy; when
// it is exhausted, Wait returns a *JobError naming the failed task.
//
// # Starting, resuming, restoring
//
// A job resumes from the newest complete checkpoint of its name in its
// store (by default the directory snapshots.DefaultDir). WithSavepoint and
// WithCheckpoint start it from a named point instead, possibly at other
// parallelisms, with state found by operator id. Start refuses, before any
// record flows, what cannot be restored exactly, a job that already
// finished (ErrAlreadyFinished; see WithStartOver), a store whose
// checkpoints are all unusable, and a job another instance holds
// (snapshots.ErrLeaseHeld; see WithTakeOver).
//
// # Related packages
//
// Package actors/cluster runs the same job across processes. Package
// actors/monitor and actors/web export its metrics and serve its
// dashboard. Package actors/actorstest injects failures, for tests of a
// job. The pure decisions of the runtime are packages actors/align,
// actors/coordinator, actors/membership, actors/restart and
// actors/linkwatch; the runtime itself is internal.
//
// The guides: docs/concepts.md, docs/checkpoints.md, docs/recovery.md,
// docs/savepoints.md and docs/holder.md in the repository.
package actors
