// Package testsrc holds replayable sources for snapflow's tests and
// benchmarks: a sequence that stops at a limit the test moves, and a paced
// sequence that emits at a bounded rate. Both go idle rather than spin, and
// wake their task when they have records again.
package testsrc

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/topology"
)

// Gate holds the limit that Gated sources stop at.
type Gate struct {
	mu      sync.Mutex
	limit   int64
	wake    []func()
	reached chan int64
}

// NewGate returns a gate at limit.
func NewGate(limit int64) *Gate { return &Gate{limit: limit, reached: make(chan int64, 256)} }

// SetLimit moves the limit and wakes the sources.
func (g *Gate) SetLimit(limit int64) {
	g.mu.Lock()
	g.limit = limit
	wake := append([]func(){}, g.wake...)
	g.mu.Unlock()
	for _, w := range wake {
		w()
	}
}

// WaitReached waits until a source has emitted every record up to limit.
func (g *Gate) WaitReached(t testing.TB, limit int64) {
	t.Helper()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	for {
		select {
		case l := <-g.reached:
			if l == limit {
				return
			}
		case <-timer.C:
			t.Fatalf("source never reached %d", limit)
		}
	}
}

// Gated emits 1..N, never beyond its gate's limit; its offset is the number
// of records emitted.
type Gated struct {
	N    int64
	Gate *Gate
	next int64
}

// SetWake implements topology.Waker.
func (s *Gated) SetWake(w func()) {
	s.Gate.mu.Lock()
	s.Gate.wake = append(s.Gate.wake, w)
	s.Gate.mu.Unlock()
}

// Open implements topology.Source.
func (s *Gated) Open(_ context.Context, off []byte) error {
	n, err := decode(off)
	s.next = n
	return err
}

// Read implements topology.Source.
func (s *Gated) Read(buf []int64) (int, error) {
	s.Gate.mu.Lock()
	limit := min(s.N, s.Gate.limit)
	s.Gate.mu.Unlock()
	k := 0
	for k < len(buf) && s.next < limit {
		s.next++
		buf[k] = s.next
		k++
	}
	if s.next >= s.N {
		return k, io.EOF
	}
	if s.next >= limit {
		select {
		case s.Gate.reached <- limit:
		default:
		}
		return k, topology.ErrSourceIdle
	}
	return k, nil
}

// Offset implements topology.Source.
func (s *Gated) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(s.next)) }

// Close implements topology.Source.
func (s *Gated) Close() error { return nil }

// Paced emits 1..N at most Per records per Tick: a slow, replayable source.
// When its budget is spent it is idle, and a timer refills it and wakes the
// task.
type Paced struct {
	n, per int64
	tick   time.Duration
	next   int64

	mu     sync.Mutex
	budget int64
	armed  bool
	wake   func()
	timer  *time.Timer
}

// NewPaced returns a paced source of 1..n.
func NewPaced(n, per int64, tick time.Duration) *Paced {
	return &Paced{n: n, per: per, tick: tick, budget: per}
}

// SetWake implements topology.Waker.
func (p *Paced) SetWake(w func()) { p.mu.Lock(); p.wake = w; p.mu.Unlock() }

// Open implements topology.Source.
func (p *Paced) Open(_ context.Context, off []byte) error {
	n, err := decode(off)
	p.next = n
	return err
}

// Read implements topology.Source.
func (p *Paced) Read(buf []int64) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := 0
	for k < len(buf) && p.budget > 0 && p.next < p.n {
		p.next++
		p.budget--
		buf[k] = p.next
		k++
	}
	if p.next >= p.n {
		return k, io.EOF
	}
	if p.budget == 0 {
		if !p.armed {
			p.armed = true
			p.timer = time.AfterFunc(p.tick, p.refill)
		}
		return k, topology.ErrSourceIdle
	}
	return k, nil
}

func (p *Paced) refill() {
	p.mu.Lock()
	p.budget, p.armed = p.per, false
	w := p.wake
	p.mu.Unlock()
	if w != nil {
		w()
	}
}

// Offset implements topology.Source.
func (p *Paced) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(p.next)) }

// Close implements topology.Source.
func (p *Paced) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.timer != nil {
		p.timer.Stop()
	}
	return nil
}

func decode(off []byte) (int64, error) {
	if off == nil {
		return 0, nil
	}
	if len(off) != 8 {
		return 0, fmt.Errorf("testsrc: offset of %d bytes, want 8", len(off))
	}
	return int64(binary.BigEndian.Uint64(off)), nil
}
