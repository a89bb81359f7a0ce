// Package coordinator holds the bookkeeping of a job's checkpoint coordinator
// as a pure state machine: it decides when to trigger a checkpoint, collects
// the tasks' acks, and decides when a checkpoint completes, aborts, or fails
// the job. It does no I/O, starts no goroutines, reads no clock and imports no
// actor code.
//
// The actor shell owns a Coordinator and steps it with the events it
// receives: Tick for timers, RequestCheckpoint for manual triggers, Finish
// when every source is exhausted, Ack and Decline from the tasks,
// ManifestWritten once the store has answered, and Reset on a job failover.
// Every step takes the current time and returns the Actions the shell must
// carry out, in order:
//
//   - Trigger: send TriggerCheckpoint to every source task.
//   - WriteManifest: every task acked; write the manifest (last) and report
//     the outcome with ManifestWritten.
//   - Completed: the manifest is written; notify the tasks, apply retention.
//   - Aborted: tell the tasks, clean up the checkpoint's partial objects.
//   - RequestDone: answer a manual checkpoint request.
//   - FailJob: too many consecutive checkpoints failed; fail the job.
//
// After each step the shell arms one timer for NextTrigger and calls Tick
// when it fires.
//
// # Rules
//
// At most one checkpoint is in flight, and checkpoint ids strictly increase,
// also across Reset. Every Trigger is followed by exactly one Completed or
// Aborted for its id. A periodic checkpoint is triggered at
// max(lastTrigger+Interval, lastEnd+MinPause), where lastEnd is when the
// previous checkpoint completed or aborted. The clock starts at the first
// call that carries a time (and restarts at Reset), so the first periodic
// checkpoint is due one Interval after it.
//
// Once WriteManifest is emitted the checkpoint can no longer time out or be
// declined: only ManifestWritten (or Reset) ends it, because a manifest that
// reaches the store makes the checkpoint complete whatever the coordinator
// thought. The shell bounds the store write with its own context.
//
// The guide is docs/checkpoints.md in the repository.
package coordinator
