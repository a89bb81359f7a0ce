package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/snapflow/snapflow/topology"
)

// genSource is the benchmark's replayable source: records 0..keys-1 have
// one key each, and after them record i has key i % keys, or, with an
// update fraction, a key of the hot window of its batch's second
// (benchwork.Generator.Fill); the offset is the number of records produced. With a rate it
// paces itself with a token bucket, idle (not spinning) while it waits.
type genSource struct {
	gen   benchwork.Generator
	next  uint64
	limit uint64 // 0: unbounded
	rate  float64

	baseOff uint64 // offset at Open

	mu     sync.Mutex
	wake   func()
	start  time.Time
	timer  *time.Timer
	closed bool
}

func (s *genSource) SetWake(w func()) { s.mu.Lock(); s.wake = w; s.mu.Unlock() }

func (s *genSource) Open(_ context.Context, off []byte) error {
	s.next = 0
	if off != nil {
		if len(off) != 8 {
			return fmt.Errorf("bench: offset of %d bytes", len(off))
		}
		s.next = binary.BigEndian.Uint64(off)
	}
	s.baseOff = s.next
	s.start = time.Now()
	return nil
}

func (s *genSource) Read(buf []benchwork.Record) (int, error) {
	n := uint64(len(buf))
	if s.limit > 0 {
		if s.next >= s.limit {
			return 0, io.EOF
		}
		n = min(n, s.limit-s.next)
	}
	if s.rate > 0 {
		// Records allowed by now since Open, counted from the offset.
		allowed := uint64(time.Since(s.start).Seconds()*s.rate) + uint64(len(buf))
		produced := s.next - s.baseOff
		if produced >= allowed {
			s.armWake(time.Duration(float64(len(buf)) / s.rate * float64(time.Second)))
			return 0, topology.ErrSourceIdle
		}
		n = min(n, allowed-produced)
	}
	ts := time.Now().UnixNano()
	if s.rate > 0 {
		// Open loop: a record's time is when the rate meant it to be sent,
		// so a stalled source (a stop-the-world checkpoint) shows up as
		// latency instead of hiding it (coordinated omission).
		ts = s.start.UnixNano() + int64(float64(s.next-s.baseOff)/s.rate*float64(time.Second))
	}
	s.gen.Fill(buf[:n], s.next, ts)
	s.next += n
	return int(n), nil
}

func (s *genSource) armWake(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil || s.closed || s.wake == nil {
		return
	}
	w := s.wake
	s.timer = time.AfterFunc(d, func() {
		s.mu.Lock()
		s.timer = nil
		s.mu.Unlock()
		w()
	})
}

func (s *genSource) Offset() []byte { return binary.BigEndian.AppendUint64(nil, s.next) }

func (s *genSource) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}
