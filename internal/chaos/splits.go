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

// Gate bounds what the KeyedSplits sources of one phase of a run produce:
// each key up to a fraction of its records. A source whose splits have all
// reached the gate goes idle (without a timer: the gate of a phase never
// moves), and Reached is closed once every key of every source registered
// with the gate has been produced up to it, so that the runner can end the
// phase there, part way through the records, without sleeping.
type Gate struct {
	num, den int64

	mu      sync.Mutex
	pending map[int64]bool // keys not yet produced up to the gate
	reached chan struct{}
	closed  bool
}

// NewGate returns a gate at num/den of each key's records (0 < num <= den).
func NewGate(num, den int64) *Gate {
	return &Gate{num: num, den: max(den, 1), pending: map[int64]bool{}, reached: make(chan struct{})}
}

// Reached is closed once every registered key has been produced up to the
// gate (at least once: a recovery may roll a source back below it again).
func (g *Gate) Reached() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 && !g.closed {
		g.closed = true
		close(g.reached)
	}
	return g.reached
}

// limit returns the last seq that a key of perKey records may have in this
// phase; a nil gate lets every record through.
func (g *Gate) limit(perKey int64) int64 {
	if g == nil {
		return perKey
	}
	return perKey * g.num / g.den
}

// register adds keys [keyBase, keyBase+keys) of perKey records each.
func (g *Gate) register(keyBase, keys, perKey int64) {
	if g == nil || g.limit(perKey) == 0 {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for k := keyBase; k < keyBase+keys; k++ {
		g.pending[k] = true
	}
}

// reach records that key has been produced up to the gate.
func (g *Gate) reach(key int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.pending[key] {
		return
	}
	delete(g.pending, key)
	if len(g.pending) == 0 && !g.closed {
		g.closed = true
		close(g.reached)
	}
}

// KeyedSplits adds a split source of Events for keys [keyBase,
// keyBase+keys), perKey records each (seqs 1..perKey): one split per key,
// whose state is the key's next seq, like a Kafka partition and its offset.
// A key's records therefore come from one task, in seq order, at any
// parallelism, and a job restored at another parallelism deals the splits
// out again. A task reads its splits round robin, one record of each in
// turn. With rate > 0 a task emits at most rate records/s, going idle in
// between (a timer wakes it a millisecond later); with a gate it produces
// each key only up to the gate and then goes idle.
func KeyedSplits(g *topology.Graph, name string, keyBase, keys, perKey int64, rate float64, gate *Gate, opts ...topology.Option) topology.Stream[Event] {
	return keyedSplitsOf(g, name, keyBase, keys, perKey, rate, gate, 0, nil, opts)
}

// keyedSplitsOf is KeyedSplits; with run > 0 the source is a
// topology.SplitReader that reads up to run records of one split at a
// time (so each split keeps its own watermark), and ended, when not nil,
// learns the keys whose splits a task has produced to their end.
func keyedSplitsOf(g *topology.Graph, name string, keyBase, keys, perKey int64, rate float64, gate *Gate, run int, ended *endWatch, opts []topology.Option) topology.Stream[Event] {
	gate.register(keyBase, keys, perKey)
	return topology.FromSplits(g, name, topology.Splits{
		Initial: func(int) [][]byte {
			out := make([][]byte, keys)
			for i := range out {
				out[i] = encodeKeySplit(keyBase+int64(i), 1)
			}
			return out
		},
	}, func(int, int) topology.SplitSource[Event] {
		s := &keyedSplits{perKey: perKey, limit: gate.limit(perKey), rate: rate, gate: gate, ended: ended}
		if run > 0 {
			return &splitRuns{keyedSplits: s, run: run}
		}
		return s
	}, opts...)
}

// keySplit is the state of one split: its key and the next seq to emit.
type keySplit struct{ key, next int64 }

func encodeKeySplit(key, next int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(make([]byte, 0, 16), uint64(key)), uint64(next))
}

// DecodeKeySplit decodes the state of a KeyedSplits split: its key and the
// next seq it emits.
func DecodeKeySplit(b []byte) (key, next int64, err error) {
	if len(b) != 16 {
		return 0, 0, fmt.Errorf("chaos: key split of %d bytes, want 16", len(b))
	}
	key, next = int64(binary.BigEndian.Uint64(b)), int64(binary.BigEndian.Uint64(b[8:]))
	if next < 1 {
		return 0, 0, fmt.Errorf("chaos: key split of key %d at seq %d: seqs start at 1", key, next)
	}
	return key, next, nil
}

// keyedSplits is one task's source of KeyedSplits.
type keyedSplits struct {
	perKey, limit int64
	rate          float64
	gate          *Gate
	ended         *endWatch // nil: nobody to tell

	splits  []keySplit
	cur     int
	emitted int64 // since Open
	opened  time.Time

	mu    sync.Mutex
	wake  func()
	timer *time.Timer
	done  bool
}

// SetWake implements topology.Waker.
func (s *keyedSplits) SetWake(w func()) { s.mu.Lock(); s.wake = w; s.mu.Unlock() }

// Open implements topology.SplitSource.
func (s *keyedSplits) Open(_ context.Context, splits [][]byte) error {
	s.splits, s.cur, s.emitted, s.opened = make([]keySplit, len(splits)), 0, 0, time.Now()
	for i, b := range splits {
		key, next, err := DecodeKeySplit(b)
		if err != nil {
			return err
		}
		s.splits[i] = keySplit{key: key, next: next}
		if next > s.limit && s.gate != nil {
			s.gate.reach(key) // restored at or past the gate
		}
	}
	return nil
}

// allowed is the number of records the rate allows now, at most size.
func (s *keyedSplits) allowed(size int) int {
	if s.rate <= 0 {
		return size
	}
	// the records the rate allows since Open, less those emitted
	return int(max(0, min(int64(size), int64(time.Since(s.opened).Seconds()*s.rate)+1-s.emitted)))
}

// Read implements topology.SplitSource: one record of each split in turn,
// below the gate and the rate.
func (s *keyedSplits) Read(buf []Event) (int, error) {
	allowed := s.allowed(len(buf))
	n, idle := 0, 0
	for n < allowed && idle < len(s.splits) {
		sp := &s.splits[s.cur]
		s.cur = (s.cur + 1) % len(s.splits)
		if sp.next > s.limit {
			idle++
			continue
		}
		idle = 0
		buf[n] = Event{Key: sp.key, Seq: sp.next}
		n++
		sp.next++
		if sp.next > s.limit && s.gate != nil {
			s.gate.reach(sp.key)
		}
	}
	s.emitted += int64(n)
	return n, s.status(n, allowed, len(buf))
}

// status is the error a read of n records, of allowed, into a buffer of
// size returns: io.EOF once every split has ended, ErrSourceIdle at the
// gate or the rate, nil otherwise.
func (s *keyedSplits) status(n, allowed, size int) error {
	ended, atGate := 0, 0
	for _, sp := range s.splits {
		switch {
		case sp.next > s.perKey:
			ended++
		case sp.next > s.limit:
			atGate++
		}
	}
	switch {
	case ended == len(s.splits):
		if s.ended != nil {
			s.ended.mark(s.splits)
		}
		return io.EOF
	case ended+atGate == len(s.splits):
		return topology.ErrSourceIdle // until the phase ends
	case n == allowed && n < size:
		s.armWake()
		return topology.ErrSourceIdle
	}
	return nil
}

// splitRuns is a keyedSplits that reads runs of one split at a time: a
// topology.SplitReader, whose splits each keep a watermark.
type splitRuns struct {
	*keyedSplits
	run int
}

// Read implements topology.SplitSource.
func (s *splitRuns) Read(buf []Event) (int, error) {
	r, err := s.ReadSplit(buf)
	return r.N, err
}

// ReadSplit implements topology.SplitReader: up to run records of the next
// split below the gate, within the rate.
func (s *splitRuns) ReadSplit(buf []Event) (topology.SplitRead, error) {
	allowed := min(s.allowed(len(buf)), s.run)
	var r topology.SplitRead
	for range s.splits {
		i := s.cur
		sp := &s.splits[i]
		s.cur = (s.cur + 1) % len(s.splits)
		if sp.next > s.limit {
			continue
		}
		for r.N < allowed && sp.next <= s.limit {
			buf[r.N] = Event{Key: sp.key, Seq: sp.next}
			r.N++
			sp.next++
		}
		r.Split, r.Done = i, sp.next > s.perKey
		if sp.next > s.limit && s.gate != nil {
			s.gate.reach(sp.key)
		}
		break
	}
	s.emitted += int64(r.N)
	return r, s.status(r.N, allowed, min(len(buf), s.run))
}

// armWake wakes the task a millisecond from now, when the rate allows more.
func (s *keyedSplits) armWake() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil || s.done || s.wake == nil {
		return
	}
	w := s.wake
	s.timer = time.AfterFunc(time.Millisecond, func() {
		s.mu.Lock()
		s.timer = nil
		s.mu.Unlock()
		w()
	})
}

// Splits implements topology.SplitSource.
func (s *keyedSplits) Splits() [][]byte {
	out := make([][]byte, len(s.splits))
	for i, sp := range s.splits {
		out[i] = encodeKeySplit(sp.key, sp.next)
	}
	return out
}

// Close implements topology.SplitSource.
func (s *keyedSplits) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done = true
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}
