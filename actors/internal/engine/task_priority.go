package engine

import (
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/messages"
)

// Barriers overtake the mailbox. A task's mailbox is first in, first out:
// a barrier posted behind the batches its input's credit allowed waits
// until the task has processed them all, however slow it is. In the modes
// where a checkpoint need not wait for the data (unaligned, and aligned
// with a timeout), a mailbox middleware counts the barriers and alignment
// timeouts posted to the task and not yet handled. While one is pending,
// the task processes no batch: the batches ahead of it only join the
// task's queue (t.ready) as they are received, which takes microseconds,
// until the barrier or the timeout is handled. Unaligned, the barrier then
// finds them unprocessed and records them as channel state; with a
// timeout, the clock starts when the barrier is posted, not when the task
// gets round to it, and the timeout itself overtakes the queue.
//
// A barrier thus waits for at most the batch being processed when it is
// posted, as Flink's priority events wait for the record being processed.
// The cost is one atomic load per batch processed in those modes, and
// none in the others, where the middleware is not installed.

// priorityMail counts what must not wait behind batches in one task's
// mailbox; it is the mailbox's statistics middleware.
type priorityMail struct {
	pending atomic.Int64
	// posted, when set, is called for each counted message, in the
	// poster's goroutine (Faults.Priority).
	posted func(m any)
}

// MessagePosted counts a barrier or an alignment timeout; it runs in the
// poster's goroutine, before the message is queued.
func (p *priorityMail) MessagePosted(m any) {
	if env, ok := m.(*actor.MessageEnvelope); ok {
		m = env.Message
	}
	if isPriority(m) {
		p.pending.Add(1)
		if p.posted != nil {
			p.posted(m)
		}
	}
}

func (p *priorityMail) MailboxStarted()       {}
func (p *priorityMail) MessageReceived(_ any) {}
func (p *priorityMail) MailboxEmpty()         {}

func isPriority(m any) bool {
	switch m.(type) {
	case *messages.Barrier, *alignTimeoutMsg, *outTimeoutMsg:
		return true
	}
	return false
}

// received uncounts m and reports true when it is a priority message. The
// task calls it for every message it handles, before anything else, so
// that the count returns to zero even for a message it drops (fenced, or
// before it runs), and drains its queue after it.
func (p *priorityMail) received(m any) bool {
	if p != nil && isPriority(m) {
		p.pending.Add(-1)
		return true
	}
	return false
}

// waiting reports whether a priority message waits in the mailbox.
func (p *priorityMail) waiting() bool { return p != nil && p.pending.Load() > 0 }

// taskProps are the props of task idx; stats are its mailbox's other
// middlewares. In the modes where barriers overtake the mailbox, it
// installs a priorityMail.
func taskProps(sh *shared, idx int, stats ...actor.MailboxMiddleware) *actor.Props {
	var prio *priorityMail
	if sh.cfg.unaligned || sh.cfg.alignTimeout > 0 {
		prio = &priorityMail{}
		if f := sh.cfg.faults; f != nil && f.Priority != nil {
			id, hook := sh.plan.Tasks[idx].ID, f.Priority
			prio.posted = func(m any) { hook(id, m) }
		}
		stats = append(stats, prio)
	}
	dispatch := newTaskDispatcher()
	produce := func() actor.Actor {
		t := newTask(sh, idx)
		t.prio, t.dispatch = prio, dispatch
		if prio != nil {
			t.pieces.Target = pieceTarget
		}
		return t
	}
	opts := []actor.PropsOption{actor.WithDispatcher(dispatch)}
	if len(stats) > 0 {
		opts = append(opts, actor.WithMailbox(actor.Unbounded(stats...)))
	}
	return actor.PropsFromProducer(produce, opts...)
}
