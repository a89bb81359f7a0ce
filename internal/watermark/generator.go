package watermark

import (
	"fmt"
	"time"
)

// Generator derives a watermark from the timestamps of the records a
// source, or one split of a source, reads: the highest timestamp seen,
// less the out-of-orderness bound, less one nanosecond. A record as late
// as the bound is still on time. It also says when the source has been
// idle (read nothing) for the idleness timeout.
//
// Observe is called per record and costs a comparison; Read once per read,
// with the clock.
type Generator struct {
	bound   int64 // out-of-orderness, ns
	idle    int64 // idleness timeout, ns; 0: never idle
	maxTS   int64 // highest timestamp observed, Min when none
	lastRec int64 // processing time of the last read that returned records
}

// NewGenerator returns a Generator that allows records up to outOfOrder
// behind the highest timestamp seen and, if idleTimeout > 0, reports the
// source idle once it has read nothing for idleTimeout. now is the
// processing time (ns) at which the source starts: a source that never
// reads anything is idle idleTimeout after it.
func NewGenerator(outOfOrder, idleTimeout time.Duration, now int64) (*Generator, error) {
	if outOfOrder < 0 {
		return nil, fmt.Errorf("watermark: out-of-orderness %v is negative", outOfOrder)
	}
	if idleTimeout < 0 {
		return nil, fmt.Errorf("watermark: idleness timeout %v is negative", idleTimeout)
	}
	return &Generator{bound: int64(outOfOrder), idle: int64(idleTimeout), maxTS: Min, lastRec: now}, nil
}

// Observe records a record's timestamp.
func (g *Generator) Observe(ts int64) {
	if ts > g.maxTS {
		g.maxTS = ts
	}
}

// Read records that a read at processing time now returned n records.
func (g *Generator) Read(n int, now int64) {
	if n > 0 {
		g.lastRec = now
	}
}

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

// Idle reports whether the source has read nothing for the idleness
// timeout, at processing time now.
func (g *Generator) Idle(now int64) bool {
	return g.idle > 0 && now-g.lastRec >= g.idle
}

// IdleAt is the processing time at which the source becomes idle if it
// reads nothing more, and false when it never does: the time to check
// again.
func (g *Generator) IdleAt() (int64, bool) {
	return g.lastRec + g.idle, g.idle > 0
}

// OutOfOrderness is the out-of-orderness bound.
func (g *Generator) OutOfOrderness() time.Duration { return time.Duration(g.bound) }

// IdleTimeout is the idleness timeout (0: never idle).
func (g *Generator) IdleTimeout() time.Duration { return time.Duration(g.idle) }

// MaxTimestamp is the highest timestamp observed (Min when none): what a
// checkpoint keeps, so that a restored source resumes event time where it
// was.
func (g *Generator) MaxTimestamp() int64 { return g.maxTS }

// Restore sets the highest timestamp observed, from a checkpoint.
func (g *Generator) Restore(maxTS int64) { g.maxTS = maxTS }
