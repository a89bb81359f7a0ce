package nexmark

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/snapflow/snapflow/topology"
)

// Source adds the generator as a split source with event time: c.Splits
// splits, each read in groups of events shuffled within c.OutOfOrder of
// event time, and a watermark strategy that allows exactly that, so that
// no event is late. A split's state is its index and position, so a
// restored source replays exactly; splits move between tasks on a
// rescale, and are not divided.
func Source(g *topology.Graph, name string, c Config, opts ...topology.Option) topology.Stream[Event] {
	if err := c.Validate(); err != nil {
		g.Refuse(name, err)
	}
	c = c.withDefaults()
	opts = append([]topology.Option{topology.WithWatermarks(topology.WatermarkStrategy[Event]{
		Timestamp:      func(e Event) time.Time { return time.Unix(0, e.Time()) },
		OutOfOrderness: c.OutOfOrder,
	})}, opts...)
	return topology.FromSplits(g, name, topology.Splits{Initial: func(int) [][]byte {
		splits := make([][]byte, c.Splits)
		for s := range splits {
			splits[s] = encodeSplit(s, 0)
		}
		return splits
	}}, func(int, int) topology.SplitSource[Event] { return &source{c: c, group: c.group()} }, opts...)
}

// group is how many consecutive events of a split are shuffled: the
// largest power of two whose events span no more than OutOfOrder.
func (c Config) group() int64 {
	g := int64(1)
	for 2*g*int64(c.Splits)*c.interval() <= int64(c.OutOfOrder) {
		g *= 2
	}
	return g
}

// splitLen is how many events split s holds.
func (c Config) splitLen(s int) int64 {
	if int64(s) >= c.Events {
		return 0
	}
	return (c.Events - int64(s) + int64(c.Splits) - 1) / int64(c.Splits)
}

// At returns the number of the k-th event split s emits.
func (c Config) at(s int, k, group int64) int64 {
	g, j := k/group, k%group
	if (g+1)*group <= c.splitLen(s) { // a whole group: shuffled
		r := newRnd(c.Seed^0x5eed, int64(s)<<40|g)
		a, b := int64(r.next()|1), int64(r.next())
		j = (a*j + b) & (group - 1)
	}
	return int64(s) + (g*group+j)*int64(c.Splits)
}

// Order returns the event numbers in the order split s emits them (for
// tests).
func (c Config) Order(s int) []int64 {
	c = c.withDefaults()
	group := c.group()
	out := make([]int64, c.splitLen(s))
	for k := range out {
		out[k] = c.at(s, int64(k), group)
	}
	return out
}

func encodeSplit(s int, k int64) []byte {
	return binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint32(nil, uint32(s)), uint64(k))
}

type split struct {
	s    int
	k    int64
	done bool // reported Done
}

type source struct {
	c      Config
	group  int64
	splits []split
	next   int // round robin
	// pacing (Config.Pace)
	start   time.Time
	emitted int64
	wake    func()
	armed   bool
}

// SetWake implements topology.Waker.
func (src *source) SetWake(w func()) { src.wake = w }

// limit is how far split s reads in this phase.
func (src *source) limit(s int) int64 {
	n := src.c.splitLen(s)
	if src.c.Gate != nil {
		return min(n, src.c.Gate.Limit(s, n))
	}
	return n
}

// allowed is how many events the pace allows now, arming a wake-up when
// it allows none.
func (src *source) allowed(want int) int {
	if src.c.Pace <= 0 {
		return want
	}
	if src.start.IsZero() {
		src.start = time.Now()
	}
	n := int64(time.Since(src.start).Seconds()*src.c.Pace) - src.emitted
	if n <= 0 {
		if !src.armed && src.wake != nil {
			src.armed = true
			time.AfterFunc(time.Millisecond, func() { src.wake() })
		}
		return 0
	}
	src.armed = false
	return int(min(int64(want), n))
}

func (src *source) Open(_ context.Context, states [][]byte) error {
	src.splits = src.splits[:0]
	for _, b := range states {
		if len(b) != 12 {
			return errors.New("nexmark: corrupt split state")
		}
		sp := split{s: int(binary.BigEndian.Uint32(b)), k: int64(binary.BigEndian.Uint64(b[4:]))}
		if sp.s < 0 || sp.s >= src.c.Splits || sp.k < 0 || sp.k > src.c.splitLen(sp.s) {
			return fmt.Errorf("nexmark: split %d at %d is not a split of this stream (%d splits of %d events)", sp.s, sp.k, src.c.Splits, src.c.Events)
		}
		src.splits = append(src.splits, sp)
	}
	return nil
}

// ReadSplit reads up to 256 events of the next split that has any, within
// the pace and the gate.
func (src *source) ReadSplit(buf []Event) (topology.SplitRead, error) {
	atGate, ended := 0, 0
	for range len(src.splits) {
		i := src.next
		src.next = (src.next + 1) % len(src.splits)
		sp := &src.splits[i]
		n, limit := src.c.splitLen(sp.s), src.limit(sp.s)
		switch {
		case sp.k >= n:
			ended++
			if !sp.done { // an empty split, or one restored at its end
				sp.done = true
				return topology.SplitRead{Split: i, Done: true}, nil
			}
			continue
		case sp.k >= limit:
			atGate++
			src.c.Gate.Reached(sp.s) // also when restored past it
			continue
		}
		m := int64(src.allowed(min(len(buf), 256)))
		if m == 0 {
			return topology.SplitRead{}, topology.ErrSourceIdle
		}
		m = min(m, limit-sp.k)
		for j := range m {
			buf[j] = src.c.event(src.c.at(sp.s, sp.k+j, src.group))
		}
		sp.k += m
		src.emitted += m
		sp.done = sp.k == n
		return topology.SplitRead{N: int(m), Split: i, Done: sp.done}, nil
	}
	if ended == len(src.splits) {
		return topology.SplitRead{}, io.EOF
	}
	return topology.SplitRead{}, topology.ErrSourceIdle // at the gate, until the job stops
}

func (src *source) Read(buf []Event) (int, error) {
	r, err := src.ReadSplit(buf)
	return r.N, err
}

func (src *source) Splits() [][]byte {
	out := make([][]byte, len(src.splits))
	for i, sp := range src.splits {
		out[i] = encodeSplit(sp.s, sp.k)
	}
	return out
}

func (src *source) Close() error { return nil }
