package diskstate

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint is a consistent copy of a database in a directory of its
// own, made of hard links to the database's immutable files and a copy of
// its manifest: taking one costs a flush of the memtable, never a copy of
// the state. It is read from another goroutine while the database goes on.
type Checkpoint struct {
	// Dir holds the files.
	Dir string
	// Files are the names of the files in Dir, sorted.
	Files []string
}

// checkpointsDir is the directory of d's checkpoints, beside its own.
func (d *DB) checkpointsDir() string { return d.dir + ".checkpoints" }

// Checkpoint flushes the memtable and takes a checkpoint of the database
// under name (a checkpoint id, say). Remove it once it is read; Close
// removes those left.
func (d *DB) Checkpoint(name string) (*Checkpoint, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil, ErrClosed
	}
	// The WAL is off: what the memtable holds is in no file until flushed.
	if err := d.db.Flush(); err != nil {
		return nil, fmt.Errorf("disk state: flush: %w", err)
	}
	if err := os.MkdirAll(d.checkpointsDir(), 0o755); err != nil {
		return nil, fmt.Errorf("disk state: %w", err)
	}
	dir := filepath.Join(d.checkpointsDir(), sanitize(name))
	if err := os.RemoveAll(dir); err != nil { // a checkpoint of that name that failed
		return nil, fmt.Errorf("disk state: %w", err)
	}
	if err := d.db.Checkpoint(dir); err != nil {
		return nil, fmt.Errorf("disk state: checkpoint %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("disk state: %w", err)
	}
	c := &Checkpoint{Dir: dir}
	for _, e := range entries {
		if e.Type().IsRegular() {
			c.Files = append(c.Files, e.Name())
		}
	}
	slices.Sort(c.Files)
	return c, nil
}

// Remove deletes the checkpoint's directory.
func (c *Checkpoint) Remove() error { return os.RemoveAll(c.Dir) }

// IsTable reports whether file name of a checkpoint is a table (an sstable):
// immutable, and named uniquely for the life of the database.
func IsTable(name string) bool { return filepath.Ext(name) == ".sst" }

// Reader reads a database that a checkpoint's files, restored into a
// directory, make up. It never writes to them.
type Reader struct{ db *pebble.DB }

// OpenReader opens the database in dir read-only.
func OpenReader(dir string) (*Reader, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: logger{}})
	if err != nil {
		return nil, fmt.Errorf("disk state: open the checkpoint in %s: %w", dir, err)
	}
	return &Reader{db: db}, nil
}

// Scan is DB.Scan on the restored database.
func (r *Reader) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	it, err := r.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("disk state: %w", err)
	}
	return scan(it, fn)
}

// Close closes the database; its directory stays.
func (r *Reader) Close() error { return r.db.Close() }

// PrepareRestore returns a new empty directory, beside d's own, to
// download a checkpoint's files into (a name per source); Close removes
// it.
func (d *DB) PrepareRestore(name string) (string, error) {
	dir := filepath.Join(d.checkpointsDir(), "restore-"+sanitize(name))
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("disk state: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("disk state: %w", err)
	}
	return dir, nil
}
