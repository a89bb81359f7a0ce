package actors

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// shared is what the job actor and its task actors of one job share. Fields
// are written before the tasks that read them are spawned or run, except inc,
// which the job actor publishes before restarting the tasks.
type shared struct {
	job    string
	plan   *topology.Plan
	cfg    *config
	log    *slog.Logger
	system *actor.ActorSystem
	jobPID *actor.PID
	pids   []*actor.PID // task actors by plan index; set before any runMsg
	cps    *snapshots.Checkpoints

	inc   atomic.Pointer[incarnation]
	stale atomic.Uint64 // messages of older epochs dropped
	// retaining is set while a retention pass runs.
	retaining atomic.Bool

	// uploads tracks the goroutines that write state and manifests, so Stop
	// leaves none behind; uploadCtx is cancelled when the job stops.
	uploads      sync.WaitGroup
	uploadCtx    context.Context
	cancelUpload context.CancelFunc
}

// incarnation is what tasks start with: the epoch and the checkpoint to load.
type incarnation struct {
	epoch   uint64
	restore *snapshots.Restorable // nil: start empty
}

// goUpload runs f in a tracked goroutine.
func (sh *shared) goUpload(f func(ctx context.Context)) {
	sh.uploads.Add(1)
	go func() {
		defer sh.uploads.Done()
		f(sh.uploadCtx)
	}()
}
