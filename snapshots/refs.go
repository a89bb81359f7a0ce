package snapshots

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/messages"
)

// PutTaskStateRefs stores an incremental task state for checkpoint id. st
// holds the key groups the task stores again (those that changed) and its
// non-keyed parts, and is stored as PutTaskState stores a state; refs are
// the sections of its other key groups where earlier checkpoints of the
// job stored them, as Sections returns them from an earlier handle (Key
// set to the object each lies in).
//
// The returned handle indexes every key group of the state: st's own
// sections (an empty key) and copies of refs, in key-group order, so that
// a restore reads each key group from the one object that holds it
// (ReadTaskState, ReadKeyGroups, StreamKeyGroups). Its StateSize is its
// own size plus the lengths of refs. A manifest holding the handle makes
// Retain keep the objects refs point at.
//
// It refuses, before any write and with an error wrapping ErrInvalidKey, a
// ref whose key is empty or not the state key of a checkpoint of this job
// with an id below id (a savepoint's or another job's object, or a later
// checkpoint's), and, with an error naming the key group, a ref whose key
// group st also holds or that refs list twice. It does not read the
// objects refs point at: their checksums are checked when they are read.
//
// PutTaskState is PutTaskStateRefs without refs.
func (c *Checkpoints) PutTaskStateRefs(ctx context.Context, id uint64, st *messages.TaskState, refs []*messages.KeyGroupSection) (*messages.StateHandle, error) {
	return c.PutTaskStateDisk(ctx, id, st, refs, nil)
}

// PutTaskStateDisk is PutTaskStateRefs for a task whose on-disk state is
// disk, the files of its database (stored with PutStateFile, by this
// checkpoint or an earlier one): the handle carries disk, its StateSize
// counts the files, and a manifest holding it makes Retain keep their
// objects. It refuses, before any write and with an error wrapping
// ErrInvalidKey, a file whose key is not a state file of a checkpoint of
// this job up to id, or that does not hold the file of its name.
func (c *Checkpoints) PutTaskStateDisk(ctx context.Context, id uint64, st *messages.TaskState, refs []*messages.KeyGroupSection, disk *messages.DiskCheckpoint) (*messages.StateHandle, error) {
	if err := validateTaskID(st.GetTaskId()); err != nil {
		return nil, err
	}
	key := EpochStateKey(c.job, id, st.GetEpoch(), st.GetTaskId())
	if err := c.validateRefs(id, st, refs); err != nil {
		return nil, fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	if err := c.validateDisk(id, disk); err != nil {
		return nil, fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	// A state that references earlier ones is never inline: the next
	// incremental state builds on its object, and an inline state has
	// none, so every other checkpoint would be full.
	h, err := c.putState(ctx, key, st, len(refs) == 0 && disk == nil)
	if err != nil {
		return nil, err
	}
	if disk != nil {
		h.Disk = disk
		total, _ := diskSize(h)
		h.StateSize = h.GetSize() + total
	}
	if len(refs) == 0 {
		return h, nil
	}
	size := max(h.GetSize(), h.GetStateSize())
	for _, r := range refs {
		h.KeyGroups = append(h.KeyGroups, &messages.KeyGroupSection{
			KeyGroup: r.GetKeyGroup(), Offset: r.GetOffset(), Length: r.GetLength(), Crc32C: r.GetCrc32C(), Key: r.GetKey(),
		})
		size += r.GetLength()
	}
	sortSections(h.KeyGroups)
	h.StateSize = size
	return h, nil
}

// validateRefs checks the refs of an incremental state of checkpoint id
// (see PutTaskStateRefs).
func (c *Checkpoints) validateRefs(id uint64, st *messages.TaskState, refs []*messages.KeyGroupSection) error {
	if len(refs) == 0 {
		return nil
	}
	groups := make(map[uint32]string, len(st.GetKeyGroups())+len(refs))
	for _, g := range st.GetKeyGroups() {
		groups[g.GetKeyGroup()] = "the state"
	}
	for _, r := range refs {
		if err := c.validateRefKey(r.GetKey(), id); err != nil {
			return fmt.Errorf("key group %d: %w", r.GetKeyGroup(), err)
		}
		if r.GetOffset()+r.GetLength() < r.GetOffset() {
			return fmt.Errorf("key group %d referenced at bytes %d..+%d of %s: the end overflows", r.GetKeyGroup(), r.GetOffset(), r.GetLength(), r.GetKey())
		}
		if where, dup := groups[r.GetKeyGroup()]; dup {
			return fmt.Errorf("key group %d is referenced in %s but already in %s", r.GetKeyGroup(), r.GetKey(), where)
		}
		groups[r.GetKeyGroup()] = r.GetKey()
	}
	return nil
}

// validateRefKey checks that key, which a state of checkpoint below
// references, is the state key of an earlier checkpoint of c's job.
func (c *Checkpoints) validateRefKey(key string, below uint64) error {
	if key == "" {
		return fmt.Errorf("a referenced section names no object (an empty key): %w", ErrInvalidKey)
	}
	if err := validateKey(key); err != nil {
		return err
	}
	ref, name, ok := parseCheckpointKey(c.job, key)
	_, task, isState := parseStateName(name)
	switch {
	case !ok || !isState || validateTaskID(task) != nil:
		return fmt.Errorf("references %s, which is not the state of a checkpoint of job %q (only those may be referenced: savepoints are self-contained): %w", key, c.job, ErrInvalidKey)
	case ref >= below:
		return fmt.Errorf("references %s, of checkpoint %d, which is not earlier than checkpoint %d: %w", key, ref, below, ErrInvalidKey)
	}
	return nil
}

// sortSections sorts an index by key group.
func sortSections(idx []*messages.KeyGroupSection) {
	slices.SortStableFunc(idx, func(a, b *messages.KeyGroupSection) int { return cmp.Compare(a.GetKeyGroup(), b.GetKeyGroup()) })
}

// Sections returns copies of the sections of h's key-group index, each
// with its Key set to the object it lies in (h.Key for h's own sections):
// the refs that a later incremental state passes to PutTaskStateRefs for
// the key groups it did not change. ok is false when h cannot be
// referenced: nil, without an index, or inline (its bytes lie in a
// manifest, not in an object), so the next checkpoint must store those key
// groups again.
func Sections(h *messages.StateHandle) (secs []*messages.KeyGroupSection, ok bool) {
	if h == nil || !h.GetIndexed() || len(h.GetInline()) > 0 || h.GetKey() == "" {
		return nil, false
	}
	secs = make([]*messages.KeyGroupSection, len(h.GetKeyGroups()))
	for i, s := range h.GetKeyGroups() {
		secs[i] = &messages.KeyGroupSection{
			KeyGroup: s.GetKeyGroup(), Offset: s.GetOffset(), Length: s.GetLength(), Crc32C: s.GetCrc32C(), Key: objectKey(h, s),
		}
	}
	return secs, true
}

// StateSize returns the size of the whole state h points at: its own
// object's bytes plus those of the sections it references in earlier
// objects and of its disk state's files (StateHandle.state_size, or size
// when that is 0).
func StateSize(h *messages.StateHandle) uint64 {
	if n := h.GetStateSize(); n != 0 {
		return n
	}
	return h.GetSize()
}

// UploadedSize returns the bytes that storing h took in the store: its own
// object's size (0 for an inline state, which travels in the manifest)
// plus those of its disk state's files that its checkpoint stored.
func UploadedSize(h *messages.StateHandle) uint64 {
	_, own := diskSize(h)
	if len(h.GetInline()) > 0 {
		return own
	}
	return h.GetSize() + own
}

// referencedKeys returns the keys of the objects h references besides its
// own (sections with a key, and its disk state's files).
func referencedKeys(h *messages.StateHandle, into []string) []string {
	for _, s := range h.GetKeyGroups() {
		if k := s.GetKey(); k != "" && (len(into) == 0 || into[len(into)-1] != k) {
			into = append(into, k)
		}
	}
	for _, f := range h.GetDisk().GetFiles() {
		into = append(into, f.GetKey())
	}
	return into
}
