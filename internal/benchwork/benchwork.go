// Package benchwork is the workload of snapflow's benchmark, shared by the
// snapflow jobs and the hand-written baselines (protoactor-go actors and Go
// channels) so that all of them do the same per-record work.
//
// A Record is 16 bytes by default: a key and the time its batch was
// generated. The generator stamps one time per batch (reading the clock per
// record would cost more than the work), the keyed operator adds the record
// into a per-key sum, and the sink records the end-to-end latency of every
// record in a Histogram.
package benchwork

import (
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"
)

// Record is one benchmark record.
type Record struct {
	Key uint64
	TS  int64  // unix nanoseconds when its batch was generated
	Pad string // extra bytes up to the configured record size (shared, not copied)
}

// Output is what the keyed operator emits: the key's running sum.
type Output struct {
	Key uint64
	Sum uint64
	TS  int64
}

// Generator produces records i = 0, 1, ... over Keys keys. Records
// 0..Keys-1 have keys 0..Keys-1, one record per key, so that every key has
// state from the start. After them, record i has key i % Keys, unless Hot is
// set: then the records of second s (unix time of their batch) cycle through
// the hot window of Hot keys that starts at key s*Hot % Keys, so within any
// second only Hot of the keys change, and over Keys/Hot seconds every key
// does.
type Generator struct {
	Keys uint64
	Pad  string
	Hot  uint64 // keys in the hot window; 0 or >= Keys: every key, in turn
}

// NewGenerator returns a generator of records of size bytes (at least 16)
// over keys keys.
func NewGenerator(keys uint64, size int) Generator {
	pad := ""
	if size > 16 {
		pad = string(make([]byte, size-16))
	}
	return Generator{Keys: max(1, keys), Pad: pad}
}

// WithUpdateFraction returns g with a hot window of max(1, f*Keys) keys
// (rounded down): the fraction f (0 < f <= 1) of the keys changes per
// second. A fraction of 1 or more, or not above 0, is every key.
func (g Generator) WithUpdateFraction(f float64) Generator {
	g.Hot = 0
	if f > 0 && f < 1 {
		g.Hot = min(g.Keys, max(1, uint64(f*float64(g.Keys))))
	}
	return g
}

// HotWindow is the first key and the width of the keys that records after
// the first Keys ones have in second sec. The window wraps around past the
// last key.
func (g Generator) HotWindow(sec uint64) (first, width uint64) {
	if g.Hot == 0 || g.Hot >= g.Keys {
		return 0, g.Keys
	}
	return (sec % g.Keys) * g.Hot % g.Keys, g.Hot
}

// Fill writes records start, start+1, ... into buf, all stamped now, whose
// second (now / 1e9) places the hot window.
func (g Generator) Fill(buf []Record, start uint64, now int64) {
	i := 0
	for ; i < len(buf) && start+uint64(i) < g.Keys; i++ { // every key once first
		buf[i] = Record{Key: start + uint64(i), TS: now, Pad: g.Pad}
	}
	if i == len(buf) {
		return
	}
	first, width := g.HotWindow(uint64(max(now, 0)) / 1e9)
	for ; i < len(buf); i++ {
		k := first + (start+uint64(i))%width
		if k >= g.Keys {
			k -= g.Keys
		}
		buf[i] = Record{Key: k, TS: now, Pad: g.Pad}
	}
}

// Add is the per-record work of the keyed operator: the running sum of the
// key (here a count) is one more.
func Add(sum uint64, _ Record) uint64 { return sum + 1 }

// Partition maps a key to one of n tasks (the same as any KeyBy with the
// identity hash: key modulo n).
func Partition(key uint64, n int) int { return int(key % uint64(n)) }

// Histogram records latencies in log-linear buckets: 16 sub-buckets per
// power of two of nanoseconds, so quantiles are within about 6%. It is safe
// for concurrent use; Record takes a lock per call, so sinks record a batch
// at a time with RecordBatch.
type Histogram struct {
	mu     sync.Mutex
	counts [64 * 16]uint64
	n      uint64
}

func bucket(ns int64) int {
	if ns < 16 {
		return int(max(ns, 0))
	}
	e := bits.Len64(uint64(ns)) - 1 // ns in [2^e, 2^(e+1))
	sub := int(uint64(ns)>>(e-4)) & 15
	return (e-3)*16 + sub
}

func bucketValue(b int) int64 {
	if b < 16 {
		return int64(b)
	}
	e := b/16 + 3
	sub := b % 16
	return int64(16+sub) << (e - 4)
}

// RecordBatch adds the latencies now-TS of records.
func (h *Histogram) RecordBatch(now int64, ts []int64) {
	h.mu.Lock()
	for _, t := range ts {
		h.counts[bucket(now-t)]++
	}
	h.n += uint64(len(ts))
	h.mu.Unlock()
}

// Count is the number of latencies recorded.
func (h *Histogram) Count() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// Quantile returns the q-quantile (0..1) of the recorded latencies.
func (h *Histogram) Quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	target := uint64(math.Ceil(q * float64(h.n)))
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= max(target, 1) {
			return time.Duration(bucketValue(b))
		}
	}
	return time.Duration(bucketValue(len(h.counts) - 1))
}

// Quantiles returns the p50 and p99 of durations (zero when empty).
func Quantiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[min(len(s)-1, len(s)*99/100)]
}
