package actors

import (
	"log/slog"
	"time"

	"github.com/snapflow/snapflow/actors/internal/engine"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/snapshots"
)

// Option configures a job.
type Option = engine.Option

// WithStore sets the snapshot store. Without it the job uses the default
// store, the local directory snapshots.DefaultDir ("snapflow-data", in the
// working directory), the same default as snapshots.Open(""). A nil store,
// or a nil pointer of a store type, makes Start fail.
func WithStore(s snapshots.Store) Option { return engine.WithStore(s) }

// WithCheckpointInterval sets the periodic checkpoint interval; 0 turns
// periodic checkpoints off (manual and final checkpoints still run).
func WithCheckpointInterval(d time.Duration) Option { return engine.WithCheckpointInterval(d) }

// WithCheckpointTimeout aborts a checkpoint that takes longer than d.
func WithCheckpointTimeout(d time.Duration) Option { return engine.WithCheckpointTimeout(d) }

// WithMinPause sets the minimum time between the end of a checkpoint and the
// start of the next periodic one.
func WithMinPause(d time.Duration) Option { return engine.WithMinPause(d) }

// WithTolerableCheckpointFailures sets how many consecutive checkpoints may
// fail before the job fails over (-1: unlimited). Default 3.
func WithTolerableCheckpointFailures(n int) Option { return engine.WithTolerableCheckpointFailures(n) }

// WithRestartPolicy sets the restart strategy used after task failures.
func WithRestartPolicy(p restart.Policy) Option { return engine.WithRestartPolicy(p) }

// WithRetainedCheckpoints keeps the newest n complete checkpoints (default
// 3).
func WithRetainedCheckpoints(n int) Option { return engine.WithRetainedCheckpoints(n) }

// DiskState configures the on-disk state backend (see WithDiskState):
// the parent directory of the tasks' databases (default: snapflow/state
// under the user's cache directory, or snapflow-state under the system's
// temporary directory where there is none; never the snapshot store), the
// process's block cache and each task's memtable.
//
// Its fields:
//   - Dir string: the parent directory of the tasks' databases; "": the
//     default above.
//   - CacheBytes int64: the block cache that the task databases of the
//     process share (those of every job configured with the same size);
//     0: a quarter of the memory available to the process (the machine's,
//     or its control group's limit, or GOMEMLIMIT, the smallest), at least
//     64 MiB. At least 1 MiB when set. Memtables come on top of it.
//   - MemTableBytes int64: each task's memtable, the writes kept in memory
//     before they are flushed to a file; 0: 16 MiB. At least 1 MiB when
//     set. A task holds two (three while one is flushed).
//   - Logger *slog.Logger: takes the database's messages (nil: discarded).
//   - NoLocalRecovery bool: turns task-local recovery off: a restore then
//     reads every file from the snapshot store, never a local copy.
type DiskState = diskstate.Config

// WithDiskState keeps the job's keyed state (value and map states, and the
// window state built on them) on local disk, in an embedded LSM tree
// (cockroachdb/pebble) per task, rather than in Go maps: the state may
// then be larger than memory. Each task incarnation starts a database of
// its own, from its checkpoint, and removes it when it ends; the durable
// copy is the checkpoint. A snapshot's synchronous part is a snapshot of
// the database, and its entries are encoded during the upload, in the
// format the heap backend stores, so that checkpoints, savepoints and
// rescaling work as on the heap, and a savepoint moves a job between
// backends. Timers stay on the heap. See docs/state-backends.md.
func WithDiskState(d DiskState) Option { return engine.WithDiskState(d) }

// WithIncrementalCheckpoints makes checkpoints incremental: each task stores
// only the key groups of its keyed state written since the newest complete
// checkpoint, and references the others where earlier checkpoints stored
// them (see snapshots/incremental). A checkpoint then costs in proportion to
// what changed rather than to the state.
//
// To bound how many objects a task's state spans, and how long an old object
// is kept for the few key groups still in it, every key group is stored
// again at least once every rewriteEvery checkpoints, spread over them
// (about 1/rewriteEvery of the state per checkpoint); rewriteEvery 0 means
// incremental.DefaultRewriteEvery (100). Smaller values upload more per
// checkpoint and leave fewer, younger objects.
//
// What is written is tracked per key group, by ValueState.Set and Clear and
// MapState.Put and Delete (and, for values reachable through references,
// Get: see topology.Value). Savepoints stay self-contained, stored in full;
// the first checkpoint after a savepoint, a rescale or a start, and any
// non-keyed state (source positions, operator state) are stored in full.
// Retention deletes an object only once no retained checkpoint references
// it.
func WithIncrementalCheckpoints(rewriteEvery int) Option {
	return engine.WithIncrementalCheckpoints(rewriteEvery)
}

// CheckpointMode is how a task with several inputs treats the barriers of
// a checkpoint; see WithCheckpointMode.
type CheckpointMode = engine.CheckpointMode

const (
	// CheckpointAligned (the default): a task blocks each input from its
	// barrier until the barrier has arrived on every input, so that its
	// snapshot reflects exactly the records before the barriers. State is
	// exactly once.
	CheckpointAligned = engine.Aligned
	// CheckpointAtLeastOnce: a task never blocks an input; it snapshots
	// once the barrier has arrived on every input, having processed the
	// records that followed it on the inputs where it came first. After a
	// restore those records are processed again, so state may count them
	// twice: no record is lost, some may be duplicated. Checkpoints then
	// never wait for alignment under backpressure or skew. Savepoints are
	// always aligned. Tasks with one input behave as when aligned.
	CheckpointAtLeastOnce = engine.AtLeastOnce
	// CheckpointUnaligned: a task never blocks an input, and a barrier
	// never waits behind queued records. The first barrier of a
	// checkpoint, on any input, snapshots the task at once and is sent
	// downstream ahead of the task's queued output; the records it
	// overtook (queued for output, or arrived but not processed, or
	// arriving on another input before that input's barrier) are stored
	// with the checkpoint as channel state, and a restore replays them
	// before any new record. State is exactly once, as when aligned;
	// checkpoints cost the in-flight records they store. Savepoints are
	// always aligned. Every edge's records must have a wire codec (as in
	// cluster mode), and WithSynchronousSnapshots is refused.
	CheckpointUnaligned = engine.Unaligned
)

// WithCheckpointMode sets how tasks treat checkpoint barriers:
// CheckpointAligned (the default), CheckpointUnaligned or
// CheckpointAtLeastOnce. Another value is refused by Start.
func WithCheckpointMode(m CheckpointMode) Option { return engine.WithCheckpointMode(m) }

// WithAlignmentTimeout makes aligned checkpoints switch to unaligned once
// d has passed since the checkpoint was triggered (Flink's aligned
// checkpoint timeout), wherever its barrier still waits: a task whose
// alignment still waits for other inputs, or whose snapshot waits behind
// input not processed yet, snapshots at once and stores that input, and
// what arrives before the barrier on its other inputs, as channel state,
// as CheckpointUnaligned does; a task whose barrier waits in an output
// queue sends it ahead of the batches there and stores them. Checkpoints
// whose barriers pass within d cost nothing more. It needs the aligned
// mode (the default); edges need a wire codec. Savepoints and the final
// checkpoint never switch.
func WithAlignmentTimeout(d time.Duration) Option { return engine.WithAlignmentTimeout(d) }

// WithInlineStateLimit sets the size up to which a task's stored state
// travels inside the checkpoint's manifest instead of as an object of its
// own, so that a checkpoint of small tasks is one write. 0 stores every
// state as an object. The default is the smaller of DefaultInlineStateLimit
// and InlineManifestBudget divided by the number of tasks. An inline state
// cannot be referenced by a later incremental checkpoint: the task stores it
// again, in full, which costs little at that size. In a cluster the
// coordinator's limit applies to every worker.
func WithInlineStateLimit(n int) Option { return engine.WithInlineStateLimit(n) }

// WithBatchSize sets the number of records per batch (default 256).
func WithBatchSize(n int) Option { return engine.WithBatchSize(n) }

// WithBatchBytes bounds the estimated size of a batch in bytes (default
// DefaultBatchBytes, 1 MiB): a batch is sent once it holds the batch size in
// records or n bytes, whichever comes first, and a source reads fewer
// records at a time when they are large. Memory in flight is bounded by
// channels x credits x (n + one record).
func WithBatchBytes(n int) Option { return engine.WithBatchBytes(n) }

// WithLinger sets how long a partly filled batch may wait before it is sent
// (default 1ms).
func WithLinger(d time.Duration) Option { return engine.WithLinger(d) }

// WithCredits sets the batches in flight allowed per channel (default 8;
// channels between nodes of a cluster get 4 times as many). Memory is
// bounded by channels x credits x batch size.
func WithCredits(n int) Option { return engine.WithCredits(n) }

// WithStopTimeout bounds how long Stop waits for the job's tasks to stop
// (default 30s; see Job.Stop).
func WithStopTimeout(d time.Duration) Option { return engine.WithStopTimeout(d) }

// WithLogger sets the logger of the runtime and of protoactor-go. The
// default discards logs.
func WithLogger(l *slog.Logger) Option { return engine.WithLogger(l) }

// WithListener registers a function called, from the job actor, for every
// Event. It must return quickly. Several listeners may be registered; each
// event reaches them in the order of registration.
func WithListener(f func(Event)) Option { return engine.WithListener(f) }

// WithStartOver discards the job's checkpoints in its store before the job
// starts, so that it runs from the beginning rather than resuming. Starting
// a job whose newest checkpoint is its final one (it ran to the end) fails
// with ErrAlreadyFinished unless this option is given.
func WithStartOver() Option { return engine.WithStartOver() }

// WithTakeOver makes Start take the job over even from a running instance of
// it (another process, or a coordinator, holding the job's lease in the
// store): the other instance is fenced, and fails with
// snapshots.ErrLeaseLost at its next write, without completing another
// checkpoint or committing another transaction. Without it, Start refuses
// while another instance runs (an error wrapping snapshots.ErrLeaseHeld that
// names it). Use it for a deliberate replacement, such as a rolling update
// that starts the new process before the old one has ended.
func WithTakeOver() Option { return engine.WithTakeOver() }

// WithLeaseTimeout sets how long another instance that finds this one silent
// (a crash on another host, a hang, a partition) waits before it takes the
// job over (default snapshots.DefaultLeaseTTL). The job renews its lease ten
// times as often. A job that stopped releases the lease, and one whose
// process is gone on the same host is taken over at once, so the wait
// applies only when nothing else can tell.
func WithLeaseTimeout(d time.Duration) Option { return engine.WithLeaseTimeout(d) }

// WithSavepoint starts the job from the savepoint called name (see
// Job.Savepoint) rather than from its newest checkpoint. The job may differ
// from the one that took it: state is found by operator id (see
// topology.OperatorID), any operator may run at another parallelism (keyed
// state is redistributed by key group, and split sources' splits over the
// new source tasks), operators may be added (they start empty) or removed
// (only without state, unless WithAllowNonRestoredState). Start refuses,
// before any record flows, a savepoint that is missing or corrupt (it is
// never skipped), taken under another max parallelism, holding state of a
// missing operator id, or whose state declarations changed.
//
// The job remembers where it started (in the store, at `<job>/origin`):
// until it completes a checkpoint of its own, a recovery, and a restart of
// the job without this option, restore the savepoint again, never a
// checkpoint of the job's earlier history. Its checkpoint ids continue above
// every id used before.
func WithSavepoint(name string) Option { return engine.WithSavepoint(name) }

// WithCheckpoint starts the job from its retained complete checkpoint id
// rather than from its newest one, with the same freedom and checks as
// WithSavepoint. A missing or corrupt checkpoint is refused, never skipped.
func WithCheckpoint(id uint64) Option { return engine.WithCheckpoint(id) }

// WithAllowNonRestoredState lets a job start from a savepoint or checkpoint
// that holds state of operator ids the job no longer has: that state is
// dropped (and logged) rather than refused.
func WithAllowNonRestoredState() Option { return engine.WithAllowNonRestoredState() }

// WithAllowTopologyChange lets a job resume from its newest checkpoint
// although the topology changed (another fingerprint), as long as the
// checkpoint can still be restored exactly, as from a savepoint (see
// WithSavepoint): state is found by operator id, an operator may run at
// another parallelism (keyed state is redistributed by key group, split
// sources' splits over the new tasks), keyed state needs the same max
// parallelism and the same state declarations (new states may be added), and
// a source that keeps one offset per task (topology.FromSource) keeps its
// parallelism. Stateless operators and edges may change; new operators start
// empty. Start refuses anything else, before any record flows, saying what
// changed.
func WithAllowTopologyChange() Option { return engine.WithAllowTopologyChange() }
