package diskstate

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// Task-local recovery: a task keeps its newest uploaded checkpoints of
// its database on the local disk, under
// <Dir>/local/<job>/<task>/<checkpoint id>, where a restore on this
// machine, by any incarnation of the job, finds them. A restore uses a
// local file only if it has the size and the CRC-32C that the manifest
// records; it downloads any other. The files are immutable (a table is
// never rewritten, a checkpoint's manifest is a copy), so one that
// verifies once stays good.

// localKeeps is how many checkpoints a task keeps locally.
const localKeeps = 3

// localRoot is the directory of job's local copies.
func (c Config) localRoot(job string) string {
	return filepath.Join(c.parent(), "local", sanitize(job))
}

// localTask is the directory of the local copies of one task.
func (c Config) localTask(job, task string) string {
	return filepath.Join(c.localRoot(job), sanitize(task))
}

// KeepLocal moves checkpoint ck, uploaded as checkpoint id, into the local
// copies of task of job, and removes the task's copies older than the
// newest few.
func (c Config) KeepLocal(job, task string, id uint64, ck *Checkpoint) error {
	dir := c.localTask(job, task)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("disk state: %w", err)
	}
	to := filepath.Join(dir, strconv.FormatUint(id, 10))
	if err := os.RemoveAll(to); err != nil {
		return fmt.Errorf("disk state: %w", err)
	}
	if err := os.Rename(ck.Dir, to); err != nil {
		return fmt.Errorf("disk state: keep checkpoint %d locally: %w", id, err)
	}
	ids := c.localIDs(dir)
	for len(ids) > localKeeps {
		if err := os.RemoveAll(filepath.Join(dir, strconv.FormatUint(ids[0], 10))); err != nil {
			return fmt.Errorf("disk state: %w", err)
		}
		ids = ids[1:]
	}
	return nil
}

// localIDs lists the checkpoints kept in dir, oldest first.
func (c Config) localIDs(dir string) []uint64 {
	entries, _ := os.ReadDir(dir)
	var ids []uint64
	for _, e := range entries {
		if id, err := strconv.ParseUint(e.Name(), 10, 64); err == nil && e.IsDir() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// TakeLocal puts file name, of size bytes with CRC-32C sum, into dir from
// the local copies of task of job (newest first) and reports whether it
// found one that verifies: it hard-links the copy (or copies it, across
// file systems) and checks what it put there.
func (c Config) TakeLocal(job, task, name string, size int64, sum uint32, dir string) (bool, error) {
	tdir := c.localTask(job, task)
	ids := c.localIDs(tdir)
	to := filepath.Join(dir, name)
	for i := len(ids) - 1; i >= 0; i-- {
		from := filepath.Join(tdir, strconv.FormatUint(ids[i], 10), name)
		fi, err := os.Stat(from)
		if err != nil || fi.Size() != size {
			continue
		}
		_ = os.Remove(to)
		// A table is immutable and can be shared; any other file may be
		// written to by a database opened on it, so it is copied.
		if !IsTable(name) || os.Link(from, to) != nil {
			if err := copyFile(from, to); err != nil {
				continue
			}
		}
		got, err := checksum(to)
		if err == nil && got == sum {
			return true, nil
		}
		if err := os.Remove(to); err != nil && !errors.Is(err, os.ErrNotExist) {
			return false, fmt.Errorf("disk state: %w", err)
		}
	}
	return false, nil
}

// RemoveLocal removes the local copies of job's tasks: the job has ended.
func (c Config) RemoveLocal(job string) error {
	if err := os.RemoveAll(c.localRoot(job)); err != nil {
		return fmt.Errorf("disk state: %w", err)
	}
	// The parent directories, when nothing else is in them.
	_ = os.Remove(filepath.Join(c.parent(), "local"))
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// checksum is the CRC-32C of the file at path, read in a stream.
func checksum(path string) (uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, f); err != nil {
		return 0, err
	}
	return h.Sum32(), nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
