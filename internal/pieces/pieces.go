package pieces

import "time"

// decay weighs the older observations against each new one.
const decay = 0.75

// Estimator follows the cost of a record as the task processes batches,
// and sizes the pieces it processes them in. Its zero value knows nothing
// yet and lets batches through whole. It is not safe for concurrent use:
// one task owns it.
type Estimator struct {
	// Target is the time a piece should take (0: pieces are off).
	Target time.Duration
	// cost and records are decayed sums of what was observed.
	cost, records float64
}

// Observe records that records records took d.
func (e *Estimator) Observe(records int, d time.Duration) {
	if records <= 0 {
		return
	}
	e.cost = e.cost*decay + float64(d)
	e.records = e.records*decay + float64(records)
}

// PerRecord returns the estimated cost of one record (0: nothing observed).
func (e *Estimator) PerRecord() time.Duration {
	if e.records == 0 {
		return 0
	}
	return time.Duration(e.cost / e.records)
}

// Len returns how many of a batch's n records to process next: n when they
// fit in the target (or nothing is known), and otherwise as many as fit,
// at least one.
func (e *Estimator) Len(n int) int {
	per := e.PerRecord()
	if e.Target <= 0 || per <= 0 || n <= 1 {
		return n
	}
	fit := e.Target / per
	if fit >= time.Duration(n) {
		return n
	}
	return max(1, int(fit))
}
