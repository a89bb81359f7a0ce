package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/snapflow/snapflow/snapshots"
)

// countingStore is a snapshots.Store that counts what is read from the
// store it wraps, every Get and GetRange by key, and what is written to it,
// the bytes of every Put in total. The rescale sweep wraps its store in one
// to report the bytes a restore reads, and a snapflow row to report the
// bytes a checkpoint uploads and to replay the reads of a restore
// (replayReads). Hand the job store(), not the countingStore itself: it is
// a snapshots.RangeReader exactly when the wrapped store is one, so that
// wrapping does not change how a restore reads.
type countingStore struct {
	snapshots.Store

	putBytes atomic.Int64 // bytes of every successful Put, never reset

	inFlight atomic.Int64 // reads under way

	mu    sync.Mutex
	gets  map[string]int64 // bytes read, by key, since the last reset
	n     int              // reads since the last reset
	reads []readOp         // every read since the last reset, in the order they ended
	peak  int64            // the most reads under way at once since the last reset
}

// readOp is one read of a countingStore: the whole object (length -1), or
// length bytes at offset.
type readOp struct {
	key            string
	offset, length int64
}

func newCountingStore(s snapshots.Store) *countingStore {
	return &countingStore{Store: s, gets: map[string]int64{}}
}

// rangedCountingStore is a countingStore over a snapshots.RangeReader.
type rangedCountingStore struct{ *countingStore }

// GetRange reads part of an object through the wrapped store's GetRange
// and counts the bytes it returns.
func (r rangedCountingStore) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	r.started()
	b, err := r.Store.(snapshots.RangeReader).GetRange(ctx, key, offset, length)
	r.ended(readOp{key: key, offset: offset, length: length}, len(b), err)
	return b, err
}

// store is c as the store to hand a job: a snapshots.RangeReader when the
// wrapped store is one.
func (c *countingStore) store() snapshots.Store {
	if _, ok := c.Store.(snapshots.RangeReader); ok {
		return rangedCountingStore{c}
	}
	return c
}

// Get reads key from the wrapped store and counts the bytes it returns.
func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	c.started()
	b, err := c.Store.Get(ctx, key)
	c.ended(readOp{key: key, length: -1}, len(b), err)
	return b, err
}

// started counts a read under way.
func (c *countingStore) started() {
	n := c.inFlight.Add(1)
	c.mu.Lock()
	c.peak = max(c.peak, n)
	c.mu.Unlock()
}

// ended counts a read that returned n bytes, when it succeeded, unless it
// read the job's lease or origin: a job reads them at every start, and
// they are not what a restore costs.
func (c *countingStore) ended(op readOp, n int, err error) {
	c.inFlight.Add(-1)
	if err != nil || strings.Contains(op.key, "/leases/") || strings.HasSuffix(op.key, "/origin") {
		return
	}
	c.mu.Lock()
	c.gets[op.key] += int64(n)
	c.n++
	c.reads = append(c.reads, op)
	c.mu.Unlock()
}

// Put writes data under key to the wrapped store and counts its bytes once
// the Put has succeeded.
func (c *countingStore) Put(ctx context.Context, key string, data []byte) error {
	err := c.Store.Put(ctx, key, data)
	if err == nil {
		c.putBytes.Add(int64(len(data)))
	}
	return err
}

// Create writes data under key only if it is absent, through the wrapped
// store's snapshots.Creator, so that wrapping a store keeps its
// conditional writes (the job's lease and manifests use them).
func (c *countingStore) Create(ctx context.Context, key string, data []byte) error {
	cr, ok := c.Store.(snapshots.Creator)
	if !ok {
		return fmt.Errorf("bench: the counted store %s cannot create only if absent", c.Store)
	}
	err := cr.Create(ctx, key, data)
	if err == nil {
		c.putBytes.Add(int64(len(data)))
	}
	return err
}

// DeleteMany deletes keys through the wrapped store's BatchDeleter, or one
// by one, so that wrapping a store does not change how retention deletes.
func (c *countingStore) DeleteMany(ctx context.Context, keys []string) error {
	if bd, ok := c.Store.(snapshots.BatchDeleter); ok {
		return bd.DeleteMany(ctx, keys)
	}
	for _, k := range keys {
		if err := c.Store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// written is the bytes of every successful Put so far.
func (c *countingStore) written() int64 { return c.putBytes.Load() }

// readStats is what a countingStore counted: bytes by key, their total,
// the number of reads (Get and GetRange), the reads themselves, and the
// most that were under way at once.
type readStats struct {
	byKey map[string]int64
	bytes int64
	gets  int
	reads []readOp
	peak  int
}

// reset returns what was counted since the last reset and starts again.
func (c *countingStore) reset() readStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := readStats{byKey: c.gets, gets: c.n, reads: c.reads, peak: int(c.peak)}
	for _, n := range c.gets {
		s.bytes += n
	}
	c.gets, c.n, c.reads, c.peak = map[string]int64{}, 0, nil, c.inFlight.Load()
	return s
}
