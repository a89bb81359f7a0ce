package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/snapflow/snapflow/topology"
)

// split is the position of one split of an order source, the source's own
// encoding (the runtime never looks inside): the indices next, next+step,
// next+2*step, ... below the source's count are still to be produced, and
// emitted counts the orders produced from the split so far. A split is a
// residue class of the indices, so two tasks never produce the same order.
type split struct {
	next, step, emitted int64
}

const splitSize = 24

func (s split) encode() []byte {
	b := make([]byte, 0, splitSize)
	b = binary.BigEndian.AppendUint64(b, uint64(s.next))
	b = binary.BigEndian.AppendUint64(b, uint64(s.step))
	return binary.BigEndian.AppendUint64(b, uint64(s.emitted))
}

func decodeSplit(b []byte) (split, error) {
	if len(b) != splitSize {
		return split{}, fmt.Errorf("rescale: order split of %d bytes, want %d", len(b), splitSize)
	}
	s := split{
		next:    int64(binary.BigEndian.Uint64(b)),
		step:    int64(binary.BigEndian.Uint64(b[8:])),
		emitted: int64(binary.BigEndian.Uint64(b[16:])),
	}
	if s.next < 0 || s.step < 1 || s.emitted < 0 {
		return split{}, fmt.Errorf("rescale: order split next=%d step=%d emitted=%d is invalid", s.next, s.step, s.emitted)
	}
	return s, nil
}

// orderSplits describes the splits of a source of count orders. A job that
// starts without state has one split per task, the indices i with
// i % parallelism == task. When a job is restored at a higher parallelism
// than it has splits, the runtime asks Divide to halve one: the indices
// next, next+2*step, ... and next+step, next+3*step, ... The produced count
// stays with the first half, so the counts of all splits still add up to
// the orders produced.
func orderSplits(count int64) topology.Splits {
	return topology.Splits{
		Initial: func(parallelism int) [][]byte {
			out := make([][]byte, parallelism)
			for i := range out {
				out[i] = split{next: int64(i), step: int64(parallelism)}.encode()
			}
			return out
		},
		Divide: func(b []byte) ([]byte, []byte, bool) {
			s, err := decodeSplit(b)
			if err != nil || s.next+s.step >= count {
				return nil, nil, false // fewer than two orders left
			}
			first := split{next: s.next, step: 2 * s.step, emitted: s.emitted}
			second := split{next: s.next + s.step, step: 2 * s.step}
			return first.encode(), second.encode(), true
		},
	}
}

// orderSource is one task of an order source: it produces gen(i) for the
// indices of its splits, below the source's count and below the gate's
// limit. At the limit it is idle (it tells the gate, and the gate wakes it
// when the limit rises); once its splits are exhausted it ends.
type orderSource struct {
	task   string // name#subtask, the key of its reports to the gate
	count  int64
	gen    func(i int64) order
	gate   *gate
	splits []split
	cur    int // the split the next Read starts with
}

// SetWake implements topology.Waker.
func (s *orderSource) SetWake(wake func()) { s.gate.setWake(s.task, wake) }

// Open implements topology.SplitSource.
func (s *orderSource) Open(_ context.Context, splits [][]byte) error {
	s.splits, s.cur = make([]split, len(splits)), 0
	start := int64(math.MaxInt64)
	for i, b := range splits {
		sp, err := decodeSplit(b)
		if err != nil {
			return fmt.Errorf("rescale: task %s: %w", s.task, err)
		}
		s.splits[i] = sp
		if sp.next < s.count {
			start = min(start, sp.next)
		}
	}
	s.gate.opened(s.task, start, s.emitted())
	return nil
}

// Read implements topology.SplitSource: it fills buf from its splits in
// turn, each up to the limit.
func (s *orderSource) Read(buf []order) (int, error) {
	limit := s.gate.limit.Load()
	end := min(s.count, limit)
	n := 0
	for range s.splits {
		sp := &s.splits[s.cur]
		for n < len(buf) && sp.next < end {
			buf[n] = s.gen(sp.next)
			sp.next += sp.step
			sp.emitted++
			n++
		}
		if n == len(buf) {
			return n, nil
		}
		s.cur = (s.cur + 1) % len(s.splits)
	}
	if n > 0 {
		return n, nil
	}
	for _, sp := range s.splits {
		if sp.next < s.count {
			s.gate.idle(s.task, limit, s.emitted())
			return 0, topology.ErrSourceIdle
		}
	}
	s.gate.ended(s.task, s.emitted())
	return 0, io.EOF
}

func (s *orderSource) emitted() int64 {
	var n int64
	for _, sp := range s.splits {
		n += sp.emitted
	}
	return n
}

// Splits implements topology.SplitSource.
func (s *orderSource) Splits() [][]byte {
	out := make([][]byte, len(s.splits))
	for i, sp := range s.splits {
		out[i] = sp.encode()
	}
	return out
}

// Close implements topology.SplitSource.
func (s *orderSource) Close() error { return nil }
