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
// (topology.PlanRestore), a job that already finished (ErrAlreadyFinished;
// see WithStartOver), and a store whose checkpoints are all unusable
// (snapshots.ErrNoUsableCheckpoint). While the job runs, what it reports
// about a checkpoint (EventCheckpointCompleted or EventCheckpointAborted, and
// the answer of Job.Checkpoint) matches what recovery would restore.
//
// # Savepoints and rescaling
//
// Job.Savepoint takes a savepoint: an aligned checkpoint that the user
// names, stored self-contained under `<job>/savepoints/<name>/` and never
// deleted by retention. Job.StopWithSavepoint takes one and stops the job
// at its barrier. WithSavepoint (or WithCheckpoint, for a retained
// checkpoint) starts a job from it, even a changed job: state is found by
// operator id (topology.OperatorID), and an operator may run at another
// parallelism. Keyed state is then redistributed by key group, each new task
// restoring the key groups of its range from the stored tasks that held
// them (in cluster mode, workers read only those bytes, through the
// key-group index of each state handle); the splits of split sources
// (topology.FromSplits, and the built-in sources) are dealt out again over
// the new source tasks. The decision, and every refusal, is
// topology.PlanRestore's. The job records where it started in the store, so
// that until it completes a checkpoint of its own, recovery (and a restart
// without the option) restore that point again.
//
// # Monitoring
//
// Listeners (WithListener, as many as needed) receive every Event from the
// job actor: EventCheckpointTriggered when the coordinator starts a
// checkpoint or savepoint; EventCheckpointCompleted with its size, its
// duration and, in Tasks, each task's state bytes, alignment, synchronous
// and asynchronous snapshot times; EventCheckpointAborted, Declined when a
// task declined it; EventTaskFailed with the failure's Cause (a panic, an
// operator's error, a failed commit, a failed restore, a lost worker).
// Job.TaskMetrics reads each task's records in and out, its batches
// waiting for credit and its time under backpressure. The tasks count per
// batch, in counters that outlive their actors, so the figures keep
// growing across restores; in cluster mode the workers send theirs to the
// coordinator with their heartbeat answers.
//
// # Cluster mode
//
// WithCluster runs the same job across processes over protoactor-go's
// remote (gRPC). The process that calls Start is the coordinator: it hosts
// the job actor, which keeps the checkpoint coordinator, the restart
// strategy and the manifest writes. Worker processes (ServeWorker, the same
// binary with the same job constructors) register with it and offer task
// slots. The decisions are pure types of package actors/membership: the
// table of workers with its heartbeat expiry, and the deterministic
// placement that spreads each operator's tasks across workers.
//
// For every epoch the coordinator places the tasks on the live workers and
// sends every worker a Deploy listing each task's worker; each worker spawns
// and supervises its own tasks, which load their state from the shared
// store. Task actors are named after the coordinator incarnation and the
// epoch, so a stale task can never receive a newer one's messages, and
// every message still carries its epoch. Tasks on one node pass Go values;
// across nodes a batch is a messages.RecordBatch encoded by the stream's
// wire codec (topology.WithWireCodec), on the same ordered stream as the
// barriers, ends of input and credits that follow it.
//
// A worker is lost when its connection breaks (remote watch) or it misses
// heartbeats for Cluster.HeartbeatTimeout (a hung or stopped process): that
// is the failure of every task on it, and the job rolls back as in one
// process, with its tasks placed on the workers that remain (waiting, within
// the restart strategy, for slots). A worker that loses its coordinator
// drops its tasks and registers again under a new id, so that a restarted
// coordinator finds it. A worker starts the tasks of a deployment only once
// the coordinator confirms that its epoch is still current.
//
// # One holder per job
//
// Every job, in one process as in a cluster's coordinator, claims the
// job's lease in the store when it starts
// (snapshots.Checkpoints.AcquireLease), renews it while it runs and
// releases it when it ends. A second instance of the job on the same
// store is refused with an error wrapping snapshots.ErrLeaseHeld that
// names the holder, unless WithTakeOver, which fences the first: it fails
// with snapshots.ErrLeaseLost at its next write, without completing a
// checkpoint or committing a sink. The lease gives each holder epochs above
// every earlier holder's; state keys, manifests and the file sink's files
// are fenced by them (docs/holder.md in the repository).
package actors
