package watermark

import (
	"fmt"
	"time"
)

// Generator derives a watermark from the timestamps of the records a
// source, or one split of a source, reads: the highest timestamp seen,
// less the out-of-orderness bound, less one nanosecond. A record as late
// as the bound is still on time. It also says when the source is idle: its
// read attempts have found nothing for the idleness timeout (Idleness).
//
// Observe is called per record and costs a comparison; Read once per read
// attempt, with the clock.
type Generator struct {
	bound int64 // out-of-orderness, ns
	maxTS int64 // highest timestamp observed, Min when none
	idle  Idleness
}

// NewGenerator returns a Generator that allows records up to outOfOrder
// behind the highest timestamp seen and, if idleTimeout > 0, reports the
// source idle once its read attempts have found nothing for idleTimeout.
func NewGenerator(outOfOrder, idleTimeout time.Duration) (*Generator, error) {
	if outOfOrder < 0 {
		return nil, fmt.Errorf("watermark: out-of-orderness %v is negative", outOfOrder)
	}
	if idleTimeout < 0 {
		return nil, fmt.Errorf("watermark: idleness timeout %v is negative", idleTimeout)
	}
	return &Generator{bound: int64(outOfOrder), maxTS: Min, idle: NewIdleness(idleTimeout)}, nil
}

// Observe records a record's timestamp.
func (g *Generator) Observe(ts int64) {
	if ts > g.maxTS {
		g.maxTS = ts
	}
}

// Read records that a read attempt at processing time now returned n
// records.
func (g *Generator) Read(n int, now int64) { g.idle.Read(n, now) }

// Watermark is the current watermark: Min before any record, and never
// below Min otherwise.
func (g *Generator) Watermark() int64 {
	if g.maxTS == Min {
		return Min
	}
	if g.maxTS < Min+g.bound+1 {
		return Min
	}
	return g.maxTS - g.bound - 1
}

// Idle reports whether the source's read attempts have found nothing for
// the idleness timeout.
func (g *Generator) Idle() bool { return g.idle.Idle() }

// Idleness is the source's idleness, to check when to read again
// (Idleness.Period) and to snapshot and restore its count.
func (g *Generator) Idleness() *Idleness { return &g.idle }

// OutOfOrderness is the out-of-orderness bound.
func (g *Generator) OutOfOrderness() time.Duration { return time.Duration(g.bound) }

// IdleTimeout is the idleness timeout (0: never idle).
func (g *Generator) IdleTimeout() time.Duration { return g.idle.Timeout() }

// MaxTimestamp is the highest timestamp observed (Min when none): what a
// checkpoint keeps, so that a restored source resumes event time where it
// was.
func (g *Generator) MaxTimestamp() int64 { return g.maxTS }

// Restore sets the highest timestamp observed, from a checkpoint.
func (g *Generator) Restore(maxTS int64) { g.maxTS = maxTS }
