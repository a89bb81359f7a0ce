package chaos

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// Kind is a kind of injected failure.
type Kind string

// The kinds of failure an Injector injects.
const (
	OperatorPanic Kind = "operator-panic"
	SnapshotPanic Kind = "snapshot-panic"
	RestorePanic  Kind = "restore-panic"
	DropBatch     Kind = "drop-batch"
	DupBatch      Kind = "duplicate-batch"
	StoreError    Kind = "store-error"
	Straggler     Kind = "straggler"
)

// Rates are the probabilities of each failure per opportunity.
type Rates struct {
	OperatorPanic float64 // per record seen by a checker
	SnapshotPanic float64 // per task snapshot
	RestorePanic  float64 // per task restore
	DropBatch     float64 // per batch sent
	DupBatch      float64 // per batch sent
	StoreError    float64 // per store call
	StoreLatency  time.Duration
	Straggler     float64       // per batch processed
	StragglerTime time.Duration // how long a straggler stalls
}

// Injector decides, from its seed, where failures strike, and counts them.
// Its budget bounds, per kind and per phase (see NewPhase), the failures
// that end a task (panics, dropped and duplicated batches) so that a job
// always gets to finish.
type Injector struct {
	seed  uint64
	rates Rates

	mu     sync.Mutex
	budget int          // per task-ending kind and phase
	spent  map[Kind]int // of the budget, in this phase
	counts map[Kind]int
	seen   map[site]uint64 // how often each site was rolled
	// failRestore, when not 0, is a checkpoint whose next restore by any
	// task fails (see FailRestoreOf).
	failRestore uint64
	// failPut, when not "", is a key prefix below which the next Put fails
	// (see FailPutUnder); failedPut tells that it did, and of which
	// checkpoint the object was.
	failPut          string
	failedPut        bool
	failedCheckpoint uint64

	disabled atomic.Bool
}

// NewInjector returns an injector that injects at most budget task failures
// of each kind.
func NewInjector(seed uint64, rates Rates, budget int) *Injector {
	return &Injector{seed: seed, rates: rates, budget: budget, spent: map[Kind]int{}, counts: map[Kind]int{}, seen: map[site]uint64{}}
}

// NewPhase renews the budget of task failures, for the next phase of a run
// (a job resumed from a savepoint, say): every phase may fail as often as
// the first. The counts go on.
func (in *Injector) NewPhase() {
	in.mu.Lock()
	defer in.mu.Unlock()
	clear(in.spent)
}

// FailRestoreOf makes the next task that restores checkpoint fail while
// restoring it (a RestorePanic), whatever the rates, even while injection
// is disabled; once. A phase started from a savepoint uses it so that every
// phase's recovery restores its savepoint again, however fast the machine.
func (in *Injector) FailRestoreOf(checkpoint uint64) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failRestore = checkpoint
}

// FailPutUnder makes the next Put of a key below prefix (the objects of a
// savepoint, say) fail with ErrInjected, whatever the rates, even while
// injection is disabled; once. PutFailed then reports it. An empty prefix
// disarms it.
func (in *Injector) FailPutUnder(prefix string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.failPut, in.failedPut, in.failedCheckpoint = prefix, false, 0
}

// PutFailed reports whether the Put that FailPutUnder asked to fail has
// failed, and the checkpoint id of the task state or manifest it carried
// (0 for another object).
func (in *Injector) PutFailed() (checkpoint uint64, failed bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.failedCheckpoint, in.failedPut
}

// forcedPut reports whether this Put of key is the one FailPutUnder asked
// to fail, and counts it.
func (in *Injector) forcedPut(key string, data []byte) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.failPut == "" || !strings.HasPrefix(key, in.failPut) {
		return false
	}
	in.failPut, in.failedPut = "", true
	in.failedCheckpoint = checkpointOf(data)
	in.counts[StoreError]++
	return true
}

// checkpointOf returns the checkpoint id of a stored task state or
// manifest, or 0.
func checkpointOf(data []byte) uint64 {
	var st messages.TaskState
	if snapshots.DecodeObject(data, snapshots.KindTaskState, &st) == nil {
		return st.GetCheckpointId()
	}
	var m messages.Manifest
	if snapshots.DecodeObject(data, snapshots.KindManifest, &m) == nil {
		return m.GetCheckpointId()
	}
	return 0
}

// forcedRestore reports whether this restore of checkpoint is the one
// FailRestoreOf asked to fail, and counts it.
func (in *Injector) forcedRestore(checkpoint uint64) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.failRestore == 0 || in.failRestore != checkpoint {
		return false
	}
	in.failRestore = 0
	in.counts[RestorePanic]++
	return true
}

// Disable stops all injection (for example for a final clean phase).
func (in *Injector) Disable() { in.disabled.Store(true) }

// site identifies a place where a failure may strike: the kind, the task or
// channel, and a record, batch or checkpoint number.
type site struct {
	kind Kind
	a, b string
	x, y int64
}

// roll reports whether a failure strikes at the n-th visit of site, with
// probability p, and counts it. The decision is a hash of the seed, the site
// and n, not a draw from a shared generator, so a seed strikes the same
// places whatever the goroutines' interleaving (only the per-kind budget, when
// it runs out, depends on the order). Task-ending kinds spend the budget.
func (in *Injector) roll(p float64, ends bool, st site) bool {
	if p <= 0 || in.disabled.Load() {
		return false
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	n := in.seen[st]
	in.seen[st] = n + 1
	h := topology.HashString(fmt.Sprintf("%d|%s|%s|%s|%d|%d|%d", in.seed, st.kind, st.a, st.b, st.x, st.y, n))
	if float64(h>>11)/(1<<53) >= p || (ends && in.spent[st.kind] >= in.budget) {
		return false
	}
	in.counts[st.kind]++
	if ends {
		in.spent[st.kind]++
	}
	return true
}

// Counts returns the failures injected so far, by kind.
func (in *Injector) Counts() map[Kind]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make(map[Kind]int, len(in.counts))
	for k, v := range in.counts {
		out[k] = v
	}
	return out
}

// Total is the number of failures injected, all kinds together.
func (in *Injector) Total() int {
	n := 0
	for _, v := range in.Counts() {
		n += v
	}
	return n
}

// TaskFailures is the number of failures in counts that fail a task.
func TaskFailures(c map[Kind]int) int {
	return c[OperatorPanic] + c[SnapshotPanic] + c[RestorePanic] + c[DropBatch] + c[DupBatch]
}

// FormatCounts renders counts as "kind=n ..." in a stable order.
func FormatCounts(c map[Kind]int) string {
	var parts []string
	for k, v := range c {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// Faults returns the runtime hooks of this injector.
func (in *Injector) Faults() *actorstest.Faults {
	return &actorstest.Faults{
		Batch: func(from, to string, seq uint64) actorstest.BatchFault {
			switch {
			case in.roll(in.rates.DropBatch, true, site{kind: DropBatch, a: from, b: to, x: int64(seq)}):
				return actorstest.Drop
			case in.roll(in.rates.DupBatch, true, site{kind: DupBatch, a: from, b: to, x: int64(seq)}):
				return actorstest.Duplicate
			}
			return actorstest.Deliver
		},
		Snapshot: func(task string, checkpoint uint64) {
			if in.roll(in.rates.SnapshotPanic, true, site{kind: SnapshotPanic, a: task, x: int64(checkpoint)}) {
				panic(fmt.Sprintf("chaos: %s panics while snapshotting checkpoint %d", task, checkpoint))
			}
		},
		Restore: func(task string, checkpoint uint64) {
			if in.forcedRestore(checkpoint) {
				panic(fmt.Sprintf("chaos: %s panics while restoring checkpoint %d (the phase's savepoint)", task, checkpoint))
			}
			if in.roll(in.rates.RestorePanic, true, site{kind: RestorePanic, a: task, x: int64(checkpoint)}) {
				panic(fmt.Sprintf("chaos: %s panics while restoring checkpoint %d", task, checkpoint))
			}
		},
		Process: func(task string) {
			if in.roll(in.rates.Straggler, false, site{kind: Straggler, a: task}) {
				// A straggler: the task stalls, which delays its barriers and
				// so the alignment of the tasks downstream of it.
				time.Sleep(in.rates.StragglerTime)
			}
		},
	}
}

// OperatorFault panics with probability OperatorPanic; checkers call it per
// record.
func (in *Injector) OperatorFault(task string, key, seq int64) {
	if in.roll(in.rates.OperatorPanic, true, site{kind: OperatorPanic, a: task, x: key, y: seq}) {
		panic(fmt.Sprintf("chaos: %s panics on key %d seq %d", task, key, seq))
	}
}

// Enable turns injection (back) on.
func (in *Injector) Enable() { in.disabled.Store(false) }
