package main

import (
	"context"
	"sync"

	"github.com/snapflow/snapflow/snapshots"
)

// countingStore is a snapshots.Store that counts what is read from the
// store it wraps: the bytes of every Get, by key. The rescale sweep wraps
// its store in one to report the bytes a restore reads.
type countingStore struct {
	snapshots.Store

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
