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

// Generator produces records i = 0, 1, ... with key i % keys.
type Generator struct {
	Keys uint64
	Pad  string
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

// Fill writes records start, start+1, ... into buf, all stamped now.
func (g Generator) Fill(buf []Record, start uint64, now int64) {
	for i := range buf {
		buf[i] = Record{Key: (start + uint64(i)) % g.Keys, TS: now, Pad: g.Pad}
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
