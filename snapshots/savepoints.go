package snapshots

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/snapflow/snapflow/messages"
)

var (
	// ErrInvalidSavepointName is wrapped by the errors about a savepoint
	// name that ValidateSavepointName refuses.
	ErrInvalidSavepointName = errors.New("snapshots: invalid savepoint name")
	// ErrSavepointExists is wrapped by the error of PutSavepointManifest
	// when the job already has a complete savepoint of that name: a
	// savepoint is never overwritten.
	ErrSavepointExists = errors.New("snapshots: savepoint exists")
)

// MaxSavepointNameLength is the longest savepoint name, in bytes, that
// ValidateSavepointName accepts.
const MaxSavepointNameLength = 128

// ValidateSavepointName returns nil when name can name a savepoint, and
// otherwise an error wrapping ErrInvalidSavepointName that names it and
// says why. A name is one segment of a store key, readable in a listing:
// not empty, at most MaxSavepointNameLength bytes of valid UTF-8, without
// '/', '\\', NUL or other control characters, not "." or "..", and not
// starting with the reserved ".tmp-".
func ValidateSavepointName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("snapshots: savepoint name %q %s: %w", name, why, ErrInvalidSavepointName)
	}
	switch {
	case name == "":
		return bad("is empty")
	case len(name) > MaxSavepointNameLength:
		return bad(fmt.Sprintf("is %d bytes long, more than %d", len(name), MaxSavepointNameLength))
	case !utf8.ValidString(name):
		return bad("is not valid UTF-8")
	case name == "." || name == "..":
		return bad(`is "." or ".."`)
	case strings.HasPrefix(name, tmpPrefix):
		return bad("starts with the reserved " + tmpPrefix)
	case strings.ContainsAny(name, `/\`):
		return bad(`contains a '/' or '\'`)
	case strings.ContainsFunc(name, unicode.IsControl):
		return bad("contains a NUL or other control character")
	}
	return nil
}

// PutSavepointState stores a task's state in savepoint name, as
// SavepointEpochStateKey(job, name, st.CheckpointId, st.Epoch, st.TaskId), and returns the handle that the
// savepoint's manifest records, as PutTaskState does for a checkpoint.
func (c *Checkpoints) PutSavepointState(ctx context.Context, name string, st *messages.TaskState) (*messages.StateHandle, error) {
	if err := ValidateSavepointName(name); err != nil {
		return nil, err
	}
	if err := validateTaskID(st.GetTaskId()); err != nil {
		return nil, err
	}
	return c.putState(ctx, SavepointEpochStateKey(c.job, name, st.GetCheckpointId(), st.GetEpoch(), st.GetTaskId()), st, true)
}

// PutSavepointManifest writes the manifest of savepoint m.Savepoint, which
// completes the savepoint. Call it only once every state it references is
// stored. The name must pass ValidateSavepointName, the job must be c's,
// the checkpoint id at least 1, the entries valid as for PutManifest, and
// every state must lie below SavepointPrefix(job, name): a savepoint is
// self-contained.
//
// A savepoint is never overwritten: when the job already has a complete
// savepoint of that name, PutSavepointManifest returns an error wrapping
// ErrSavepointExists and writes nothing. The manifest is created only
// where none is (Creator), so of two writers of one name at once, one
// gets that error.
//
// Its result is the truth about the savepoint, as for PutManifest: when the
// store's write fails, it reads the manifest back and returns nil when the
// manifest is in place, the write's error when it is absent, and an error
// wrapping ErrManifestInDoubt when that cannot be told. When c holds the
// job's lease, it checks the lease once the manifest is in place, as
// PutManifest does.
func (c *Checkpoints) PutSavepointManifest(ctx context.Context, m *messages.Manifest) error {
	name := m.GetSavepoint()
	if m != nil {
		if err := ValidateSavepointName(name); err != nil {
			return fmt.Errorf("snapshots: put savepoint manifest: %w", err)
		}
	}
	if err := c.validateSavepointManifest(m, name); err != nil {
		return fmt.Errorf("snapshots: put manifest of savepoint %q: %w", name, err)
	}
	if err := c.holderEpoch(m); err != nil {
		return fmt.Errorf("snapshots: put manifest of savepoint %q: %w", name, err)
	}
	key := SavepointManifestKey(c.job, name)
	exists, err := c.SavepointExists(ctx, name)
	if err != nil {
		return fmt.Errorf("snapshots: put savepoint %q of job %q: %w", name, c.job, err)
	}
	if exists {
		return fmt.Errorf("snapshots: put savepoint %q of job %q: its manifest %s is already there: %w",
			name, c.job, key, ErrSavepointExists)
	}
	sub := savepointOf(name)
	if err := c.putManifest(ctx, key, sub, m); err != nil {
		return err
	}
	return c.confirmHeld(ctx, sub)
}

// validateSavepointManifest checks that m is a manifest of savepoint name
// of c's job whose entries are valid and whose states all lie below the
// prefix of the savepoint's objects of m's checkpoint id.
func (c *Checkpoints) validateSavepointManifest(m *messages.Manifest, name string) error {
	if err := c.validateHead(m); err != nil {
		return err
	}
	if m.GetSavepoint() != name {
		return fmt.Errorf("savepoint %q, want %q", m.GetSavepoint(), name)
	}
	if err := c.validateEntries(m, 0); err != nil {
		return err
	}
	prefix := SavepointAttemptPrefix(c.job, name, m.GetCheckpointId())
	for _, t := range m.GetTasks() {
		if key := t.GetState().GetKey(); !strings.HasPrefix(key, prefix) {
			return fmt.Errorf("task %s: state %s lies outside the savepoint's objects of checkpoint %d (%s): a savepoint is self-contained, and holds the objects of the attempt that completed it",
				t.GetTaskId(), key, m.GetCheckpointId(), prefix)
		}
	}
	return nil
}

// SavepointExists reports whether the job has a complete savepoint called
// name: one whose manifest exists. It lists the key and reads no object.
func (c *Checkpoints) SavepointExists(ctx context.Context, name string) (bool, error) {
	if err := ValidateSavepointName(name); err != nil {
		return false, err
	}
	key := SavepointManifestKey(c.job, name)
	keys, err := c.store.List(ctx, key)
	if err != nil {
		return false, err
	}
	return slices.Contains(keys, key), nil
}

// ReadSavepointManifest reads and checks the manifest of savepoint name. It
// returns an error wrapping ErrNotFound when the savepoint is not complete,
// and one wrapping ErrCorrupt when the manifest does not decode or
// contradicts where it is stored (another job or savepoint name, a state
// outside the savepoint).
func (c *Checkpoints) ReadSavepointManifest(ctx context.Context, name string) (*messages.Manifest, error) {
	if err := ValidateSavepointName(name); err != nil {
		return nil, err
	}
	key := SavepointManifestKey(c.job, name)
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	m := new(messages.Manifest)
	if err := DecodeObject(data, KindManifest, m); err != nil {
		return nil, fmt.Errorf("snapshots: manifest %s: %w", key, err)
	}
	if err := c.validateSavepointManifest(m, name); err != nil {
		return nil, fmt.Errorf("snapshots: manifest %s: %w: %w", key, ErrCorrupt, err)
	}
	return m, nil
}

// LoadSavepoint returns savepoint name with every task's state, read in
// parallel and verified like the states of a checkpoint (size, CRC-32C,
// task id). Unlike LoadLatest it never falls back: the user named this
// savepoint, so a missing or corrupt object, manifest included, is an
// error wrapping ErrNotFound or ErrCorrupt that names the savepoint and
// the key. An incomplete savepoint is a missing manifest.
func (c *Checkpoints) LoadSavepoint(ctx context.Context, name string) (*Restorable, error) {
	m, err := c.ReadSavepointManifest(ctx, name)
	if err == nil {
		var r *Restorable
		if r, _, err = c.loadStates(ctx, m, false); err == nil {
			return r, nil
		}
	}
	return nil, fmt.Errorf("snapshots: load savepoint %q of job %q: %w", name, c.job, err)
}

// SavepointInfo describes one savepoint found in the store.
type SavepointInfo struct {
	Name string
	// Complete is true when the savepoint's manifest exists.
	Complete bool
	// Manifest is the savepoint's manifest when it is complete and its
	// manifest reads and validates; nil otherwise.
	Manifest *messages.Manifest
	// Objects counts the savepoint's keys, the manifest included.
	Objects int
	// Err is set when the manifest exists but is corrupt, or the name found
	// in the store is not a valid savepoint name.
	Err error
}

// Savepoints describes every savepoint of the job, complete or not, sorted
// by name, from one listing of SavepointsPrefix(job); it reads the
// manifests of the complete ones.
func (c *Checkpoints) Savepoints(ctx context.Context) ([]SavepointInfo, error) {
	keys, err := c.store.List(ctx, SavepointsPrefix(c.job))
	if err != nil {
		return nil, err
	}
	var out []SavepointInfo
	for _, k := range keys { // keys with a common prefix are contiguous
		name, object, ok := parseSavepointKey(c.job, k)
		if !ok {
			continue
		}
		if len(out) == 0 || out[len(out)-1].Name != name {
			out = append(out, SavepointInfo{Name: name})
		}
		last := &out[len(out)-1]
		last.Objects++
		last.Complete = last.Complete || object == manifestName
	}
	for i := range out {
		info := &out[i]
		if !info.Complete {
			continue
		}
		m, err := c.ReadSavepointManifest(ctx, info.Name)
		switch {
		case errors.Is(err, ErrCorrupt) || errors.Is(err, ErrInvalidSavepointName):
			info.Err = err
		case errors.Is(err, ErrNotFound) && ctx.Err() == nil:
			info.Complete = false // deleted since the listing
		case err != nil:
			return nil, err
		default:
			info.Manifest = m
		}
	}
	slices.SortFunc(out, func(a, b SavepointInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// VerifySavepoint re-reads every object of the complete savepoint name and
// returns the problems found, joined, or nil. An incomplete savepoint gives
// an error wrapping ErrNotFound.
func (c *Checkpoints) VerifySavepoint(ctx context.Context, name string) error {
	m, err := c.ReadSavepointManifest(ctx, name)
	if err != nil {
		return fmt.Errorf("snapshots: verify savepoint %q of job %q: %w", name, c.job, err)
	}
	var errs []error
	for _, t := range m.GetTasks() {
		if _, err := c.readEntry(ctx, t, false); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("snapshots: verify savepoint %q of job %q: %w", name, c.job, err)
			}
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("snapshots: verify savepoint %q of job %q: %w", name, c.job, errors.Join(errs...))
	}
	return nil
}

// DeleteSavepoint deletes savepoint name: its manifest first, so that the
// savepoint stops being complete before it loses any object, then every
// other object below SavepointPrefix(job, name). It deletes an incomplete
// savepoint too, which is how the runtime cleans up an aborted one. A
// savepoint with no object at all gives an error wrapping ErrNotFound.
// When c holds the job's lease, it checks it first.
func (c *Checkpoints) DeleteSavepoint(ctx context.Context, name string) error {
	if err := ValidateSavepointName(name); err != nil {
		return err
	}
	if err := c.writable(ctx); err != nil {
		return err
	}
	keys, err := c.store.List(ctx, SavepointPrefix(c.job, name))
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		return fmt.Errorf("snapshots: delete savepoint %q of job %q: %w: it has no object", name, c.job, ErrNotFound)
	}
	objects := len(keys)
	manifest := SavepointManifestKey(c.job, name)
	if err := c.store.Delete(ctx, manifest); err != nil { // even when not listed: it may have landed since
		return err
	}
	rest := slices.DeleteFunc(keys, func(k string) bool { return k == manifest })
	if err := deleteMany(ctx, c.store, rest); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "snapshots: savepoint deleted", "savepoint", name, "objects", objects)
	return nil
}

// DeleteSavepointAttempt deletes the state objects that a failed attempt at
// savepoint name, taken as checkpoint id, stored (under
// SavepointAttemptPrefix), and returns how many it deleted. It never
// touches the savepoint's manifest, nor the objects of another attempt, and
// refuses, with an error wrapping ErrSavepointExists, when the savepoint is
// complete with that id: the attempt did not fail. When c holds the
// job's lease, it checks the lease first and deletes only the objects of
// the holder's epochs and older ones: never another holder's.
func (c *Checkpoints) DeleteSavepointAttempt(ctx context.Context, name string, id uint64) (int, error) {
	if err := ValidateSavepointName(name); err != nil {
		return 0, err
	}
	if err := c.writable(ctx); err != nil {
		return 0, err
	}
	switch m, err := c.ReadSavepointManifest(ctx, name); {
	case err == nil && m.GetCheckpointId() == id:
		return 0, fmt.Errorf("snapshots: savepoint %q of job %q is complete as checkpoint %d: %w", name, c.job, id, ErrSavepointExists)
	case err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, ErrCorrupt):
		return 0, err
	}
	prefix := SavepointAttemptPrefix(c.job, name, id)
	keys, err := c.store.List(ctx, prefix)
	if err != nil {
		return 0, err
	}
	limit := c.maxDeletable()
	keys = slices.DeleteFunc(keys, func(k string) bool {
		e, _, _ := parseStateName(strings.TrimPrefix(k, prefix))
		return e > limit
	})
	if err := deleteMany(ctx, c.store, keys); err != nil {
		return 0, err
	}
	return len(keys), nil
}
