// Package testsrc holds replayable sources for snapflow's tests and
// soaks: a sequence that stops at a limit the test moves, and a rated source
// that emits at a bounded rate. Both go idle rather than spin, and
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

// Rated emits gen(start), gen(start+step), ... below count at most rate
// records/s since it was opened (a restored source does not burst to catch
// up). Its offset is the number of records it produced. When it is ahead of
// its rate it is idle, and a timer wakes its task a millisecond later.
type Rated[T any] struct {
	gen         func(i int64) T
	count       int64
	start, step int64
	rate        float64

	emitted int64
	base    int64
	opened  time.Time

	mu    sync.Mutex
	wake  func()
	timer *time.Timer
	done  bool
}

// NewRated returns a rated source of gen(i) for i = start, start+step, ...
// below count.
func NewRated[T any](gen func(i int64) T, count, start, step int64, rate float64) *Rated[T] {
	return &Rated[T]{gen: gen, count: count, start: start, step: max(step, 1), rate: rate}
}

// NewPaced returns a rated source of 1..n at perTick records per tick.
func NewPaced(n, perTick int64, tick time.Duration) *Rated[int64] {
	return NewRated(func(i int64) int64 { return i + 1 }, n, 0, 1, float64(perTick)/tick.Seconds())
}

// SetWake implements topology.Waker.
func (p *Rated[T]) SetWake(w func()) { p.mu.Lock(); p.wake = w; p.mu.Unlock() }

// Open implements topology.Source.
func (p *Rated[T]) Open(_ context.Context, off []byte) error {
	n, err := decode(off)
	p.emitted, p.base, p.opened = n, n, time.Now()
	return err
}

// Read implements topology.Source.
func (p *Rated[T]) Read(buf []T) (int, error) {
	allowed := p.base + int64(time.Since(p.opened).Seconds()*p.rate) + 1
	n := 0
	for n < len(buf) && p.emitted < allowed && p.start+p.emitted*p.step < p.count {
		buf[n] = p.gen(p.start + p.emitted*p.step)
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

func (p *Rated[T]) armWake() {
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

// Offset implements topology.Source.
func (p *Rated[T]) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(p.emitted)) }

// Close implements topology.Source.
func (p *Rated[T]) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done = true
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

// GatedSplits adds a split source of gen(0), gen(1), ... gen(count-1) that
// never produces an index at or beyond its gate's limit. Like
// topology.Generate, its position is one split per residue class of the
// index (task s of p reads the indices i with i % p == s), dealt out again
// and divided when a job is restored at another parallelism.
func GatedSplits[T any](g *topology.Graph, name string, count int64, gen func(int64) T, gate *Gate, opts ...topology.Option) topology.Stream[T] {
	return topology.FromSplits(g, name, topology.Splits{
		Initial: func(p int) [][]byte {
			out := make([][]byte, p)
			for s := range out {
				out[s] = encodeSplit(int64(s), int64(p))
			}
			return out
		},
		Divide: func(b []byte) ([]byte, []byte, bool) {
			next, step, err := decodeSplit(b)
			if err != nil || next+step >= count {
				return nil, nil, false
			}
			return encodeSplit(next, 2*step), encodeSplit(next+step, 2*step), true
		},
	}, func(int, int) topology.SplitSource[T] { return &gatedSplits[T]{gen: gen, count: count, gate: gate} }, opts...)
}

type gatedSplits[T any] struct {
	gen    func(int64) T
	count  int64
	gate   *Gate
	splits [][2]int64 // next, step
	cur    int
}

func encodeSplit(next, step int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(next)), uint64(step))
}

func decodeSplit(b []byte) (next, step int64, err error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("testsrc: split of %d bytes, want 16", len(b))
	}
	next, step = int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))
	if next < 0 || step < 1 {
		return 0, 0, fmt.Errorf("testsrc: split next=%d step=%d is invalid", next, step)
	}
	return next, step, nil
}

// SetWake implements topology.Waker.
func (s *gatedSplits[T]) SetWake(w func()) {
	s.gate.mu.Lock()
	s.gate.wake = append(s.gate.wake, w)
	s.gate.mu.Unlock()
}

// Open implements topology.SplitSource.
func (s *gatedSplits[T]) Open(_ context.Context, splits [][]byte) error {
	s.splits, s.cur = make([][2]int64, len(splits)), 0
	for i, b := range splits {
		next, step, err := decodeSplit(b)
		if err != nil {
			return err
		}
		s.splits[i] = [2]int64{next, step}
	}
	return nil
}

// Read implements topology.SplitSource: it fills buf from the splits in
// turn, below the gate's limit.
func (s *gatedSplits[T]) Read(buf []T) (int, error) {
	s.gate.mu.Lock()
	limit := min(s.count, s.gate.limit)
	s.gate.mu.Unlock()
	n, done := 0, 0
	for range s.splits {
		sp := &s.splits[s.cur]
		for n < len(buf) && sp[0] < limit {
			buf[n] = s.gen(sp[0])
			n++
			sp[0] += sp[1]
		}
		if sp[0] >= s.count {
			done++
		}
		if n == len(buf) {
			return n, nil
		}
		s.cur = (s.cur + 1) % len(s.splits)
	}
	if done == len(s.splits) {
		return n, io.EOF
	}
	select {
	case s.gate.reached <- limit:
	default:
	}
	return n, topology.ErrSourceIdle
}

// Splits implements topology.SplitSource.
func (s *gatedSplits[T]) Splits() [][]byte {
	out := make([][]byte, len(s.splits))
	for i, sp := range s.splits {
		out[i] = encodeSplit(sp[0], sp[1])
	}
	return out
}

// Close implements topology.SplitSource.
func (s *gatedSplits[T]) Close() error { return nil }
