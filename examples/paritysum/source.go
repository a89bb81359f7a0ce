package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/snapflow/snapflow/topology"
)

// gate pauses the source once it has emitted `at`, until open is called.
type gate struct {
	at      int64
	reached chan struct{}
	once    sync.Once
	mu      sync.Mutex
	opened  bool
	wake    func()
}

func newGate(at int64) *gate { return &gate{at: at, reached: make(chan struct{})} }

func (g *gate) isOpen() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.opened
}

func (g *gate) open() {
	g.mu.Lock()
	g.opened = true
	wake := g.wake
	g.mu.Unlock()
	if wake != nil {
		wake()
	}
}

// gatedSequence emits 1..n (without end when n is 0), pausing after gate.at
// until the gate opens. It is a replayable source: its offset is the last
// value emitted.
type gatedSequence struct {
	n, next int64 // next value is next+1
	gate    *gate
}

func (s *gatedSequence) SetWake(wake func()) {
	s.gate.mu.Lock()
	s.gate.wake = wake
	s.gate.mu.Unlock()
}

func (s *gatedSequence) Open(_ context.Context, offset []byte) error {
	s.next = 0
	if offset != nil {
		if len(offset) != 8 {
			return fmt.Errorf("offset of %d bytes", len(offset))
		}
		s.next = int64(binary.BigEndian.Uint64(offset))
	}
	return nil
}

func (s *gatedSequence) Read(buf []int64) (int, error) {
	limit := s.n
	if limit == 0 {
		limit = math.MaxInt64
	}
	if !s.gate.isOpen() {
		limit = min(limit, s.gate.at)
	}
	k := 0
	for k < len(buf) && s.next < limit {
		s.next++
		buf[k] = s.next
		k++
	}
	switch {
	case s.n > 0 && s.next >= s.n:
		return k, io.EOF
	case s.next >= limit:
		s.gate.once.Do(func() { close(s.gate.reached) })
		return k, topology.ErrSourceIdle
	}
	return k, nil
}

func (s *gatedSequence) Offset() []byte { return binary.BigEndian.AppendUint64(nil, uint64(s.next)) }

func (s *gatedSequence) Close() error { return nil }
