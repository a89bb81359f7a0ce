package engine

import (
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// dispatchThroughput is how many messages a task handles before it lets
// other goroutines run: protoactor's default.
const dispatchThroughput = 300

// taskDispatcher runs one task's mailbox on a goroutine of its own, from
// its first message until the actor has stopped. protoactor's default
// dispatcher starts a goroutine each time a mailbox becomes non-empty; a
// task's call chain (mailbox, task, operator, collector, the next
// mailbox) then grows each new goroutine's stack, which cost the parity
// job about a tenth of its records on one core. A goroutine that lives
// keeps its stack.
//
// The mailbox schedules once per run, and only when it is idle, so at most
// one function waits in wake and Schedule never blocks. A message that
// reaches a task after it stopped is not run, as with any stopped actor.
type taskDispatcher struct {
	start   sync.Once
	wake    chan func()
	stopped atomic.Bool
}

var _ actor.Dispatcher = (*taskDispatcher)(nil)

func newTaskDispatcher() *taskDispatcher { return &taskDispatcher{wake: make(chan func(), 1)} }

func (d *taskDispatcher) Schedule(run func()) {
	d.start.Do(func() { go d.loop() })
	d.wake <- run
}

func (d *taskDispatcher) Throughput() int { return dispatchThroughput }

func (d *taskDispatcher) loop() {
	for run := range d.wake {
		run()
		if d.stopped.Load() {
			return
		}
	}
}

// stop ends the goroutine once the mailbox run that handles the actor's
// Stopped message returns.
func (d *taskDispatcher) stop() { d.stopped.Store(true) }
