// Package align decides, for one task with k input channels, when to process
// data, when to snapshot and when to give a checkpoint up: the aligned
// barrier protocol of asynchronous barrier snapshotting (Flink's aligned
// checkpoints).
//
// The Aligner is a pure state machine in the style of etcd-io/raft: no
// goroutines, clocks, randomness or I/O, and no actor code. The task actor
// feeds it every item its inputs deliver, in per-input FIFO order, through
// Step, and carries out the returned actions in order:
//
//	out = aligner.Step(align.Event[Batch]{Kind: align.Data, Input: i, Data: b}, out[:0])
//	for _, act := range out { ... }
//
// # Protocol
//
//   - Data on an unblocked input is processed at once (a Process action).
//   - Barrier n on input i starts, or joins, the alignment of checkpoint n:
//     input i is blocked and its later items (data, barriers, end) wait in
//     input i's own FIFO alignment buffer. The other inputs keep flowing.
//   - When barrier n has arrived on every input that is still open (ended
//     inputs count as aligned), the Aligner returns Snapshot(n): the task
//     snapshots its state, flushes its outputs and emits barrier n
//     downstream. Every input is then unblocked and the buffers are
//     released, input 0's first, each item re-stepped: the released data
//     become Process actions after the Snapshot, and a released barrier n+1
//     starts the next alignment, blocking its input again with the rest of
//     its buffer still held.
//   - A barrier m newer than the checkpoint n being aligned means n was
//     aborted upstream: the Aligner returns Abort(n), releases the buffers
//     of the inputs blocked on n (their items precede barrier m on those
//     inputs) and then handles barrier m normally.
//   - A barrier at or below the last snapshotted or aborted checkpoint, or
//     older than the one being aligned, is stale and ignored.
//   - AbortCheckpoint(n), for a coordinator timeout or decline, stops the
//     alignment of n (or of an older checkpoint) with Abort and releases
//     the buffers; later barriers <= n are stale.
//   - End on input i gives EndOfInput(i), which may complete an alignment
//     (Snapshot follows). When every input has ended, AllEnded is returned
//     exactly once, as the last action.
//
// This gives the snapshot boundary of DESIGN.md: the snapshot for n reflects
// exactly the items that precede barrier n on each input, and none that
// follow it on any input.
//
// # At least once
//
// NewAtLeastOnce returns an Aligner that never blocks an input (Flink's
// barrier tracking): data is always processed at once, each checkpoint's
// barriers are counted, and once one has arrived on every open input the
// Aligner returns Snapshot, after Abort for the older checkpoints still
// counted. The snapshot may then reflect data that followed the barrier on
// some inputs, which a restore replays: state is at least once. A barrier
// with Event.Aligned (a savepoint's) is aligned as above.
//
// # Unaligned
//
// NewUnaligned returns an Aligner for unaligned checkpoints (Flink's
// FLIP-76): the first barrier of a checkpoint, on any input, gives a
// Snapshot with Unaligned at once, ahead of everything the task has not
// processed yet; the data that still precedes the barrier on each input
// (what the task had not processed, and what arrives before that input's
// barrier, marked InFlight) is recorded as the checkpoint's channel
// state, and Persisted says when it is complete. State plus channel state
// then reflect exactly the items before the barrier on each input, as
// aligned; nothing is ever blocked.
//
// Items after an input's End, barriers with id 0 and out-of-range inputs are
// protocol violations: Step panics.
//
// Data on an unblocked input, the hot path, costs no allocation when out has
// capacity, and no map lookup.
//
// The guide is docs/concepts.md (barriers and alignment) and docs/checkpoints.md in the repository.
package align
