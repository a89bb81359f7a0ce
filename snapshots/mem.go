package snapshots

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
)

// Mem is a Store in memory, for tests and for jobs that need no durability.
// It copies data in and out, so callers may reuse their slices.
type Mem struct {
	name string
	mu   sync.Mutex
	objs map[string][]byte
}

var _ Store = (*Mem)(nil)

// NewMem returns an empty memory store.
func NewMem() *Mem { return &Mem{objs: make(map[string][]byte)} }

var named = struct {
	sync.Mutex
	m map[string]*Mem
}{m: make(map[string]*Mem)}

// namedMem returns the process-wide memory store called name, creating it
// on first use, so that a job restarted in the same process finds its
// checkpoints again.
func namedMem(name string) *Mem {
	named.Lock()
	defer named.Unlock()
	m, ok := named.m[name]
	if !ok {
		m = NewMem()
		m.name = name
		named.m[name] = m
	}
	return m
}

// String returns "mem://" or, for a named store, "mem://<name>".
func (m *Mem) String() string { return "mem://" + m.name }

// Close does nothing; the objects stay for as long as m is reachable.
func (m *Mem) Close() error { return nil }

// Check reports only a done context; memory is always writable.
func (m *Mem) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: check %s: %w", m, err)
	}
	return nil
}

// Put stores a copy of data under key.
func (m *Mem) Put(ctx context.Context, key string, data []byte) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	c := slices.Clone(data)
	if c == nil {
		c = []byte{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.objs[key] = c
	return nil
}

// Get returns a copy of the object under key.
func (m *Mem) Get(ctx context.Context, key string) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, ErrNotFound)
	}
	return slices.Clone(data), nil
}

// List returns the keys starting with prefix, sorted.
func (m *Mem) List(ctx context.Context, prefix string) ([]string, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: list %s: %w", prefix, err)
	}
	m.mu.Lock()
	var keys []string
	for k := range m.objs {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	slices.Sort(keys)
	return keys, nil
}

// Delete removes the object under key, if any.
func (m *Mem) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: delete %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.objs, key)
	return nil
}

// GetRange implements RangeReader.
func (m *Mem) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	data, ok := m.objs[key]
	if !ok {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, ErrNotFound)
	}
	b, err := sliceRange(key, data, offset, length)
	return slices.Clone(b), err
}
