package diskstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// A database fails when pebble reports a background error (a flush, a
// compaction or the loading of a table's statistics that failed, its
// directory's disk usage that cannot be read), a corrupt or missing file,
// or when a write, a read or a checkpoint returns an error, or finds its
// directory gone. The first error is its failure, for good: every call
// after returns it at once, the function given to OnFailure learns it,
// and the database's files take no more writes (see failFS), so that
// pebble's own goroutines, which retry a failed flush without end and
// hold writers while the memtables are full, finish and Close returns.
// The task's state comes back from its checkpoint, into a new database.

// ErrFailed is wrapped by the error of every call on a database that
// failed.
var ErrFailed = errors.New("disk state: the task's database failed")

// failure is a database's first error, once it failed.
type failure struct {
	dir  string
	err  atomic.Pointer[error]
	done chan struct{} // closed when err is set
	mu   sync.Mutex    // orders set and OnFailure
	fn   func(error)   // see OnFailure
	log  *throttledLogger
}

func newFailure(dir string, log *throttledLogger) *failure {
	return &failure{dir: dir, done: make(chan struct{}), log: log}
}

// get is the failure, nil while the database has not failed.
func (f *failure) get() error {
	if p := f.err.Load(); p != nil {
		return *p
	}
	return nil
}

// set makes err the failure unless there is one, and returns the failure.
func (f *failure) set(err error) error {
	f.mu.Lock()
	if p := f.err.Load(); p != nil {
		f.mu.Unlock()
		return *p
	}
	ferr := fmt.Errorf("%w: %s: %w", ErrFailed, f.dir, err)
	f.err.Store(&ferr)
	close(f.done)
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		fn(ferr)
	}
	return ferr
}

// OnFailure has fn called once with the database's failure when it fails,
// at once if it has: from any goroutine, pebble's among them, so fn must
// return at once (send a message, say). It replaces a function given
// before.
func (d *DB) OnFailure(fn func(error)) {
	d.fail.mu.Lock()
	d.fail.fn = fn
	err := d.fail.get()
	d.fail.mu.Unlock()
	if err != nil {
		fn(err)
	}
}

// Err is the database's failure, nil while it has not failed.
func (d *DB) Err() error { return d.fail.get() }

// failed is a call's error once the database has failed, or err made the
// failure: pebble's errors but for a key not found are the database's.
func (d *DB) failed(err error) error {
	if err != nil {
		return d.fail.set(err)
	}
	return d.fail.get()
}

// watch makes the database that opts open report its failure to f: it
// wraps opts' file system in a failFS, logs pebble's errors through f's
// throttled logger and makes its background errors failures.
func (f *failure) watch(opts *pebble.Options) {
	opts.FS = failFS{FS: opts.FS, f: f}
	opts.Logger = f.log
	opts.EventListener = &pebble.EventListener{
		BackgroundError: func(err error) {
			f.log.error("disk state: background error: " + err.Error())
			f.set(fmt.Errorf("background error: %w", err))
		},
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			f.log.error(fmt.Sprintf("disk state: file %s is corrupt: %v", info.Path, info.Details))
			f.set(fmt.Errorf("file %s is corrupt: %w", info.Path, info.Details))
		},
	}
}

// checkDir fails the database if its directory is gone.
func (d *DB) checkDir() error {
	if _, err := os.Stat(d.dir); err != nil {
		return d.fail.set(fmt.Errorf("the database's directory: %w", err))
	}
	return d.fail.get()
}

// failFS is a database's file system: once the database has failed, what
// it writes goes nowhere, and creating, linking, renaming and removing
// files succeed without doing it. pebble can then end the flush it
// retries, the writers waiting for it go on (and find the failure), and
// Close returns, whatever happened to the files.
type failFS struct {
	vfs.FS
	f *failure
}

func (fs failFS) failed() bool { return fs.f.err.Load() != nil }

func (fs failFS) wrap(f vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return failFile{File: f, fs: fs}, nil
}

func (fs failFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.failed() {
		return &discardFile{name: name}, nil
	}
	return fs.wrap(fs.FS.Create(name, c))
}

func (fs failFS) OpenReadWrite(name string, c vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	if fs.failed() {
		return &discardFile{name: name}, nil
	}
	return fs.wrap(fs.FS.OpenReadWrite(name, c, opts...))
}

func (fs failFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if fs.failed() {
		return &discardFile{name: newname}, nil
	}
	return fs.wrap(fs.FS.ReuseForWrite(oldname, newname, c))
}

func (fs failFS) OpenDir(name string) (vfs.File, error) {
	if fs.failed() {
		return &discardFile{name: name}, nil
	}
	return fs.wrap(fs.FS.OpenDir(name))
}

func (fs failFS) Link(oldname, newname string) error {
	if fs.failed() {
		return nil
	}
	return fs.FS.Link(oldname, newname)
}

func (fs failFS) Remove(name string) error {
	if fs.failed() {
		return nil
	}
	return fs.FS.Remove(name)
}

func (fs failFS) RemoveAll(name string) error {
	if fs.failed() {
		return nil
	}
	return fs.FS.RemoveAll(name)
}

func (fs failFS) Rename(oldname, newname string) error {
	if fs.failed() {
		return nil
	}
	return fs.FS.Rename(oldname, newname)
}

func (fs failFS) MkdirAll(dir string, perm os.FileMode) error {
	if fs.failed() {
		return nil
	}
	return fs.FS.MkdirAll(dir, perm)
}

func (fs failFS) GetDiskUsage(path string) (vfs.DiskUsage, error) {
	if fs.failed() {
		return vfs.DiskUsage{}, vfs.ErrUnsupported // pebble then reports no error
	}
	return fs.FS.GetDiskUsage(path)
}

func (fs failFS) Unwrap() vfs.FS { return fs.FS }

// failFile is a file of a database, opened before it failed: writes to it
// after go nowhere.
type failFile struct {
	vfs.File
	fs failFS
}

func (f failFile) Write(p []byte) (int, error) {
	if f.fs.failed() {
		return len(p), nil
	}
	return f.File.Write(p)
}

func (f failFile) WriteAt(p []byte, off int64) (int, error) {
	if f.fs.failed() {
		return len(p), nil
	}
	return f.File.WriteAt(p, off)
}

func (f failFile) Preallocate(off, n int64) error {
	if f.fs.failed() {
		return nil
	}
	return f.File.Preallocate(off, n)
}

// discardFile is a file created after its database failed: what is
// written to it goes nowhere, and it cannot be read.
type discardFile struct {
	name string
	size int64
}

var errDiscarded = errors.New("disk state: the file was written after its database failed")

func (f *discardFile) Close() error { return nil }

func (f *discardFile) Read([]byte) (int, error) { return 0, errDiscarded }

func (f *discardFile) ReadAt([]byte, int64) (int, error) { return 0, errDiscarded }

func (f *discardFile) Write(p []byte) (int, error) {
	f.size += int64(len(p))
	return len(p), nil
}

func (f *discardFile) WriteAt(p []byte, off int64) (int, error) {
	f.size = max(f.size, off+int64(len(p)))
	return len(p), nil
}

func (f *discardFile) Preallocate(int64, int64) error { return nil }

func (f *discardFile) Stat() (vfs.FileInfo, error) { return discardInfo{f.name, f.size}, nil }

func (f *discardFile) Sync() error { return nil }

func (f *discardFile) SyncTo(int64) (bool, error) { return true, nil }

func (f *discardFile) SyncData() error { return nil }

func (f *discardFile) Prefetch(int64, int64) error { return nil }

func (f *discardFile) Fd() uintptr { return vfs.InvalidFd }

// discardInfo is a discardFile's vfs.FileInfo.
type discardInfo struct {
	name string
	size int64
}

func (i discardInfo) Name() string           { return i.name }
func (i discardInfo) Size() int64            { return i.size }
func (i discardInfo) Mode() fs.FileMode      { return 0o644 }
func (i discardInfo) ModTime() time.Time     { return time.Time{} }
func (i discardInfo) IsDir() bool            { return false }
func (i discardInfo) Sys() any               { return nil }
func (i discardInfo) DeviceID() vfs.DeviceID { return vfs.DeviceID{} }
