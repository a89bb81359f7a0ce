package main

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/snapflow/snapflow/snapshots"
)

// countingStore is a snapshots.Store that counts what is read from the
// store it wraps, the bytes of every Get by key, and what is written to it,
// the bytes of every Put in total. The rescale sweep wraps its store in one
// to report the bytes a restore reads, and a snapflow row to report the
// bytes a checkpoint uploads.
type countingStore struct {
	snapshots.Store

	putBytes atomic.Int64 // bytes of every successful Put, never reset

	mu   sync.Mutex
	gets map[string]int64 // bytes read, by key, since the last reset
	n    int              // Gets since the last reset
}

func newCountingStore(s snapshots.Store) *countingStore {
	return &countingStore{Store: s, gets: map[string]int64{}}
}

// Get reads key from the wrapped store and counts the bytes it returns.
func (c *countingStore) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := c.Store.Get(ctx, key)
	if err == nil {
		c.mu.Lock()
		c.gets[key] += int64(len(b))
		c.n++
		c.mu.Unlock()
	}
	return b, err
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
// and the number of Gets.
type readStats struct {
	byKey map[string]int64
	bytes int64
	gets  int
}

// reset returns what was counted since the last reset and starts again.
func (c *countingStore) reset() readStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := readStats{byKey: c.gets, gets: c.n}
	for _, n := range c.gets {
		s.bytes += n
	}
	c.gets, c.n = map[string]int64{}, 0
	return s
}
