package snapshots

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/snapflow/snapflow/messages"
)

// maxParallelReads bounds the task states read at once.
const maxParallelReads = 16

// Restorable is a complete checkpoint whose objects all read back and
// verified.
type Restorable struct {
	Manifest *messages.Manifest
	// States holds each task's state by task id.
	States map[string]*messages.TaskState
}

// unusable reports whether err makes one checkpoint unusable, rather than
// the store or the call.
func unusable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound))
}

// LoadLatest returns the newest complete checkpoint all of whose objects
// read back and verify, reading the task states in parallel.
//
// A corrupt or missing object, or a corrupt manifest, makes a checkpoint
// unusable: LoadLatest logs it at Error level with the checkpoint id, the
// key and the cause, and tries the next older one. It returns (nil, nil)
// when no checkpoint is usable. Other errors, such as an unreachable store
// or a done context, are returned.
func (c *Checkpoints) LoadLatest(ctx context.Context) (*Restorable, error) {
	chks, err := c.scan(ctx)
	if err != nil {
		return nil, err
	}
	for _, chk := range slices.Backward(chks) {
		if !chk.complete {
			continue
		}
		r, key, err := c.load(ctx, chk.id)
		if err == nil {
			return r, nil
		}
		if !unusable(ctx, err) {
			return nil, err
		}
		c.log.ErrorContext(ctx, "snapshots: checkpoint unusable, trying an older one",
			"checkpoint", chk.id, "key", key, "err", err)
	}
	return nil, nil
}

// load reads checkpoint id; on failure it also returns the key at fault.
func (c *Checkpoints) load(ctx context.Context, id uint64) (*Restorable, string, error) {
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return nil, ManifestKey(c.job, id), err
	}
	states, key, err := c.readStates(ctx, m.GetTasks())
	if err != nil {
		return nil, key, err
	}
	return &Restorable{Manifest: m, States: states}, "", nil
}

// readStates reads and verifies the tasks' states in parallel. The first
// failure cancels the other reads and is returned with its key.
func (c *Checkpoints) readStates(ctx context.Context, tasks []*messages.TaskStateEntry) (map[string]*messages.TaskState, string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		states   = make([]*messages.TaskState, len(tasks))
		mu       sync.Mutex
		firstKey string
		firstErr error
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	for range min(len(tasks), maxParallelReads) {
		wg.Go(func() {
			for i := range next {
				st, err := c.readEntry(ctx, tasks[i])
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstKey, firstErr = tasks[i].GetState().GetKey(), err
					}
					mu.Unlock()
					cancel()
					continue
				}
				states[i] = st
			}
		})
	}
feed:
	for i := range tasks {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return nil, firstKey, firstErr
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	out := make(map[string]*messages.TaskState, len(tasks))
	for i, t := range tasks {
		out[t.GetTaskId()] = states[i]
	}
	return out, "", nil
}

// readEntry reads one manifest entry's state and checks that it is the
// state of that task.
func (c *Checkpoints) readEntry(ctx context.Context, t *messages.TaskStateEntry) (*messages.TaskState, error) {
	st, err := c.ReadTaskState(ctx, t.GetState())
	if err != nil {
		return nil, err
	}
	if st.GetTaskId() != t.GetTaskId() {
		return nil, fmt.Errorf("snapshots: state %s: task %q, want %q: %w",
			t.GetState().GetKey(), st.GetTaskId(), t.GetTaskId(), ErrCorrupt)
	}
	return st, nil
}

// Verify re-reads every object of the complete checkpoint id and returns
// the problems found, joined, or nil. An incomplete checkpoint gives an
// error wrapping ErrNotFound.
func (c *Checkpoints) Verify(ctx context.Context, id uint64) error {
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return fmt.Errorf("snapshots: verify checkpoint %d: %w", id, err)
	}
	var errs []error
	for _, t := range m.GetTasks() {
		if _, err := c.readEntry(ctx, t); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("snapshots: verify checkpoint %d: %w", id, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
