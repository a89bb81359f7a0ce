package chaos

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/snapflow/snapflow/topology"
)

// paced emits gen(start), gen(start+step), ... below count at a bounded
// rate. Its offset is the number of records it produced; when its budget is
// spent it is idle, and a timer wakes its task.
type paced struct {
	gen         func(int64) Event
	count       int64
	start, step int64
	rate        float64

	emitted int64
	base    int64 // emitted at Open: a restored source does not burst
	opened  time.Time

	mu    sync.Mutex
	wake  func()
	timer *time.Timer
	done  bool
}

func (p *paced) SetWake(w func()) { p.mu.Lock(); p.wake = w; p.mu.Unlock() }

func (p *paced) Open(_ context.Context, off []byte) error {
	p.emitted = 0
	if off != nil {
		if len(off) != 8 {
			return fmt.Errorf("chaos: offset of %d bytes", len(off))
		}
		p.emitted = int64(binary.BigEndian.Uint64(off))
	}
	p.base, p.opened = p.emitted, time.Now()
	return nil
}

func (p *paced) Read(buf []Event) (int, error) {
	allowed := p.base + int64(time.Since(p.opened).Seconds()*p.rate) + 1
	n := 0
	for n < len(buf) && p.emitted < allowed {
		i := p.start + p.emitted*p.step
		if i >= p.count {
			return n, io.EOF
		}
		buf[n] = p.gen(i)
		n++
		p.emitted++
	}
	if p.start+p.emitted*p.step >= p.count {
		return n, io.EOF
	}
	if p.emitted >= allowed {
		p.armWake()
		return n, topology.ErrSourceIdle
	}
	return n, nil
}

func (p *paced) armWake() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil || p.done || p.wake == nil {
		return
	}
	w := p.wake
	p.timer = time.AfterFunc(time.Millisecond, func() {
		p.mu.Lock()
		p.timer = nil
		p.mu.Unlock()
		w()
	})
}

func (p *paced) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(p.emitted)) }

func (p *paced) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
	if p.timer != nil {
		p.timer.Stop()
	}
	return nil
}
