package engine

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// shared is what the job actor and its task actors of one job share. Fields
// are written before the tasks that read them are spawned or run, except inc,
// which the job actor publishes before restarting the tasks.
type shared struct {
	// diskRestores gathers what the tasks' restores did with the files of
	// their on-disk state.
	diskRestores diskRestoreStats

	job    string
	plan   *dataflow.Plan
	cfg    *config
	log    *slog.Logger
	system *actor.ActorSystem
	jobPID *actor.PID
	pids   []*actor.PID // task actors by plan index; set before any RunTasks
	cps    *snapshots.Checkpoints
	// declared are the states each keyed operator declares, checked against
	// every checkpoint restored.
	declared map[string][]*messages.StateDescriptor
	// operators describe the plan's operators in every manifest.
	operators []*messages.OperatorEntry
	// origin is where the job was started from by name (nil: nowhere):
	// recovery restores it until the job completes a checkpoint of its own.
	origin *messages.Origin

	inc   atomic.Pointer[incarnation]
	stale atomic.Uint64 // messages of older epochs dropped
	// counters are the tasks' counters by plan index, shared by every
	// incarnation (see Job.TaskMetrics). A coordinator's hold what the
	// workers report; a worker's are its own since it registered.
	counters []taskCounters
	// retaining is set while a retention pass runs.
	retaining atomic.Bool

	// uploads tracks the goroutines that write state and manifests, so Stop
	// leaves none behind; uploadCtx is cancelled when the job stops.
	uploads      *sync.WaitGroup
	uploadCtx    context.Context
	cancelUpload context.CancelFunc
	// runCtx is the parent of every incarnation's context, which the job
	// actor cancels when the incarnation ends (a failover, or a stop or
	// failure of the job): a source blocked in Read on the context given to
	// Open returns then. Stop does not cancel it from outside, so that an
	// upload cancelled by a stop is never counted as a failure of the job.
	runCtx  context.Context
	stopRun context.CancelFunc

	// In cluster mode: the node's remote endpoint, and the id of the
	// coordinator incarnation, which holds the job's lease in the store.
	node        *node
	coordinator string
	// worker is the id of the worker running the tasks; "" in the
	// coordinator and in one process.
	worker string
	// reads are the source tasks' read watches, by plan index (nil in a
	// worker), which say what a stop that does not end waits for.
	reads []atomic.Pointer[readWatch]
	// arrivals are, by plan index, what the mailboxes of a worker's tasks
	// saw arrive from other nodes (nil in one process; see link.go).
	arrivals []*arrivals

	// lastEpoch is the last epoch of the job's lease: the job never runs
	// past it. stopRenewals ends the lease's renewals (see goRenew).
	lastEpoch    uint64
	stopRenewals func()
}

// goRenew runs f, the lease's renewals, until stopRenew.
func (sh *shared) goRenew(f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	sh.stopRenewals = func() {
		cancel()
		<-done
	}
	go func() {
		defer close(done)
		f(ctx)
	}()
}

// stopRenew stops the lease's renewals and waits for them to end.
func (sh *shared) stopRenew() {
	if sh.stopRenewals != nil {
		sh.stopRenewals()
	}
}

// incarnation is what tasks start with: the epoch and the checkpoint to load.
// ctx is cancelled when the incarnation ends (a failover, a stop or a
// failure of the job), which abandons its uploads and interrupts its
// sources.
type incarnation struct {
	epoch   uint64
	restore *snapshots.Restorable // nil: start empty
	// assign says where each task's state comes from in restore; nil: each
	// task restores the state stored under its own id (a worker's tasks,
	// whose states the worker has built).
	assign *dataflow.Restore
	// disk holds, for a worker's tasks, the database checkpoints each
	// restores its on-disk state from, by task id (nil: see diskSources).
	disk   map[string][]*messages.DiskCheckpoint
	ctx    context.Context
	cancel context.CancelFunc
}

// newIncarnation returns the incarnation of epoch, restoring rp as assign
// says.
func (sh *shared) newIncarnation(epoch uint64, rp *snapshots.Restorable, assign *dataflow.Restore) *incarnation {
	ctx, cancel := context.WithCancel(sh.runCtx)
	return &incarnation{epoch: epoch, restore: rp, assign: assign, ctx: ctx, cancel: cancel}
}

// timeout is the checkpoint timeout in force (the coordinator's default when
// none is configured): it bounds uploads, manifests and restore loading.
func (sh *shared) timeout() time.Duration {
	if t := sh.cfg.checkpoint.Timeout; t > 0 {
		return t
	}
	return coordinator.DefaultTimeout
}

// goUploadCtx runs f in a tracked goroutine with ctx bounded by the
// checkpoint timeout.
func (sh *shared) goUploadCtx(parent context.Context, f func(ctx context.Context)) {
	sh.goWithin(parent, sh.timeout(), f)
}

// goWithin runs f in a tracked goroutine with ctx bounded by d.
func (sh *shared) goWithin(parent context.Context, d time.Duration, f func(ctx context.Context)) {
	sh.uploads.Add(1)
	go func() {
		defer sh.uploads.Done()
		ctx, cancel := context.WithTimeout(parent, d)
		defer cancel()
		f(ctx)
	}()
}

// restoreState returns the state task idx of plan restores, or nil when it
// starts empty.
func (inc *incarnation) restoreState(plan *dataflow.Plan, idx int) *messages.TaskState {
	switch {
	case inc.restore == nil:
		return nil
	case inc.assign != nil:
		return inc.assign.State(plan, idx, inc.restore.States)
	}
	return inc.restore.States[plan.Tasks[idx].ID]
}

// restoreInFlight returns the channel state task idx replays, whose
// restored state is st: the checkpoint's items placed in its channels
// when they were remapped to a changed topology or parallelism, and
// otherwise those it stored.
func (inc *incarnation) restoreInFlight(idx int, st *messages.TaskState) []*messages.InFlight {
	if inc.restore != nil && inc.assign != nil {
		return inc.assign.InFlight(idx, st)
	}
	return st.GetInFlight()
}

// arrivalsOf returns what task idx's mailbox records, nil when nothing.
func (sh *shared) arrivalsOf(idx int) *arrivals {
	if idx < len(sh.arrivals) {
		return sh.arrivals[idx]
	}
	return nil
}

// stuck says which tasks keep the job from stopping: the sources blocked in
// Read, for how long.
func (sh *shared) stuck() string {
	var blocked []string
	for i := range sh.reads {
		if w := sh.reads[i].Load(); w != nil {
			if d := w.blocked(); d > 0 {
				blocked = append(blocked, fmt.Sprintf("%s (blocked for %v)", sh.plan.Tasks[i].ID, d.Round(time.Millisecond)))
			}
		}
	}
	if len(blocked) == 0 {
		return "a task has not stopped: an operator, sink or source call has not returned"
	}
	return "the source Read of task " + strings.Join(blocked, ", task ") + " has not returned and ignores the context given to Open"
}
