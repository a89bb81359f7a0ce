package snapshots

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Dir is a Store in a local directory, snapflow's embedded default. A key
// "a/b/c" is the file <root>/a/b/c.
//
// Put writes a temporary file next to the target, fsyncs it, renames it
// into place and fsyncs the directory, so an object is visible only when
// complete and survives a crash once Put has returned. Delete removes
// directories it leaves empty.
type Dir struct {
	root string
	// dirs orders creating directories for a Put (shared) against
	// removing empty ones after a Delete (exclusive), so that a Put never
	// loses the directory it has just made. Retries cover other processes.
	dirs sync.RWMutex
}

var _ Store = (*Dir)(nil)

// putAttempts bounds the retries when a Delete in another process removes
// the directory that a Put has just created.
const putAttempts = 8

// NewDir opens the directory store at path, creating the directory if
// needed, and checks that it is writable.
func NewDir(path string) (*Dir, error) {
	if path == "" {
		return nil, errors.New("snapshots: directory path is empty")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("snapshots: directory %s cannot be resolved: %w", path, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("snapshots: directory %s cannot be created: %w", abs, err)
	}
	d := &Dir{root: abs}
	if err := d.Check(context.Background()); err != nil {
		return nil, err
	}
	return d, nil
}

// Root returns the absolute path of the directory.
func (d *Dir) Root() string { return d.root }

// String returns "dir:" and the absolute path.
func (d *Dir) String() string { return "dir:" + d.root }

// Close does nothing; a Dir holds no resources.
func (d *Dir) Close() error { return nil }

// Check writes, fsyncs and removes a probe file in the directory.
func (d *Dir) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: check %s: %w", d, err)
	}
	notWritable := func(err error) error {
		return fmt.Errorf("snapshots: directory %s is not writable: %w", d.root, err)
	}
	f, err := os.CreateTemp(d.root, tmpPrefix+"check-*")
	if err != nil {
		return notWritable(err)
	}
	_, werr := f.Write([]byte("snapflow"))
	serr := f.Sync()
	cerr := f.Close()
	rerr := os.Remove(f.Name())
	if err := errors.Join(werr, serr, cerr, rerr); err != nil {
		return notWritable(err)
	}
	return nil
}

func (d *Dir) path(key string) string {
	return filepath.Join(d.root, filepath.FromSlash(key))
}

// Put atomically writes data under key.
func (d *Dir) Put(ctx context.Context, key string, data []byte) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	if err := d.write(ctx, key, data, false); err != nil {
		return fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	return nil
}

// write writes data to a temporary file next to key's, fsyncs it and moves
// it into place: renamed over any object there, or, with create, linked
// to key, which fails with an error wrapping ErrExists when key holds an
// object.
func (d *Dir) write(ctx context.Context, key string, data []byte, create bool) error {
	target := d.path(key)
	dir := filepath.Dir(target)
	var (
		f       *os.File
		created []string
		err     error
	)
	for range putAttempts {
		var c []string
		c, f, err = d.createTemp(dir)
		created = append(created, c...)
		if !errors.Is(err, fs.ErrNotExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	tmp := f.Name()
	if err := writeSync(f, data); err != nil {
		return errors.Join(err, removeIfExists(tmp))
	}
	if err := ctx.Err(); err != nil {
		return errors.Join(err, removeIfExists(tmp))
	}
	if create {
		err := os.Link(tmp, target)
		if rerr := removeIfExists(tmp); err == nil && rerr != nil {
			return rerr
		}
		switch {
		case errors.Is(err, fs.ErrExist):
			return ErrExists
		case err != nil:
			return err
		}
	} else if err := os.Rename(tmp, target); err != nil {
		return errors.Join(err, removeIfExists(tmp))
	}
	for _, p := range append(created, dir) {
		if err := syncDir(p); err != nil {
			return err
		}
	}
	return nil
}

// createTemp creates dir as needed and a temporary file in it. Once the file
// exists, a Delete can no longer remove the directory.
func (d *Dir) createTemp(dir string) ([]string, *os.File, error) {
	d.dirs.RLock()
	defer d.dirs.RUnlock()
	created, err := d.mkdirs(dir)
	if err != nil {
		return created, nil, err
	}
	f, err := os.CreateTemp(dir, tmpPrefix+"*")
	return created, f, err
}

// mkdirs creates dir and its missing parents below the root and returns the
// directories whose entries changed and so must be fsynced.
func (d *Dir) mkdirs(dir string) ([]string, error) {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil, nil
	}
	rel, err := filepath.Rel(d.root, dir)
	if err != nil {
		return nil, err
	}
	var changed []string
	cur := d.root
	for seg := range strings.SplitSeq(rel, string(filepath.Separator)) {
		parent := cur
		cur = filepath.Join(cur, seg)
		err := os.Mkdir(cur, 0o755)
		switch {
		case err == nil:
			changed = append(changed, parent)
		case !errors.Is(err, fs.ErrExist):
			return changed, err
		}
	}
	return changed, nil
}

func writeSync(f *os.File, data []byte) error {
	_, werr := f.Write(data)
	var serr error
	if werr == nil {
		serr = f.Sync()
	}
	return errors.Join(werr, serr, f.Close())
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Get reads the object under key.
func (d *Dir) Get(ctx context.Context, key string) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	data, err := os.ReadFile(d.path(key))
	if err != nil {
		if missing(err) {
			return nil, fmt.Errorf("snapshots: get %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	return data, nil
}

// missing reports whether a file error means that no object is there: the
// file, or a parent, does not exist, a parent is a file, or it is a directory.
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || isNotDirOrIsDir(err)
}

// List walks the directory below the prefix's last '/' and returns the
// keys that start with prefix, skipping temporary files.
func (d *Dir) List(ctx context.Context, prefix string) ([]string, error) {
	if err := validatePrefix(prefix); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: list %s: %w", prefix, err)
	}
	start := d.root
	if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
		start = d.path(prefix[:i])
	}
	var keys []string
	err := filepath.WalkDir(start, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if missing(err) {
				return nil // gone since, or never there
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tmpPrefix) {
			return nil
		}
		rel, err := filepath.Rel(d.root, p)
		if err != nil {
			return err
		}
		if key := filepath.ToSlash(rel); strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshots: list %s: %w", prefix, err)
	}
	slices.Sort(keys)
	return keys, nil
}

// Delete removes the object under key and then the directories that it
// leaves empty, up to but not including the root.
func (d *Dir) Delete(ctx context.Context, key string) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("snapshots: delete %s: %w", key, err)
	}
	if err := d.delete(key); err != nil {
		return fmt.Errorf("snapshots: delete %s: %w", key, err)
	}
	return nil
}

func (d *Dir) delete(key string) error {
	p := d.path(key)
	fi, err := os.Lstat(p)
	switch {
	case err != nil && missing(err):
		return nil
	case err != nil:
		return err
	case fi.IsDir():
		return nil // a directory is not an object
	}
	if err := os.Remove(p); err != nil {
		if missing(err) {
			return nil
		}
		return err
	}
	dir := filepath.Dir(p)
	if err := syncDir(dir); err != nil && !missing(err) {
		return err
	}
	d.dirs.Lock()
	defer d.dirs.Unlock()
	for ; dir != d.root && strings.HasPrefix(dir, d.root); dir = filepath.Dir(dir) {
		if err := os.Remove(dir); err != nil {
			if errors.Is(err, fs.ErrExist) || missing(err) {
				return nil // not empty (ENOTEMPTY is ErrExist), or gone
			}
			return err
		}
	}
	return nil
}

// GetRange implements RangeReader: it reads length bytes at offset of the
// object's file.
func (d *Dir) GetRange(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := validateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	f, err := os.Open(d.path(key))
	if err != nil {
		if missing(err) {
			return nil, fmt.Errorf("snapshots: get %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	defer f.Close()
	if offset < 0 || length < 0 {
		return nil, fmt.Errorf("snapshots: get %s bytes %d..%d: %w", key, offset, offset+length, ErrCorrupt)
	}
	buf := make([]byte, length)
	if _, err := f.ReadAt(buf, offset); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("snapshots: get %s bytes %d..%d: the object is shorter: %w", key, offset, offset+length, ErrCorrupt)
		}
		return nil, fmt.Errorf("snapshots: get %s: %w", key, err)
	}
	return buf, nil
}
