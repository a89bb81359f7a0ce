package baseline

import (
	"math"
	"time"

	"github.com/snapflow/snapflow/internal/benchwork"
)

// Meter is the accounting of a sink: it counts records, records their
// latency and measures the elapsed time from the first record generated to
// the last one received. It is not safe for concurrent use.
type Meter struct {
	hist    *benchwork.Histogram
	records int64
	first   int64 // smallest generation time seen
	last    int64 // time of the last batch received
}

// NewMeter returns an empty Meter.
func NewMeter() *Meter { return &Meter{hist: &benchwork.Histogram{}, first: math.MaxInt64} }

// Observe accounts a batch received at now whose records were generated at
// tss, in generation order.
func (m *Meter) Observe(now int64, tss []int64) {
	if len(tss) == 0 {
		return
	}
	m.hist.RecordBatch(now, tss)
	m.records += int64(len(tss))
	m.first = min(m.first, tss[0])
	m.last = now
}

// Result is what the meter measured, with the merged sums.
func (m *Meter) Result(sums map[uint64]uint64) Result {
	r := Result{Records: m.records, Latency: m.hist, Sums: sums}
	if m.records > 0 {
		r.Elapsed = time.Duration(m.last - m.first)
	}
	return r
}
