package snapshots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync/atomic"
)

// ErrStorePanic is wrapped by the error that Checkpoints returns when a
// method of its Store panics. The panic is recovered, so that a faulty
// Store fails one operation instead of the process.
var ErrStorePanic = errors.New("snapshots: store panicked")

// guarded is the Store that Checkpoints uses: it calls s and turns a panic
// in any of its methods into an error wrapping ErrStorePanic, logging the
// stack at Error level. It implements BatchDeleter whether or not s does.
type guarded struct {
	s    Store
	log  *slog.Logger
	read atomic.Int64 // bytes read from s
}

// guard returns s wrapped so that its panics become errors.
func guard(s Store, log *slog.Logger) *guarded { return &guarded{s: s, log: log} }

// recovered turns a recovered panic value p of method (called for what,
// such as a key) into *err, and logs it with the stack.
func (g *guarded) recovered(ctx context.Context, p any, method, what string, err *error) {
	name := storeName(g.s)
	call := method
	if what != "" {
		call += " " + what
	}
	g.log.ErrorContext(ctx, "snapshots: store panicked", "store", name, "method", method, "arg", what,
		"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	if perr, ok := p.(error); ok {
		*err = fmt.Errorf("snapshots: store %s: %s panicked: %v: %w: %w", name, call, p, ErrStorePanic, perr)
		return
	}
	*err = fmt.Errorf("snapshots: store %s: %s panicked: %v: %w", name, call, p, ErrStorePanic)
}

// storeName returns s.String(), or a description of s when String panics
// too.
func storeName(s Store) (name string) {
	defer func() {
		if p := recover(); p != nil {
			name = fmt.Sprintf("%T (String panicked: %v)", s, p)
		}
	}()
	if s == nil {
		return "<nil>"
	}
	return s.String()
}

func (g *guarded) Put(ctx context.Context, key string, data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			g.recovered(ctx, p, "Put", key, &err)
		}
	}()
	return g.s.Put(ctx, key, data)
}

func (g *guarded) Get(ctx context.Context, key string) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			data = nil
			g.recovered(ctx, p, "Get", key, &err)
		}
	}()
	data, err = g.s.Get(ctx, key)
	g.read.Add(int64(len(data)))
	return data, err
}

func (g *guarded) List(ctx context.Context, prefix string) (keys []string, err error) {
	defer func() {
		if p := recover(); p != nil {
			keys = nil
			g.recovered(ctx, p, "List", fmt.Sprintf("%q", prefix), &err)
		}
	}()
	return g.s.List(ctx, prefix)
}

func (g *guarded) Delete(ctx context.Context, key string) (err error) {
	defer func() {
		if p := recover(); p != nil {
			g.recovered(ctx, p, "Delete", key, &err)
		}
	}()
	return g.s.Delete(ctx, key)
}

// DeleteMany calls the store's DeleteMany when it is a BatchDeleter, and
// its Delete for each key otherwise.
func (g *guarded) DeleteMany(ctx context.Context, keys []string) (err error) {
	bd, ok := g.s.(BatchDeleter)
	if !ok {
		for _, k := range keys {
			if err := g.Delete(ctx, k); err != nil {
				return err
			}
		}
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			g.recovered(ctx, p, "DeleteMany", fmt.Sprintf("(%d keys)", len(keys)), &err)
		}
	}()
	return bd.DeleteMany(ctx, keys)
}

func (g *guarded) Check(ctx context.Context) (err error) {
	defer func() {
		if p := recover(); p != nil {
			g.recovered(ctx, p, "Check", "", &err)
		}
	}()
	return g.s.Check(ctx)
}

func (g *guarded) String() string { return storeName(g.s) }

func (g *guarded) Close() (err error) {
	defer func() {
		if p := recover(); p != nil {
			g.recovered(context.Background(), p, "Close", "", &err)
		}
	}()
	return g.s.Close()
}

var (
	_ Store        = (*guarded)(nil)
	_ BatchDeleter = (*guarded)(nil)
)

// GetRange reads part of an object: a ranged read when the store is a
// RangeReader, else the whole object, sliced.
func (g *guarded) GetRange(ctx context.Context, key string, offset, length int64) (data []byte, err error) {
	defer func() {
		if p := recover(); p != nil {
			data = nil
			g.recovered(ctx, p, "GetRange", key, &err)
		}
	}()
	if r, ok := g.s.(RangeReader); ok {
		data, err = r.GetRange(ctx, key, offset, length)
		g.read.Add(int64(len(data)))
		return data, err
	}
	whole, err := g.s.Get(ctx, key)
	g.read.Add(int64(len(whole)))
	if err != nil {
		return nil, err
	}
	return sliceRange(key, whole, offset, length)
}
