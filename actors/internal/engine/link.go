package engine

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/actors/linkwatch"
	"github.com/snapflow/snapflow/messages"
)

// arrivals is what has arrived in a task's mailbox on each of its inputs,
// before the task handles it: a mailbox middleware records it as messages
// are posted, so that the reports of package linkwatch say what the
// network delivered even while the task is busy.
type arrivals struct {
	epoch uint64
	ins   []arrival // by input index
}

type arrival struct {
	seq, barrier, watermark atomic.Uint64
	ended                   atomic.Bool
	// granted is the input's cumulative credit, which the task sets.
	granted atomic.Uint64
}

func newArrivals(epoch uint64, inputs int) *arrivals {
	return &arrivals{epoch: epoch, ins: make([]arrival, inputs)}
}

func storeMax(a *atomic.Uint64, v uint64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// MessagePosted records a batch, barrier, watermark or end of input of the arrivals'
// epoch; it runs in the poster's goroutine (the node's endpoint reader).
func (a *arrivals) MessagePosted(m any) {
	if env, ok := m.(*actor.MessageEnvelope); ok {
		m = env.Message
	}
	switch m := m.(type) {
	case *messages.RecordBatch:
		if in := a.input(m.Epoch, m.Channel); in != nil {
			storeMax(&in.seq, m.Seq)
		}
	case *messages.Barrier:
		if in := a.input(m.Epoch, m.Channel); in != nil {
			storeMax(&in.barrier, m.CheckpointId)
		}
	case *messages.EndOfInput:
		if in := a.input(m.Epoch, m.Channel); in != nil {
			in.ended.Store(true)
		}
	case *messages.Watermark:
		if in := a.input(m.Epoch, m.Channel); in != nil {
			storeMax(&in.watermark, m.Seq)
		}
	}
}

func (a *arrivals) input(epoch uint64, ch uint32) *arrival {
	if epoch != a.epoch || int(ch) >= len(a.ins) {
		return nil
	}
	return &a.ins[ch]
}

func (a *arrivals) MailboxStarted()       {}
func (a *arrivals) MessageReceived(_ any) {}
func (a *arrivals) MailboxEmpty()         {}

// linkTick is the sender's tick: it judges its links to other nodes.
type linkTick struct {
	epoch uint64
	due   time.Time
}

// watchLinks starts the link watch of a task whose channels cross nodes:
// the reports of its remote inputs, sent from a goroutine of their own
// every interval until the incarnation ends, and the ticks that judge its
// remote outputs. It does nothing in one process, or when the job has no
// link timeout.
func (t *task) watchLinks() {
	interval, timeout := t.sh.cfg.linkInterval, t.sh.cfg.linkTimeout
	if interval <= 0 || timeout <= 0 {
		return
	}
	type report struct {
		pid *actor.PID
		out uint32
		a   *arrival
	}
	var reports []report
	for i := range t.ins {
		if in := &t.ins[i]; in.arrival != nil {
			reports = append(reports, report{in.pid, in.output, in.arrival})
		}
	}
	if len(reports) > 0 {
		root, epoch, done := t.root, t.epoch, t.ctx.Done()
		stop := make(chan struct{})
		t.stopReports = func() { close(stop) }
		go func() {
			tk := time.NewTicker(interval)
			defer tk.Stop()
			for {
				select {
				case <-done:
					return
				case <-stop:
					return
				case <-tk.C:
				}
				for _, r := range reports {
					root.Send(r.pid, &messages.Credit{Epoch: epoch, Channel: r.out, Granted: r.a.granted.Load(), Report: true,
						ArrivedSeq: r.a.seq.Load(), ArrivedBarrier: r.a.barrier.Load(), ArrivedEnd: r.a.ended.Load(),
						ArrivedWatermark: r.a.watermark.Load()})
				}
			}
		}()
	}
	for i := range t.outs {
		if o := &t.outs[i]; o.remote {
			o.watch = linkwatch.NewSender(timeout)
			t.watching = true
		}
	}
	t.armLinkTick()
}

func (t *task) armLinkTick() {
	if !t.watching {
		return
	}
	interval := t.sh.cfg.linkInterval
	root, self, m := t.root, t.self, &linkTick{epoch: t.epoch, due: time.Now().Add(interval)}
	t.linkTimer = time.AfterFunc(interval, func() { root.Send(self, m) })
}

// onLinkTick judges the task's links to other nodes, and fails the task
// when one is lost: the job fails over, as for a lost node.
func (t *task) onLinkTick(m *linkTick) {
	if m.epoch != t.epoch || !t.watching || t.inst == nil {
		return
	}
	now := time.Now()
	late := now.Sub(m.due) > t.sh.cfg.linkTimeout/2
	for i := range t.outs {
		o := &t.outs[i]
		if o.watch == nil {
			continue
		}
		if late { // the task was busy, or the machine: judge nothing on it
			o.watch.Restart(now)
			continue
		}
		if err := o.watch.Check(now, len(o.queue) > 0); err != nil {
			t.failAs(CauseLinkLost, fmt.Errorf("lost the link to %s at %s: %w", o.to, o.pid.Address, err))
		}
	}
	t.armLinkTick()
}

// stopLinks ends the link watch of the incarnation.
func (t *task) stopLinks() {
	if t.linkTimer != nil {
		t.linkTimer.Stop()
	}
	if t.stopReports != nil {
		t.stopReports()
		t.stopReports = nil
	}
}
