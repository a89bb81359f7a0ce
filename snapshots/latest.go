package snapshots

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/snapflow/snapflow/internal/parallel"
	"github.com/snapflow/snapflow/messages"
)

// maxParallelReads bounds the task states read at once.
const maxParallelReads = 16

// Restorable is a complete checkpoint whose objects all read back and
// verified (or, when Heads is set, whose states' heads did; see
// LoadLatestHeadsSince).
type Restorable struct {
	Manifest *messages.Manifest
	// States holds each task's state by task id.
	States map[string]*messages.TaskState
	// Heads says that States hold each task's state without the entries of
	// its key groups: every key group its handle indexes is listed, empty.
	// Read the entries with StreamKeyGroups from the manifest's handles.
	Heads bool
}

// unusable reports whether err makes one checkpoint unusable, rather than
// the store or the call.
func unusable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound))
}

// LoadLatest returns the newest usable complete checkpoint: one whose
// manifest reads and validates and all of whose state objects read back
// with the recorded size and CRC-32C and name their tasks. It reads the
// task states in parallel.
//
// A corrupt or missing object, or a corrupt manifest, makes a checkpoint
// unusable: LoadLatest logs it at Error level with the checkpoint id, the
// key and the cause, and tries the next older one. It returns (nil, nil)
// when the store holds no complete checkpoint of the job. When it holds
// complete checkpoints but none is usable, it returns an error wrapping
// ErrNoUsableCheckpoint (and each cause) that names every unusable
// checkpoint and why: starting from nothing would silently lose the state
// they hold. Other errors, such as an unreachable store or a done context,
// are returned as they are.
//
// LoadLatest is Load with no options.
func (c *Checkpoints) LoadLatest(ctx context.Context) (*Restorable, error) {
	return c.Load(ctx, LoadOptions{})
}

// LoadLatestSince is LoadLatest among the checkpoints whose id is at least
// first: it ignores the older ones, as if they did not exist, so it falls
// back only as far as first, and it returns (nil, nil) when no complete
// checkpoint has an id of first or more. A job started from a savepoint or
// a retained checkpoint passes the first id of its new history (see
// messages.Origin), so that recovery never restores a checkpoint of the
// history before it.
func (c *Checkpoints) LoadLatestSince(ctx context.Context, first uint64) (*Restorable, error) {
	return c.Load(ctx, LoadOptions{First: first})
}

// LoadLatestHeadsSince is LoadLatestSince, except that it reads only the
// head of each task's state (see ReadTaskStateHead), not the entries of
// its key groups, which are listed empty: the returned Restorable has
// Heads set. The checkpoint's manifest and heads are checked; its key
// groups are checked as a restore streams them (StreamKeyGroups). Should
// that find one missing or corrupt, MarkUnusable makes the next call pass
// over the checkpoint, as LoadLatestSince would have; once a restore has
// read everything, MarkUsable spares retention reading it again.
func (c *Checkpoints) LoadLatestHeadsSince(ctx context.Context, first uint64) (*Restorable, error) {
	return c.Load(ctx, LoadOptions{First: first, Heads: true})
}

// MarkUnusable records that complete checkpoint id proved unusable (a
// restore found an object missing or corrupt, err): LoadLatestSince and
// LoadLatestHeadsSince pass over it from now on, as over any unusable
// checkpoint. It lasts as long as c.
func (c *Checkpoints) MarkUnusable(id uint64, err error) {
	c.mu.Lock()
	if c.unusable == nil {
		c.unusable = map[uint64]error{}
	}
	c.unusable[id] = err
	for _, k := range c.verified[id] {
		delete(c.good, k)
	}
	delete(c.verified, id)
	delete(c.written, id)
	c.mu.Unlock()
}

// MarkUsable records that checkpoint id, whose manifest is m, read back
// whole and verified (a restore streamed all its key groups): retention
// does not read it again.
func (c *Checkpoints) MarkUsable(id uint64, m *messages.Manifest) {
	c.mu.Lock()
	_, bad := c.unusable[id]
	c.mu.Unlock()
	if !bad {
		c.markVerified(id, m)
	}
}

// ErrFallbackRefused is wrapped by the error of Load with NoFallback when
// the newest complete checkpoint is unusable.
var ErrFallbackRefused = errors.New("snapshots: the newest checkpoint is unusable, and falling back is refused")

// LoadOptions say which checkpoint Load returns.
type LoadOptions struct {
	// First ignores the checkpoints with lower ids (see LoadLatestSince).
	First uint64
	// Heads reads only the heads of the states (see LoadLatestHeadsSince).
	Heads bool
	// NoFallback refuses to fall back: when the newest complete checkpoint
	// is unusable (or a restore marked it so), Load fails with an error
	// wrapping ErrFallbackRefused and the cause, naming the object at
	// fault. A job whose sinks committed output at that checkpoint's
	// completion would commit it again from an older one.
	NoFallback bool
}

// Load returns the newest usable complete checkpoint as o says (see
// LoadLatest). Void checkpoints (see SealLease) are passed over, as if
// they were not complete. A checkpoint found unusable stays so for c: it
// is marked (MarkUnusable), and retention never counts it.
func (c *Checkpoints) Load(ctx context.Context, o LoadOptions) (*Restorable, error) {
	chks, err := c.scan(ctx)
	if err != nil {
		return nil, err
	}
	seals, err := c.fences(ctx)
	if err != nil {
		return nil, err
	}
	var bad []unusableCheckpoint
	for _, chk := range slices.Backward(chks) {
		if !chk.complete || chk.id < o.First {
			continue
		}
		c.mu.Lock()
		marked := c.unusable[chk.id]
		c.mu.Unlock()
		if marked != nil {
			if o.NoFallback {
				return nil, fmt.Errorf("snapshots: job %q: checkpoint %d is unusable (a restore found it so): %w: %w", c.job, chk.id, ErrFallbackRefused, marked)
			}
			c.log.ErrorContext(ctx, "snapshots: checkpoint unusable (a restore found it so), trying an older one",
				"checkpoint", chk.id, "err", marked)
			bad = append(bad, unusableCheckpoint{id: chk.id, err: marked})
			continue
		}
		r, key, err := c.load(ctx, chk.id, o.Heads, seals)
		switch {
		case err == nil:
			if !o.Heads {
				c.markVerified(chk.id, r.Manifest)
			}
			return r, nil
		case errors.Is(err, ErrVoid):
			c.log.WarnContext(ctx, "snapshots: passing over a void checkpoint", "checkpoint", chk.id, "err", err)
			continue
		case !unusable(ctx, err):
			return nil, err
		case key == ManifestKey(c.job, chk.id) && errors.Is(err, ErrNotFound):
			c.log.DebugContext(ctx, "snapshots: checkpoint deleted while loading", "checkpoint", chk.id)
			continue // no longer complete
		}
		c.MarkUnusable(chk.id, err)
		if o.NoFallback {
			return nil, fmt.Errorf("snapshots: job %q: checkpoint %d is unusable (%s): %w: %w", c.job, chk.id, key, ErrFallbackRefused, err)
		}
		c.log.ErrorContext(ctx, "snapshots: checkpoint unusable, trying an older one",
			"checkpoint", chk.id, "key", key, "err", err)
		bad = append(bad, unusableCheckpoint{id: chk.id, err: err})
	}
	if len(bad) > 0 {
		return nil, &noUsableError{job: c.job, bad: bad}
	}
	return nil, nil
}

// unusableCheckpoint is a complete checkpoint that LoadLatest could not use.
type unusableCheckpoint struct {
	id  uint64
	err error
}

// noUsableError is LoadLatest's error when no complete checkpoint is usable.
type noUsableError struct {
	job string
	bad []unusableCheckpoint // newest first
}

func (e *noUsableError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "snapshots: job %q: no usable checkpoint: ", e.job)
	if len(e.bad) == 1 {
		b.WriteString("its only complete checkpoint is unusable")
	} else {
		fmt.Fprintf(&b, "none of its %d complete checkpoints is usable", len(e.bad))
	}
	for i, u := range e.bad {
		sep := "; "
		if i == 0 {
			sep = ": "
		}
		fmt.Fprintf(&b, "%scheckpoint %d: %v", sep, u.id, u.err)
	}
	return b.String()
}

// Unwrap returns ErrNoUsableCheckpoint and the cause of each checkpoint.
func (e *noUsableError) Unwrap() []error {
	errs := []error{ErrNoUsableCheckpoint}
	for _, u := range e.bad {
		errs = append(errs, u.err)
	}
	return errs
}

// LoadCheckpoint returns checkpoint id, which must be complete and usable
// (see LoadLatest): unlike LoadLatest it never falls back to another
// checkpoint. A missing or corrupt manifest or state object gives an error
// wrapping ErrNotFound or ErrCorrupt that names the checkpoint and the key;
// an incomplete checkpoint is a missing manifest, and a void one an error
// wrapping ErrVoid.
func (c *Checkpoints) LoadCheckpoint(ctx context.Context, id uint64) (*Restorable, error) {
	seals, err := c.fences(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshots: load checkpoint %d of job %q: %w", id, c.job, err)
	}
	r, _, err := c.load(ctx, id, false, seals)
	if err != nil {
		return nil, fmt.Errorf("snapshots: load checkpoint %d of job %q: %w", id, c.job, err)
	}
	c.markVerified(id, r.Manifest)
	return r, nil
}

// load reads checkpoint id; on failure it also returns the key at fault.
// A manifest that seals void (see voidedBy) is an error wrapping ErrVoid.
func (c *Checkpoints) load(ctx context.Context, id uint64, heads bool, seals []*messages.LeaseSeal) (*Restorable, string, error) {
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return nil, ManifestKey(c.job, id), err
	}
	if s := voidedBy(seals, m); s != nil {
		return nil, ManifestKey(c.job, id), voidError(c.job, m, s)
	}
	return c.loadStates(ctx, m, heads)
}

// loadStates reads and verifies the states of manifest m; on failure it
// also returns the key at fault.
func (c *Checkpoints) loadStates(ctx context.Context, m *messages.Manifest, heads bool) (*Restorable, string, error) {
	tasks := m.GetTasks()
	states := make([]*messages.TaskState, len(tasks))
	if err := c.eachState(ctx, tasks, states, heads); err != nil {
		var se *stateError
		if errors.As(err, &se) {
			return nil, se.key, se.err
		}
		return nil, "", err
	}
	out := make(map[string]*messages.TaskState, len(tasks))
	for i, t := range tasks {
		out[t.GetTaskId()] = states[i]
	}
	return &Restorable{Manifest: m, States: out, Heads: heads}, "", nil
}

// stateError is the first failure of eachState, with its key.
type stateError struct {
	key string
	err error
}

func (e *stateError) Error() string { return e.err.Error() }
func (e *stateError) Unwrap() error { return e.err }

// eachState reads and verifies the tasks' states in parallel, storing state
// i in into[i] when into is not nil (verification alone keeps nothing). The
// first failure cancels the other reads and is returned as a *stateError.
func (c *Checkpoints) eachState(ctx context.Context, tasks []*messages.TaskStateEntry, into []*messages.TaskState, heads bool) error {
	return parallel.For(ctx, len(tasks), maxParallelReads, func(ctx context.Context, i int) error {
		st, err := c.readEntry(ctx, tasks[i], heads)
		if err != nil {
			return &stateError{key: faultyKey(tasks[i].GetState().GetKey(), err), err: err}
		}
		if into != nil {
			into[i] = st
		}
		return nil
	})
}

// faultyKey returns the key of the object that err, an error of reading
// the state under key, is about: another checkpoint's object when the
// state references it.
func faultyKey(key string, err error) string {
	var oe *objectError
	if errors.As(err, &oe) {
		return oe.key
	}
	return key
}

// readEntry reads one manifest entry's state and checks that it is the
// state of that task.
func (c *Checkpoints) readEntry(ctx context.Context, t *messages.TaskStateEntry, heads bool) (*messages.TaskState, error) {
	read := c.ReadTaskState
	if heads {
		read = c.ReadTaskStateHead
	}
	st, err := read(ctx, t.GetState())
	if err != nil {
		return nil, err
	}
	if !heads {
		if err := c.verifyDisk(ctx, t.GetState()); err != nil {
			return nil, err
		}
	}
	if heads && len(st.GetKeyGroups()) == 0 { // the key groups, listed empty
		for _, s := range t.GetState().GetKeyGroups() {
			st.KeyGroups = append(st.KeyGroups, &messages.KeyGroupState{KeyGroup: s.GetKeyGroup()})
		}
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
		if _, err := c.readEntry(ctx, t, false); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("snapshots: verify checkpoint %d: %w", id, err)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
