package diskstate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

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

// Checkpoint takes a checkpoint of the database now, under name (a
// checkpoint id, say): BeginCheckpoint and Pending.Take at once. Remove
// it once it is read; Close removes those left.
func (d *DB) Checkpoint(name string) (*Checkpoint, error) {
	p, err := d.BeginCheckpoint(name)
	if err != nil {
		return nil, err
	}
	return p.Take()
}

// Pending is a checkpoint of a database begun and not yet taken: the
// database stays as it was at BeginCheckpoint until Take or Release,
// while the writes made meanwhile are held in memory (see
// BeginCheckpoint).
type Pending struct {
	d    *DB
	name string
	once sync.Once
	done chan struct{}
}

// ErrReleased is returned by Take after Release or a first Take.
var ErrReleased = errors.New("disk state: the pending checkpoint was already taken or released")

// BeginCheckpoint begins a checkpoint of the database as it is now, under
// name, in a moment: it copies nothing and flushes nothing. Until the
// Pending is taken or released, Apply holds the writes in an indexed
// batch that Get and Scan read through, so that nothing reaches the
// database; the batch is applied once the checkpoint is taken (or, when
// it grows to the memtable's size, Apply waits for that). It is called by
// the DB's goroutine; a checkpoint still pending is waited for first.
func (d *DB) BeginCheckpoint(name string) (*Pending, error) {
	if err := d.fail.get(); err != nil {
		return nil, err
	}
	if err := d.settle(true); err != nil {
		return nil, err
	}
	d.mu.RLock()
	closed := d.closed
	d.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	p := &Pending{d: d, name: name, done: make(chan struct{})}
	d.held, d.heldDone = d.db.NewIndexedBatch(), p.done
	return p, nil
}

// Take flushes the memtable and takes the checkpoint: the database as it
// was at BeginCheckpoint, in a directory of hard links. It is called
// once, from any goroutine (the upload's, say); the writes held meanwhile
// then reach the database. It returns the database's failure as soon as
// it fails, also while it waits for the flush.
func (p *Pending) Take() (c *Checkpoint, err error) {
	err = ErrReleased
	p.once.Do(func() {
		defer close(p.done)
		c, err = p.d.takeCheckpoint(p.name)
	})
	return c, err
}

// Release gives up the checkpoint if it was not taken; the writes held
// reach the database. It may be called more than once, and after Take.
func (p *Pending) Release() { p.once.Do(func() { close(p.done) }) }

// afterDirCheck, set by tests, runs in takeCheckpoint between the check
// of the directory and the flush.
var afterDirCheck func(*DB)

// takeCheckpoint flushes the memtable and takes a checkpoint of the
// database under name.
func (d *DB) takeCheckpoint(name string) (*Checkpoint, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return nil, ErrClosed
	}
	// A directory removed under the database goes unnoticed until a flush
	// or a read of a table not yet open: a checkpoint, which needs its
	// files, looks first (off the task's goroutine: a stat costs 6 µs).
	if err := d.checkDir(); err != nil {
		return nil, err
	}
	if afterDirCheck != nil {
		afterDirCheck(d)
	}
	// The WAL is off: what the memtable holds is in no file until flushed.
	// pebble retries a flush that fails without end: the failure ends the
	// wait.
	flushed, err := d.db.AsyncFlush()
	if err != nil {
		return nil, d.failed(fmt.Errorf("flush: %w", err))
	}
	select {
	case <-flushed:
	case <-d.fail.done:
	}
	if err := d.fail.get(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(d.checkpointsDir(), 0o755); err != nil {
		return nil, d.failed(fmt.Errorf("checkpoint: %w", err))
	}
	dir := filepath.Join(d.checkpointsDir(), sanitize(name))
	if err := os.RemoveAll(dir); err != nil { // a checkpoint of that name that failed
		return nil, d.failed(fmt.Errorf("checkpoint: %w", err))
	}
	if err := d.db.Checkpoint(dir); err != nil {
		return nil, d.failed(fmt.Errorf("checkpoint into %s: %w", dir, err))
	}
	if err := d.fail.get(); err != nil { // the files may not be whole
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, d.failed(fmt.Errorf("checkpoint: %w", err))
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

// settle applies the writes held for a pending checkpoint once it is
// taken or released; with wait, it waits for that, or for the database's
// failure (then the writes held are dropped).
func (d *DB) settle(wait bool) error {
	if d.held == nil {
		return nil
	}
	if d.scans > 0 { // a scan iterates the held writes: keep them until it ends
		if wait {
			return errors.New("disk state: a checkpoint or snapshot was asked for inside a scan")
		}
		return nil
	}
	if wait {
		select {
		case <-d.heldDone:
		case <-d.fail.done:
		}
	} else {
		select {
		case <-d.heldDone:
		case <-d.fail.done:
		default:
			return nil
		}
	}
	d.dropIters() // some may read through b
	b := d.held
	d.held, d.heldDone = nil, nil
	defer b.Close()
	if err := d.fail.get(); err != nil {
		return err
	}
	if err := d.db.Apply(b, d.wo); err != nil {
		return d.failed(fmt.Errorf("apply the writes held during a checkpoint: %w", err))
	}
	return d.fail.get()
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
	return scan(it, fn, nil)
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
