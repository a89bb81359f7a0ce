package baseline

import (
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// timer sends msg to an actor after a delay, from the timer's goroutine. Once
// closed it sends nothing more: closing takes the same lock as sending, so an
// actor that closes its timers while stopping gets no message after it has
// stopped (no dead letters).
type timer struct {
	root *actor.RootContext
	pid  *actor.PID
	msg  any

	mu     sync.Mutex
	t      *time.Timer
	closed bool
}

func newTimer(ctx actor.Context, msg any) *timer {
	return &timer{root: ctx.ActorSystem().Root, pid: ctx.Self(), msg: msg}
}

// arm sends the message after d (again, if it was already sent).
func (t *timer) arm(d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch {
	case t.closed:
	case t.t == nil:
		t.t = time.AfterFunc(d, t.fire)
	default:
		t.t.Reset(d)
	}
}

func (t *timer) fire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.root.Send(t.pid, t.msg)
	}
}

// close stops the timer for good.
func (t *timer) close() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.t != nil {
		t.t.Stop()
	}
}
