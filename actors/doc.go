// Package actors is snapflow's runtime: it runs a topology.Graph as
// protoactor-go actors with aligned barrier checkpoints and consistent
// recovery. It is the only package that imports protoactor-go.
//
// One job actor supervises a task actor per parallel operator instance. Records
// move between tasks in batches, flushed when full or after a short linger,
// under credit-based flow control. The job actor also hosts the checkpoint
// coordinator (package actors/coordinator): it triggers checkpoints at the
// sources, which snapshot their offsets and send barriers downstream on the
// data path; every task aligns the barriers of its inputs (package
// actors/align), snapshots its state synchronously, uploads it to the store
// asynchronously and acknowledges. When every task has acknowledged, the
// manifest is written last and the checkpoint is complete.
//
// When any task fails (a panic, or an error returned by an operator), the job
// actor rolls the whole job back to the newest complete checkpoint: the epoch
// is incremented, every task actor is restarted and loads its state, sources
// seek to their offsets, and messages of older epochs are dropped on arrival.
// Restarts follow a restart.Policy; when it is exhausted, Wait returns a
// *JobError carrying the failed task's operator, panic value and stack.
//
// A job resumes from the newest complete checkpoint of its name in its store
// (by default the directory snapshots.DefaultDir). Start refuses, before any
// record flows, a checkpoint that cannot be restored exactly
// (topology.CheckRestore), a job that already finished (ErrAlreadyFinished;
// see WithStartOver), and a store whose checkpoints are all unusable
// (snapshots.ErrNoUsableCheckpoint). While the job runs, what it reports
// about a checkpoint (EventCheckpointCompleted or EventCheckpointAborted, and
// the answer of Job.Checkpoint) matches what recovery would restore.
package actors
