package engine

import (
	"log/slog"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"go.uber.org/goleak"

	"github.com/snapflow/snapflow/internal/leaktest"
)

// orderActor records the messages it handles, and on Stopped ends its
// dispatcher as a task does.
type orderActor struct {
	d    *taskDispatcher
	got  []int
	done chan []int
}

func (a *orderActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case int:
		a.got = append(a.got, m)
		if m < 0 {
			a.done <- a.got
		}
	case *actor.Stopped:
		a.d.stop()
	}
}

// TestTaskDispatcher: an actor on a taskDispatcher handles every message
// in order (its mailbox runs whenever its queue empties and fills again),
// and its goroutine ends once the actor stops: the leak check fails
// without the stop on Stopped.
func TestTaskDispatcher(t *testing.T) {
	opts := goleak.IgnoreCurrent()
	system := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger { return slog.New(slog.DiscardHandler) }))
	d := newTaskDispatcher()
	a := &orderActor{d: d, done: make(chan []int, 1)}
	pid := system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return a }, actor.WithDispatcher(d)))
	const n = 5000
	for i := range n {
		system.Root.Send(pid, i)
	}
	system.Root.Send(pid, -1)
	got := <-a.done
	if len(got) != n+1 {
		t.Fatalf("handled %d messages, want %d", len(got), n+1)
	}
	for i := range n {
		if got[i] != i {
			t.Fatalf("message %d is %d: out of order", i, got[i])
		}
	}
	if err := system.Root.StopFuture(pid).Wait(); err != nil {
		t.Fatal(err)
	}
	system.Shutdown()
	leaktest.Check(t, opts)
}
