package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/snapshots"
)

// ErrInjected is the error of an injected store failure.
var ErrInjected = errors.New("chaos: injected store error")

// Store wraps a snapshots.Store and makes its calls fail or slow down as the
// injector's rates say. Store errors fail a checkpoint (or a restore, which
// the restart strategy retries); they do not spend the task-failure budget.
type Store struct {
	snapshots.Store
	in *Injector
}

// WrapStore returns s with injected errors and latency.
func WrapStore(s snapshots.Store, in *Injector) *Store { return &Store{Store: s, in: in} }

func (s *Store) fault(ctx context.Context, op, key string) error {
	if d := s.in.rates.StoreLatency; d > 0 && !s.in.disabled.Load() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.in.roll(s.in.rates.StoreError, false, site{kind: StoreError, a: op, b: key}) {
		return ErrInjected
	}
	return nil
}

// Put implements snapshots.Store.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if s.in.forcedPut(key, data) {
		return fmt.Errorf("%w (forced): put %s", ErrInjected, key)
	}
	if err := s.fault(ctx, "put", key); err != nil {
		return err
	}
	return s.Store.Put(ctx, key, data)
}

// Get implements snapshots.Store.
func (s *Store) Get(ctx context.Context, key string) ([]byte, error) {
	if err := s.fault(ctx, "get", key); err != nil {
		return nil, err
	}
	return s.Store.Get(ctx, key)
}

// List implements snapshots.Store.
func (s *Store) List(ctx context.Context, prefix string) ([]string, error) {
	if err := s.fault(ctx, "list", prefix); err != nil {
		return nil, err
	}
	return s.Store.List(ctx, prefix)
}

// Delete implements snapshots.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := s.fault(ctx, "delete", key); err != nil {
		return err
	}
	return s.Store.Delete(ctx, key)
}

// DeleteMany implements snapshots.BatchDeleter, passing the wrapped store's
// multi-object delete through (or deleting one by one).
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if err := s.fault(ctx, "delete-many", fmt.Sprint(len(keys))); err != nil {
		return err
	}
	if bd, ok := s.Store.(snapshots.BatchDeleter); ok {
		return bd.DeleteMany(ctx, keys)
	}
	for _, k := range keys {
		if err := s.Store.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}
