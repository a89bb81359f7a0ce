package snapshots

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// ErrExists is wrapped by the error of Creator.Create when the key already
// holds an object.
var ErrExists = errors.New("snapshots: object exists")

// Creator is implemented by stores that can create an object only where
// none is: a conditional write (S3's and MinIO's If-None-Match: *, a hard
// link in a directory). Of any number of Creates of one key, at once or
// not, by one process or many, at most one succeeds while the object is
// there; the others return an error wrapping ErrExists and change nothing.
//
// A Create whose answer was lost and that the store retried may return
// ErrExists for the object it created itself: a caller that must know
// reads the object back and compares it with what it wrote, as
// Checkpoints does.
//
// Checkpoints uses it for the job's lease and for manifests, so that two
// holders of one job can never both complete a checkpoint, nor both claim
// the lease (see the package documentation). Dir, Mem and MinIO implement
// it. For a store without it, Checkpoints reads the key and then puts the
// object, which two writers racing for one key can both pass: the
// guarantees then hold against a holder that was superseded some time
// before it writes, not against one that writes at the very moment
// another claims.
type Creator interface {
	// Create stores data under key if no object is there, atomically (as
	// Put does), and returns an error wrapping ErrExists otherwise.
	Create(ctx context.Context, key string, data []byte) error
}

// Create stores data under key only if key is free, in one step.
func (m *Mem) Create(ctx context.Context, key string, data []byte) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: create %s: %w", key, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objs[key]; ok {
		return fmt.Errorf("snapshots: create %s: %w", key, ErrExists)
	}
	c := make([]byte, len(data))
	copy(c, data)
	m.objs[key] = c
	return nil
}

// Create writes data as Put does, but links the temporary file to its key
// instead of renaming it there: a link never replaces a file, so that the
// object is created only if none is there, also against other processes
// sharing the directory.
func (d *Dir) Create(ctx context.Context, key string, data []byte) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: create %s: %w", key, err)
	}
	if err := d.write(ctx, key, data, true); err != nil {
		return fmt.Errorf("snapshots: create %s: %w", key, err)
	}
	return nil
}

// creating logs, once per store, that a store cannot create objects
// conditionally.
var creating sync.Map // Store -> struct{}

// createObject creates key in s only where no object is, with s's Creator
// when it has one. Otherwise it reads the key and puts the object when it
// is free, which is not atomic (see Creator).
func createObject(ctx context.Context, s *guarded, key string, data []byte) error {
	if _, ok := s.s.(Creator); ok {
		return s.Create(ctx, key, data)
	}
	if _, seen := creating.LoadOrStore(s.s, struct{}{}); !seen {
		s.log.WarnContext(ctx, "snapshots: the store cannot create objects conditionally (snapshots.Creator): "+
			"the job's lease and manifests are written by read-then-put, which two writers at the very same moment can both pass",
			"store", s.String())
	}
	_, err := s.Get(ctx, key)
	switch {
	case err == nil:
		return fmt.Errorf("snapshots: create %s: %w", key, ErrExists)
	case !errors.Is(err, ErrNotFound) || ctx.Err() != nil:
		return err
	}
	return s.Put(ctx, key, data)
}

// Create calls the store's Create; the store must be a Creator.
func (g *guarded) Create(ctx context.Context, key string, data []byte) (err error) {
	defer func() {
		if p := recover(); p != nil {
			g.recovered(ctx, p, "Create", key, &err)
		}
	}()
	return g.s.(Creator).Create(ctx, key, data)
}

var (
	_ Creator = (*Mem)(nil)
	_ Creator = (*Dir)(nil)
	_ Creator = (*MinIO)(nil)
)
