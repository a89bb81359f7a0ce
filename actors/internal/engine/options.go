package engine

import (
	"errors"
	"fmt"
	"github.com/snapflow/snapflow/internal/diskstate"
	"io"
	"log/slog"
	"reflect"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/incremental"
)

// Defaults of the runtime options.
const (
	DefaultBatchSize = 256
	// DefaultBatchBytes bounds the estimated size of a batch: with large
	// records a batch is sent before it holds DefaultBatchSize of them.
	DefaultBatchBytes = 1 << 20
	// MaxCredits and MaxBatchSize bound WithCredits and WithBatchSize.
	MaxCredits                = 1 << 16
	MaxBatchSize              = 1 << 20
	DefaultLinger             = time.Millisecond
	DefaultCredits            = 8
	DefaultStopTimeout        = 30 * time.Second
	DefaultCheckpointInterval = time.Second
	DefaultRetained           = 3
)

// Option configures a job.
type Option func(*config)

type config struct {
	store            snapshots.Store
	storeSet         bool // WithStore was given, perhaps with nil
	startOver        bool
	checkpoint       coordinator.Config
	restart          restart.Policy
	batchSize        int
	batchBytes       int
	linger           time.Duration
	credits          int
	logger           *slog.Logger
	retained         int
	listeners        []func(Event)
	allowNewTopology bool
	syncSnapshots    bool
	mode             CheckpointMode
	// atLeastOnce: mode is AtLeastOnce (tasks count barriers, never
	// align them).
	atLeastOnce bool
	// unaligned: mode is Unaligned (tasks snapshot at the first barrier
	// and store channel state).
	unaligned bool
	// alignTimeout, when positive, switches an aligned checkpoint to
	// unaligned at a task whose alignment has waited that long.
	alignTimeout time.Duration
	faults       *Faults
	// linkInterval and linkTimeout drive the link watch of channels
	// between nodes (a worker's heartbeat interval and timeout; zero in
	// one process).
	linkInterval, linkTimeout time.Duration
	stopTimeout               time.Duration
	cluster                   *Cluster
	// from names the point the job starts from (WithSavepoint,
	// WithCheckpoint); nil: the newest checkpoint.
	from             *startPoint
	allowNonRestored bool
	// incremental is set by WithIncrementalCheckpoints, rewriteEvery as
	// given.
	incremental  bool
	rewriteEvery int
	// inline is WithInlineStateLimit's limit, when inlineSet.
	inline    int
	inlineSet bool
	// takeOver and leaseTTL configure the job's lease (see WithTakeOver).
	takeOver bool
	leaseTTL time.Duration
	// diskState is WithDiskState's configuration; nil keeps keyed state on
	// the heap.
	diskState *diskstate.Config
}

// startPoint is a savepoint (by name) or a checkpoint (by id) to start from.
type startPoint struct {
	isSavepoint bool
	savepoint   string
	checkpoint  uint64
}

func (p *startPoint) String() string {
	if p.isSavepoint {
		return fmt.Sprintf("savepoint %q", p.savepoint)
	}
	return fmt.Sprintf("checkpoint %d", p.checkpoint)
}

func defaultConfig() config {
	return config{
		checkpoint:  coordinator.Config{Interval: DefaultCheckpointInterval, Timeout: time.Minute, TolerableFailures: 3},
		restart:     restart.Policy{}.WithDefaults(),
		batchSize:   DefaultBatchSize,
		batchBytes:  DefaultBatchBytes,
		linger:      DefaultLinger,
		credits:     DefaultCredits,
		stopTimeout: DefaultStopTimeout,
		retained:    DefaultRetained,
	}
}

// WithStore sets the snapshot store. Without it the job uses the default
// store, the local directory snapshots.DefaultDir ("snapflow-data", in the
// working directory), the same default as snapshots.Open(""). A nil store,
// or a nil pointer of a store type, makes Start fail.
func WithStore(s snapshots.Store) Option {
	return func(c *config) { c.store, c.storeSet = s, true }
}

// WithStartOver discards the job's checkpoints in its store before the job
// starts, so that it runs from the beginning rather than resuming. Starting
// a job whose newest checkpoint is its final one (it ran to the end) fails
// with ErrAlreadyFinished unless this option is given.
func WithStartOver() Option { return func(c *config) { c.startOver = true } }

// WithCheckpointInterval sets the periodic checkpoint interval; 0 turns
// periodic checkpoints off (manual and final checkpoints still run).
func WithCheckpointInterval(d time.Duration) Option {
	return func(c *config) { c.checkpoint.Interval = d }
}

// WithCheckpointTimeout aborts a checkpoint that takes longer than d.
func WithCheckpointTimeout(d time.Duration) Option {
	return func(c *config) { c.checkpoint.Timeout = d }
}

// WithMinPause sets the minimum time between the end of a checkpoint and the
// start of the next periodic one.
func WithMinPause(d time.Duration) Option { return func(c *config) { c.checkpoint.MinPause = d } }

// WithTolerableCheckpointFailures sets how many consecutive checkpoints may
// fail before the job fails over (-1: unlimited). Default 3.
func WithTolerableCheckpointFailures(n int) Option {
	return func(c *config) { c.checkpoint.TolerableFailures = n }
}

// WithRestartPolicy sets the restart strategy used after task failures.
func WithRestartPolicy(p restart.Policy) Option {
	return func(c *config) { c.restart = p.WithDefaults() }
}

// WithBatchSize sets the number of records per batch (default 256).
func WithBatchSize(n int) Option { return func(c *config) { c.batchSize = n } }

// WithBatchBytes bounds the estimated size of a batch in bytes (default
// DefaultBatchBytes, 1 MiB): a batch is sent once it holds the batch size
// in records or n bytes, whichever comes first, and a source reads fewer
// records at a time when they are large. Memory in flight is bounded by
// channels x credits x (n + one record).
func WithBatchBytes(n int) Option { return func(c *config) { c.batchBytes = n } }

// WithLinger sets how long a partly filled batch may wait before it is sent
// (default 1ms).
func WithLinger(d time.Duration) Option { return func(c *config) { c.linger = d } }

// WithStopTimeout bounds how long Stop waits for the job's tasks to stop
// (default 30s; see Job.Stop).
func WithStopTimeout(d time.Duration) Option { return func(c *config) { c.stopTimeout = d } }

// WithCredits sets the batches in flight allowed per channel (default 8;
// channels between nodes of a cluster get 4 times as many). Memory is
// bounded by channels x credits x batch size.
func WithCredits(n int) Option { return func(c *config) { c.credits = n } }

// WithLogger sets the logger of the runtime and of protoactor-go. The default
// discards logs.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithRetainedCheckpoints keeps the newest n complete checkpoints (default 3).
func WithRetainedCheckpoints(n int) Option { return func(c *config) { c.retained = n } }

// WithListener registers a function called, from the job actor, for every
// Event. It must return quickly. Several listeners may be registered; each
// event reaches them in the order of registration.
func WithListener(f func(Event)) Option {
	return func(c *config) {
		if f != nil {
			c.listeners = append(c.listeners, f)
		}
	}
}

// WithSynchronousSnapshots replaces asynchronous barrier snapshots by a
// stop-the-world checkpoint, the baseline of the ABS paper: the sources pause
// from the trigger until the checkpoint ends, and every task uploads its state
// before it processes anything else. For benchmarks.
func WithSynchronousSnapshots() Option { return func(c *config) { c.syncSnapshots = true } }

// CheckpointMode is how a task with several inputs treats the barriers of
// a checkpoint (see WithCheckpointMode).
type CheckpointMode int

const (
	// Aligned checkpoints (the default) block each input from its barrier
	// until the barrier has arrived on every input: exactly-once state.
	Aligned CheckpointMode = iota
	// AtLeastOnce checkpoints never block an input: a task snapshots once
	// a barrier has arrived on every input, having processed meanwhile
	// the records that followed it on the others. A restore replays
	// those records again: state may count them twice.
	AtLeastOnce
	// Unaligned checkpoints never block an input either: the first
	// barrier of a checkpoint snapshots the task at once and overtakes
	// its queued input and output, which are stored with the checkpoint
	// as channel state and replayed on restore: exactly-once state.
	Unaligned
)

// String names the mode as the docs do: "aligned", "at-least-once".
func (m CheckpointMode) String() string {
	switch m {
	case Aligned:
		return "aligned"
	case AtLeastOnce:
		return "at-least-once"
	case Unaligned:
		return "unaligned"
	}
	return fmt.Sprintf("CheckpointMode(%d)", int(m))
}

// WithCheckpointMode sets how tasks treat the barriers of a checkpoint:
// Aligned (the default), AtLeastOnce or Unaligned. Savepoints are always
// aligned.
func WithCheckpointMode(m CheckpointMode) Option { return func(c *config) { c.mode = m } }

// WithAlignmentTimeout switches an aligned checkpoint to unaligned at a
// task whose alignment has waited d (see actors.WithAlignmentTimeout).
func WithAlignmentTimeout(d time.Duration) Option { return func(c *config) { c.alignTimeout = d } }

// WithAllowTopologyChange lets a job resume from its newest checkpoint
// although the topology changed (another fingerprint), as long as the
// checkpoint can still be restored exactly, as from a savepoint (see
// WithSavepoint): state is found by operator id, an operator may run at
// another parallelism (keyed state is redistributed by key group, split
// sources' splits over the new tasks), keyed state needs the same max
// parallelism and the same state declarations (new states may be added),
// and a source that keeps one offset per task (topology.FromSource) keeps
// its parallelism. Stateless operators and edges may change; new operators
// start empty. Start refuses anything else, before any record flows, saying
// what changed.
func WithAllowTopologyChange() Option { return func(c *config) { c.allowNewTopology = true } }

// WithSavepoint starts the job from the savepoint called name (see
// Job.Savepoint) rather than from its newest checkpoint. The job may differ
// from the one that took it: state is found by operator id (see
// topology.OperatorID), any operator may run at another parallelism (keyed
// state is redistributed by key group, and split sources' splits over the
// new source tasks), operators may be added (they start empty) or removed
// (only without state, unless WithAllowNonRestoredState). Start refuses, before
// any record flows, a savepoint that is missing or corrupt (it is never
// skipped), taken under another max parallelism, holding state of a missing
// operator id, or whose state declarations changed.
//
// The job remembers where it started (in the store, at `<job>/origin`):
// until it completes a checkpoint of its own, a recovery, and a restart of
// the job without this option, restore the savepoint again, never a
// checkpoint of the job's earlier history. Its checkpoint ids continue above
// every id used before.
func WithSavepoint(name string) Option {
	return func(c *config) { c.from = &startPoint{isSavepoint: true, savepoint: name} }
}

// WithCheckpoint starts the job from its retained complete checkpoint id
// rather than from its newest one, with the same freedom and checks as
// WithSavepoint. A missing or corrupt checkpoint is refused, never skipped.
func WithCheckpoint(id uint64) Option {
	return func(c *config) { c.from = &startPoint{checkpoint: id} }
}

// WithAllowNonRestoredState lets a job start from a savepoint or checkpoint
// that holds state of operator ids the job no longer has: that state is
// dropped (and logged) rather than refused.
func WithAllowNonRestoredState() Option { return func(c *config) { c.allowNonRestored = true } }

// WithIncrementalCheckpoints makes checkpoints incremental: each task
// stores only the key groups of its keyed state written since the newest
// complete checkpoint, and references the others where earlier
// checkpoints stored them (see snapshots/incremental). A checkpoint then
// costs in proportion to what changed rather than to the state.
//
// To bound how many objects a task's state spans, and how long an old
// object is kept for the few key groups still in it, every key group is
// stored again at least once every rewriteEvery checkpoints, spread over
// them (about 1/rewriteEvery of the state per checkpoint); rewriteEvery 0
// means incremental.DefaultRewriteEvery (100). Smaller values upload more
// per checkpoint and leave fewer, younger objects.
//
// What is written is tracked per key group, by ValueState.Set and Clear and
// MapState.Put and Delete (and, for values reachable through references,
// Get: see topology.Value). Savepoints stay self-contained, stored in full;
// the first checkpoint after a savepoint, a rescale or a start, and any
// non-keyed state (source positions, operator state) are stored in full.
// Retention deletes an object only once no retained checkpoint references
// it.
func WithIncrementalCheckpoints(rewriteEvery int) Option {
	return func(c *config) { c.incremental, c.rewriteEvery = true, rewriteEvery }
}

// WithDiskState keeps the keyed state of the job's tasks on local disk
// (see package diskstate) rather than on the heap.
func WithDiskState(d diskstate.Config) Option {
	return func(c *config) { c.diskState = &d }
}

// Defaults of WithInlineStateLimit.
const (
	// DefaultInlineStateLimit is the largest task state that travels inside
	// the manifest by default.
	DefaultInlineStateLimit = 512 << 10
	// InlineManifestBudget bounds, by default, the inline states of one
	// manifest: each task's limit is at most InlineManifestBudget divided by
	// the number of tasks.
	InlineManifestBudget = 8 << 20
	// MaxInlineStateLimit bounds WithInlineStateLimit: an inline state
	// travels in its task's ack (over the network in a cluster) and in
	// every manifest.
	MaxInlineStateLimit = 4 << 20
)

// WithInlineStateLimit sets the size up to which a task's stored state
// travels inside the checkpoint's manifest instead of as an object of its
// own, so that a checkpoint of small tasks is one write. 0 stores every
// state as an object. The default is the smaller of
// DefaultInlineStateLimit and InlineManifestBudget divided by the number
// of tasks. An inline state cannot be referenced by a later incremental
// checkpoint: the task stores it again, in full, which costs little at
// that size. In a cluster the coordinator's limit applies to every worker.
func WithInlineStateLimit(n int) Option { return func(c *config) { c.inline, c.inlineSet = n, true } }

// inlineLimit is the inline limit in force for plan's tasks (see
// WithInlineStateLimit).
func (c *config) inlineLimit(plan *dataflow.Plan) int {
	if c.inlineSet {
		return c.inline
	}
	return min(DefaultInlineStateLimit, InlineManifestBudget/max(1, len(plan.Tasks)))
}

func (c *config) finish() error {
	switch c.mode {
	case Aligned, AtLeastOnce, Unaligned:
		c.atLeastOnce, c.unaligned = c.mode == AtLeastOnce, c.mode == Unaligned
	default:
		return fmt.Errorf("actors: WithCheckpointMode(%d): unknown mode (want actors.CheckpointAligned, actors.CheckpointUnaligned or actors.CheckpointAtLeastOnce)", int(c.mode))
	}
	if c.alignTimeout < 0 || (c.alignTimeout > 0 && c.mode != Aligned) {
		return fmt.Errorf("actors: WithAlignmentTimeout(%v): the timeout must be positive and the checkpoint mode aligned (the default), not %v", c.alignTimeout, c.mode)
	}
	if c.alignTimeout > 0 && c.syncSnapshots {
		return errors.New("actors: WithAlignmentTimeout with WithSynchronousSnapshots: a switched checkpoint's upload waits for its channel state, which the task records while it runs on; choose one")
	}
	if c.unaligned && c.syncSnapshots {
		return errors.New("actors: WithCheckpointMode(actors.CheckpointUnaligned) with WithSynchronousSnapshots: an unaligned checkpoint's upload waits for its channel state, which the task records while it runs on; choose one")
	}
	if c.inlineSet && (c.inline < 0 || c.inline > MaxInlineStateLimit) {
		return fmt.Errorf("actors: WithInlineStateLimit(%d): the limit must be between 0 and %d bytes", c.inline, MaxInlineStateLimit)
	}
	if c.diskState != nil {
		if err := c.diskState.Check(); err != nil {
			return fmt.Errorf("actors: WithDiskState: %w", err)
		}
	}
	if c.incremental && c.rewriteEvery < 0 {
		return fmt.Errorf("actors: WithIncrementalCheckpoints(%d): rewriteEvery must be at least 1, or 0 for the default %d", c.rewriteEvery, incremental.DefaultRewriteEvery)
	}
	if c.batchSize < 1 || c.batchSize > MaxBatchSize {
		return fmt.Errorf("actors: WithBatchSize(%d): the batch size must be between 1 and %d records", c.batchSize, MaxBatchSize)
	}
	if c.batchBytes < 1 {
		return fmt.Errorf("actors: WithBatchBytes(%d): the batch bytes must be at least 1", c.batchBytes)
	}
	if c.stopTimeout <= 0 {
		return fmt.Errorf("actors: WithStopTimeout(%v): the stop timeout must be positive", c.stopTimeout)
	}
	if c.credits < 1 || c.credits > MaxCredits {
		return fmt.Errorf("actors: WithCredits(%d): the credits must be between 1 and %d batches per channel", c.credits, MaxCredits)
	}
	if c.linger <= 0 {
		return fmt.Errorf("actors: linger %v must be positive", c.linger)
	}
	if c.from != nil && !c.from.isSavepoint && c.from.checkpoint == 0 {
		return errors.New("actors: WithCheckpoint(0): checkpoint ids start at 1")
	}
	if c.from != nil && c.from.isSavepoint {
		if err := snapshots.ValidateSavepointName(c.from.savepoint); err != nil {
			return fmt.Errorf("actors: WithSavepoint(%q): %w", c.from.savepoint, err)
		}
	}
	if c.retained < 1 {
		return fmt.Errorf("actors: retained checkpoints %d must be at least 1", c.retained)
	}
	if c.leaseTTL < 0 {
		return fmt.Errorf("actors: WithLeaseTimeout(%v): the timeout must be positive (0: the default %v)", c.leaseTTL, snapshots.DefaultLeaseTTL)
	}
	if err := c.checkpoint.Validate(); err != nil {
		return fmt.Errorf("actors: %w", err)
	}
	if err := c.restart.Validate(); err != nil {
		return fmt.Errorf("actors: %w", err)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	switch {
	case c.storeSet && isNil(c.store):
		return fmt.Errorf("actors: WithStore(%T(nil)): the store is nil; check the error of the function that opened it", c.store)
	case c.store == nil:
		s, err := snapshots.NewDir(snapshots.DefaultDir)
		if err != nil {
			return fmt.Errorf("actors: the default store (directory %s): %w", snapshots.DefaultDir, err)
		}
		c.store = s
	}
	return nil
}

// isNil reports whether s is nil or holds a nil pointer, map, slice, func or
// channel.
func isNil(s snapshots.Store) bool {
	if s == nil {
		return true
	}
	switch v := reflect.ValueOf(s); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}

// diskStateFor is the on-disk backend's configuration for a task, logging
// to log; nil on the heap backend.
func (c *config) diskStateFor(log *slog.Logger) *diskstate.Config {
	if c.diskState == nil {
		return nil
	}
	d := *c.diskState
	if d.Logger == nil {
		d.Logger = log
	}
	return &d
}
