package snapshots

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// The on-disk state backend stores a task's database as the files of a
// checkpoint of it (messages.DiskCheckpoint), each as its own object, raw:
// "<job>/checkpoints/chk-<id>/e<epoch>/<task-id>.files/<name>". A file is
// immutable, so a later checkpoint of the task references the object of a
// file it still holds rather than storing it again; retention keeps an
// object for as long as a retained manifest references it.

// filesSuffix ends the directory of a task's files within a checkpoint.
const filesSuffix = ".files/"

// maxFileName bounds the name of a state file.
const maxFileName = 255

// StateFileKey returns the key of file name of the on-disk state of task
// taskID, stored for checkpoint id by incarnation epoch.
func StateFileKey(job string, id, epoch uint64, taskID, name string) string {
	return CheckpointPrefix(job, id) + epochDir(epoch) + taskID + filesSuffix + name
}

// StateFileCheckpoint returns the id of the checkpoint that stored the
// state file under key, a key of job's state files (StateFileKey).
func StateFileCheckpoint(job, key string) (uint64, bool) {
	id, _, ok := ParseStateFileKey(job, key)
	return id, ok
}

// ParseStateFileKey returns the checkpoint and the task that stored the
// state file under key, a key of job's state files (StateFileKey).
func ParseStateFileKey(job, key string) (id uint64, task string, ok bool) {
	id, name, ok := parseCheckpointKey(job, key)
	if !ok {
		return 0, "", false
	}
	_, task, _, ok = parseFileName(name)
	return id, task, ok
}

// validateFileName checks the name of a state file: a database's file
// name, of letters, digits, '.', '_' and '-'.
func validateFileName(name string) error {
	if name == "" || len(name) > maxFileName || name == "." || name == ".." {
		return fmt.Errorf("snapshots: state file name %q: must have 1 to %d characters and not be . or ..: %w", name, maxFileName, ErrInvalidKey)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Errorf("snapshots: state file name %q: %q is not a letter, digit, '.', '_' or '-': %w", name, r, ErrInvalidKey)
		}
	}
	return nil
}

// parseFileName splits the name of a state file object within its
// checkpoint, "<task-id>.files/<name>" or "e<epoch>/<task-id>.files/<name>",
// into the epoch (0 for the first form), the task id and the file's name.
func parseFileName(name string) (epoch uint64, task, file string, ok bool) {
	if dir, rest, nested := strings.Cut(name, "/"); nested && len(dir) == idDigits+1 && dir[0] == 'e' {
		e, err := strconv.ParseUint(dir[1:], 10, 64)
		if err != nil || e == 0 {
			return 0, "", "", false
		}
		epoch, name = e, rest
	}
	i := strings.Index(name, filesSuffix)
	if i <= 0 {
		return 0, "", "", false
	}
	task, file = name[:i], name[i+len(filesSuffix):]
	if strings.ContainsRune(task, '/') || validateFileName(file) != nil {
		return 0, "", "", false
	}
	return epoch, task, file, true
}

// PutStateFile stores data, the bytes of file name of task taskID's
// on-disk state database, for checkpoint id, by incarnation epoch (see
// StateFileKey), and returns the entry of the file that a
// messages.DiskCheckpoint lists.
func (c *Checkpoints) PutStateFile(ctx context.Context, id, epoch uint64, taskID, name string, data []byte) (*messages.StateFile, error) {
	if err := validateTaskID(taskID); err != nil {
		return nil, err
	}
	if err := validateFileName(name); err != nil {
		return nil, err
	}
	key := StateFileKey(c.job, id, epoch, taskID, name)
	if err := c.store.Put(ctx, key, data); err != nil {
		return nil, err
	}
	c.markGood(key)
	return &messages.StateFile{Name: name, Key: key, Size: uint64(len(data)), Crc32C: Checksum(data)}, nil
}

// ReadStateFile reads the object of state file f and checks it against
// f's size and checksum: a mismatch is an error wrapping ErrCorrupt, a
// missing object one wrapping ErrNotFound, both naming the object (which
// LoadLatest and the runtime's fallback report as the faulty one).
func (c *Checkpoints) ReadStateFile(ctx context.Context, f *messages.StateFile) ([]byte, error) {
	fail := func(err error) error {
		return &objectError{key: f.GetKey(), err: fmt.Errorf("snapshots: state file %s: %w", f.GetKey(), err)}
	}
	if err := validateKey(f.GetKey()); err != nil {
		return nil, fail(err)
	}
	data, err := c.store.Get(ctx, f.GetKey())
	switch {
	case err != nil:
		return nil, fail(err)
	case uint64(len(data)) != f.GetSize():
		return nil, fail(fmt.Errorf("%d bytes, the manifest says %d: %w", len(data), f.GetSize(), ErrCorrupt))
	case Checksum(data) != f.GetCrc32C():
		return nil, fail(fmt.Errorf("checksum %08x, the manifest says %08x: %w", Checksum(data), f.GetCrc32C(), ErrCorrupt))
	}
	return data, nil
}

// validateDisk checks the files of a disk checkpoint that a state of
// checkpoint id lists: each names an object of this job's files of a
// checkpoint up to id, under a valid name, once.
func (c *Checkpoints) validateDisk(id uint64, d *messages.DiskCheckpoint) error {
	if d == nil {
		return nil
	}
	if d.GetKeyGroupStart() > d.GetKeyGroupEnd() {
		return fmt.Errorf("disk state: key groups [%d,%d) are reversed", d.GetKeyGroupStart(), d.GetKeyGroupEnd())
	}
	names := make(map[string]bool, len(d.GetFiles()))
	for _, f := range d.GetFiles() {
		if err := validateFileName(f.GetName()); err != nil {
			return err
		}
		if names[f.GetName()] {
			return fmt.Errorf("disk state: file %q is listed twice", f.GetName())
		}
		names[f.GetName()] = true
		ref, name, ok := parseCheckpointKey(c.job, f.GetKey())
		_, _, file, isFile := parseFileName(name)
		switch {
		case validateKey(f.GetKey()) != nil || !ok || !isFile:
			return fmt.Errorf("disk state: file %q is stored as %s, which is not a state file of a checkpoint of job %q: %w", f.GetName(), f.GetKey(), c.job, ErrInvalidKey)
		case ref > id:
			return fmt.Errorf("disk state: file %q is stored in checkpoint %d, later than checkpoint %d: %w", f.GetName(), ref, id, ErrInvalidKey)
		case file != f.GetName():
			return fmt.Errorf("disk state: file %q is stored as %s, another file's object: %w", f.GetName(), f.GetKey(), ErrInvalidKey)
		}
	}
	return nil
}

// diskSize returns the bytes of the files of h's disk state, and those of
// them stored by the checkpoint h's own object belongs to.
func diskSize(h *messages.StateHandle) (total, own uint64) {
	dir := ""
	if i := strings.LastIndex(h.GetKey(), "/"+chkPrefix); i >= 0 && len(h.GetKey()) > i+1+len(chkPrefix)+idDigits {
		dir = h.GetKey()[:i+1+len(chkPrefix)+idDigits+1]
	}
	for _, f := range h.GetDisk().GetFiles() {
		total += f.GetSize()
		if dir != "" && strings.HasPrefix(f.GetKey(), dir) {
			own += f.GetSize()
		}
	}
	return total, own
}

// verifyDisk reads every file of h's disk state and checks it.
func (c *Checkpoints) verifyDisk(ctx context.Context, h *messages.StateHandle) error {
	for _, f := range h.GetDisk().GetFiles() {
		if _, err := c.ReadStateFile(ctx, f); err != nil {
			return err
		}
	}
	return nil
}
