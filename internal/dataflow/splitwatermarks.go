package dataflow

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/internal/watermark"
)

// SplitReader is implemented by a SplitSource whose every read returns
// records of one split. The runtime then calls ReadSplit instead of Read
// and, when the source has a watermark strategy (WithWatermarks), keeps a
// watermark per split: the task's watermark is the lowest over its splits
// that are neither idle nor ended, so that one slow split (a Kafka
// partition that lags) holds event time back, and an idle or ended one
// does not. A split source that does not implement it has one watermark
// per task, over the records of all its splits.
//
// Every split given to Open holds event time back from the start, until it
// reads records, goes idle (WatermarkStrategy.IdleTimeout) or ends: a split
// that may stay empty needs an idleness timeout. A split is idle once the
// task's read attempts have found none of its records for the timeout
// (see watermark.Idleness); a checkpoint keeps how long each split has
// been quiet, so an idle split is idle again at once after a restore. A split the source adds
// after Open (its index is past the list given to Open) counts from its
// first read on.
type SplitReader[T any] interface {
	// ReadSplit is Read, for one split: it fills buf with records of one
	// split and says which.
	ReadSplit(buf []T) (SplitRead, error)
}

// SplitRead is what one ReadSplit returned.
type SplitRead struct {
	// N is the number of records read into the buffer.
	N int
	// Split is the index of the split the records came from, in the list
	// Splits returns: the splits given to Open, in that order, then those
	// the source added since, in the order it added them.
	Split int
	// Done says that the split has no more records: its watermark no
	// longer holds the task back. A read may say so with N = 0.
	Done bool
}

// maxSplits bounds the split indices a SplitReader may name.
const maxSplits = 1 << 16

// splitClocks keeps one watermark generator per split of a source task,
// and combines them into the task's watermark.
type splitClocks struct {
	outOfOrder, idle time.Duration
	gens             []*watermark.Generator
	ended            []bool
	comb             *watermark.Combiner // nil until open, and with no splits
	// restored holds the splits' highest timestamps from the checkpoint
	// (parallel to its splits), or is nil; fallback is the task's, for a
	// checkpoint that has no per-split ones (watermark.Min: none).
	// restoredQuiet holds the splits' quiet times (see
	// watermark.Idleness), or is nil.
	restored, restoredQuiet []int64
	fallback                int64
}

// open makes a generator for each of the n splits given to Open, from the
// restored timestamps and quiet times when there are as many.
func (c *splitClocks) open(n int) {
	c.gens, c.ended, c.comb = nil, nil, nil
	if n == 0 {
		return
	}
	c.comb = watermark.NewCombiner(n)
	for i := range n {
		ts := c.fallback
		if len(c.restored) == n {
			ts = c.restored[i]
		}
		c.add()
		if ts == watermark.Max {
			c.end(i)
			continue
		}
		g := c.gens[i]
		g.Restore(ts)
		c.comb.Advance(i, g.Watermark())
		if len(c.restoredQuiet) == n {
			g.Idleness().Restore(c.restoredQuiet[i])
			if g.Idle() {
				c.comb.SetIdle(i, true)
			}
		}
	}
}

// end ends split i: it holds nothing back from now on. It counts as idle
// for good, not as ended: a task whose splits have all ended is idle, not
// at the end of time, since the source may still find a new split (a
// Kafka partition) that must hold event time back again.
func (c *splitClocks) end(i int) {
	c.ended[i] = true
	c.comb.SetIdle(i, true)
}

// grow adds splits, at Min, until there are n.
func (c *splitClocks) grow(n int) {
	if n <= len(c.gens) {
		return
	}
	for len(c.gens) < n {
		c.add()
	}
	if c.comb == nil {
		c.comb = watermark.NewCombiner(n)
	}
	c.comb.Grow(n)
}

// add makes the generator of a new split.
func (c *splitClocks) add() {
	g, err := watermark.NewGenerator(c.outOfOrder, c.idle)
	if err != nil { // Validate refused these
		panic(err)
	}
	c.gens, c.ended = append(c.gens, g), append(c.ended, false)
}

// read records a read of r.N records from split r.Split, whose highest
// timestamp is hi (watermark.Min: none), at processing time now. It is a
// read attempt for every split: each that returned nothing comes closer to
// idle.
func (c *splitClocks) read(r SplitRead, hi int64, now int64) error {
	if r.Split < 0 || r.Split >= maxSplits {
		return fmt.Errorf("ReadSplit returned split %d, outside [0, %d)", r.Split, maxSplits)
	}
	if r.N > 0 || r.Done {
		c.grow(r.Split + 1)
		if c.ended[r.Split] && r.N > 0 {
			return fmt.Errorf("ReadSplit returned %d records of split %d, which it had said was done", r.N, r.Split)
		}
	}
	c.attempt(r, now)
	if r.N == 0 && !r.Done || c.ended[r.Split] {
		return nil // nothing read: Split says nothing
	}
	g := c.gens[r.Split]
	g.Observe(hi)
	c.comb.Advance(r.Split, g.Watermark())
	if r.Done {
		c.end(r.Split)
	}
	return nil
}

// attempt counts a read attempt at now for every split that has not ended:
// r.Split's records, none for the others. It makes the splits whose
// attempts have found nothing for the timeout idle.
func (c *splitClocks) attempt(r SplitRead, now int64) {
	if c.idle <= 0 {
		return
	}
	for i, g := range c.gens {
		if c.ended[i] {
			continue
		}
		n := 0
		if i == r.Split {
			n = r.N
		}
		g.Read(n, now)
		if idle := g.Idle(); idle && !c.comb.Input(i).Idle {
			c.comb.SetIdle(i, true)
		}
	}
}

// status is the combined watermark. It is false for a task without
// splits, whose source clock then decides alone.
func (c *splitClocks) status() (watermark.Status, bool) {
	if c.comb == nil {
		return watermark.Status{}, false
	}
	return c.comb.Status(), true
}

// period is how long a task that waits for records waits before it
// attempts a read again, so that its quiet splits come closer to idle; it
// is false when every split is idle or ended.
func (c *splitClocks) period() (time.Duration, bool) {
	for i, g := range c.gens {
		if c.ended[i] || c.comb.Input(i).Idle {
			continue
		}
		if d, ok := g.Idleness().Period(); ok {
			return d, true
		}
	}
	return 0, false
}

// snapshot returns the task's position for a checkpoint of n splits: the
// lowest highest timestamp over the splits that have not ended, and each
// split's (Max for an ended one, Min for one without a generator yet).
func (c *splitClocks) snapshot(n int) (lowest int64, perSplit, quiet []int64) {
	perSplit, quiet = make([]int64, n), make([]int64, n)
	lowest = watermark.Max
	for i := range perSplit {
		ts := watermark.Min
		switch {
		case i < len(c.gens) && c.ended[i]:
			ts = watermark.Max
		case i < len(c.gens):
			ts = c.gens[i].MaxTimestamp()
			quiet[i] = c.gens[i].Idleness().Quiet()
		}
		perSplit[i] = ts
		if ts != watermark.Max {
			lowest = min(lowest, ts)
		}
	}
	if lowest == watermark.Max { // every split ended, or none
		lowest = c.fallback
		for _, g := range c.gens {
			lowest = max(lowest, g.MaxTimestamp())
		}
	}
	return lowest, perSplit, quiet
}
