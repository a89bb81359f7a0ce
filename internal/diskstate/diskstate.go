package diskstate

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Config configures the databases of the on-disk state backend.
type Config struct {
	// Dir is the parent directory of the tasks' databases; "" means
	// snapflow/state under the user's cache directory (see defaultDir).
	Dir string
	// CacheBytes is the memory that the task databases of the process
	// configured with the same size (of every job) share to cache reads; 0
	// means DefaultCacheBytes(), a quarter of the process's memory. Three
	// quarters are pebble's block cache; a quarter holds values the tasks
	// wrote or read lately, decoded (see DB.KeptShare). The memtables come
	// on top of it (see MemTableBytes).
	CacheBytes int64
	// MemTableBytes is the size of each task's memtable, the writes kept in
	// memory before they are flushed to a file; 0 means
	// DefaultMemTableBytes. A task's database holds two memtables (the one
	// written and one kept for reuse), three while one is flushed.
	MemTableBytes int64
	// Logger takes the database's messages (nil: discarded).
	Logger *slog.Logger
	// NoLocalRecovery turns task-local recovery off: a restore then reads
	// every file from the snapshot store, never a local copy (see
	// KeepLocal).
	NoLocalRecovery bool
}

const (
	// DefaultMemTableBytes is the memtable per task when Config sets none.
	DefaultMemTableBytes = 16 << 20
	// MaxKeyGroups is the largest max parallelism whose key groups fit the
	// key layout.
	MaxKeyGroups = 1 << 16
)

// Check refuses a configuration that cannot work, naming the field.
func (c Config) Check() error {
	switch {
	case c.CacheBytes < 0:
		return fmt.Errorf("disk state: CacheBytes %d is negative", c.CacheBytes)
	case c.CacheBytes > 0 && c.CacheBytes < 1<<20:
		return fmt.Errorf("disk state: CacheBytes %d is below 1 MiB", c.CacheBytes)
	case c.MemTableBytes < 0:
		return fmt.Errorf("disk state: MemTableBytes %d is negative", c.MemTableBytes)
	case c.MemTableBytes > 0 && c.MemTableBytes < 1<<20:
		return fmt.Errorf("disk state: MemTableBytes %d is below 1 MiB", c.MemTableBytes)
	}
	return nil
}

// parent returns the directory the databases go under.
func (c Config) parent() string {
	if c.Dir != "" {
		return c.Dir
	}
	return defaultDir()
}

// defaultDir is the parent directory of the tasks' databases when Config
// sets none: snapflow/state under the user's cache directory
// (os.UserCacheDir: $XDG_CACHE_HOME or ~/.cache on Linux,
// ~/Library/Caches on macOS), or, where there is none or it cannot be
// created, snapflow-state under the system's temporary directory. It is
// chosen once per process. The temporary directory is not the first
// choice: cleaners remove what has not been touched there for days (a
// table of a long job, read only through a file kept open), and it is
// often a tmpfs, in memory, which state larger than memory cannot use.
var defaultDir = sync.OnceValue(chooseDefaultDir)

func chooseDefaultDir() string {
	if cache, err := os.UserCacheDir(); err == nil {
		dir := filepath.Join(cache, "snapflow", "state")
		if os.MkdirAll(dir, 0o755) == nil {
			return dir
		}
	}
	return filepath.Join(os.TempDir(), "snapflow-state")
}

// DB is one task incarnation's database.
type DB struct {
	db  *pebble.DB
	dir string
	cfg Config
	wo  *pebble.WriteOptions
	id  uint64
	// fail holds the database's failure (see failure.go); log is its
	// logger, which throttles pebble's errors.
	fail *failure
	log  *throttledLogger
	// cache is the process's block cache the database uses, shared is
	// its entry, and releaseCache gives it back (see acquireCache).
	cache        *pebble.Cache
	shared       *sharedCache
	releaseCache func()
	// adopted counts the times the database's content was replaced
	// (Adopt, Ingest); gets the point reads (Get).
	adopted, gets uint64

	// mu guards closed against the snapshots' readers: Close takes it
	// for writing, a snapshot being read holds it for reading. smu guards
	// snaps, so that taking a snapshot never waits for a read.
	mu     sync.RWMutex
	closed bool
	smu    sync.Mutex
	snaps  map[*Snapshot]struct{}

	// held takes the writes while a checkpoint is pending (nil: none),
	// until heldDone is closed; see BeginCheckpoint. The DB's goroutine
	// owns both.
	held     *pebble.Batch
	heldDone chan struct{}
	// scans counts the scans under way (a scan's function may read,
	// write and scan again): the held writes, which a scan may be
	// iterating, are neither applied nor closed until they end.
	scans int
	// iters are iterators kept for reuse, made at gen (bumped by every
	// write, and when held writes are applied) over held as it is now;
	// see Iter. version counts the writes (see Version).
	iters   []*Iter
	gen     uint64
	version uint64
}

// ErrClosed is returned by a snapshot read after its DB was closed.
var ErrClosed = errors.New("disk state: the task's database is closed")

// Open creates a database in a new directory under the configured parent;
// name (the job and task) starts the directory's name, so that a person
// can tell whose it is.
func Open(c Config, name string) (*DB, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(c.parent(), 0o755); err != nil {
		return nil, fmt.Errorf("disk state: %w", err)
	}
	dir, err := os.MkdirTemp(c.parent(), sanitize(name)+"-")
	if err != nil {
		return nil, fmt.Errorf("disk state: %w", err)
	}
	log := &throttledLogger{l: c.Logger, dir: dir, t: newThrottle(logEvery, time.Now)}
	fail := newFailure(dir, log)
	sc, release := acquireCache(c.cacheBytes(), c.memTableBytes())
	opts := c.options(sc.cache)
	fail.watch(opts)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		release()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("disk state: open %s: %w", dir, err)
	}
	return &DB{db: db, dir: dir, cfg: c, wo: pebble.NoSync, id: uint64(opened.Add(1)), fail: fail, log: log, snaps: map[*Snapshot]struct{}{},
		cache: sc.cache, shared: sc, releaseCache: release}, nil
}

// cacheBytes is the size of the block cache the databases share.
func (c Config) cacheBytes() int64 { return cmpOr(c.CacheBytes, DefaultCacheBytes()) }

// memTableBytes is the size of a database's memtable.
func (c Config) memTableBytes() int64 { return cmpOr(c.MemTableBytes, DefaultMemTableBytes) }

// options are the options of a task's database, with cache as its block
// cache (pebble.Open takes a reference of its own).
func (c Config) options(cache *pebble.Cache) *pebble.Options {
	opts := &pebble.Options{
		Cache:        cache,
		DisableWAL:   true, // the checkpoint is the durable copy
		MemTableSize: uint64(c.memTableBytes()),
		Logger:       logger{c.Logger},
		FS:           noSync{vfs.Default},
		// A checkpoint stores the tables that are new since its base. Keys
		// are key-group prefixed and the key groups of a task's writes
		// are spread over its range, so every flushed table overlaps the
		// whole of the level below, and each compaction of level 0 writes
		// the task's whole state anew: a checkpoint after one stores it
		// all. Compacting level 0 only once it holds 32 tables makes that
		// 1/32 of the state per checkpoint, for reads that look at up to
		// 32 more tables' Bloom filters (measured on 512 keys of 256 KiB,
		// 1% written per checkpoint: 8.9% of the state stored per
		// checkpoint with pebble's default of 4, 6.5% with 16, 3.6% with
		// 32).
		L0CompactionThreshold: 32,
		L0StopWritesThreshold: 128,
		// Every checkpoint stores the manifest whole: rotate it small.
		MaxManifestFileSize: 1 << 20,
	}
	// State reads are point reads, many of keys not yet stored: a Bloom
	// filter per file spares reading a block of every file a key is not in.
	// An index of one level up to 256 KiB (pebble's default makes two
	// levels past 4 KiB, from tables of about 1 MiB on) spares a point read
	// one block of a table that may hold the key: 4.3 blocks per read
	// against 5.6, measured by BenchmarkPointReads.
	for i := range opts.Levels {
		opts.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
		opts.Levels[i].IndexBlockSize = 256 << 10
	}
	if testOptions != nil {
		testOptions(opts)
	}
	return opts
}

// testOptions, when set (by tests), adjusts the options of every database
// opened.
var testOptions func(*pebble.Options)

// opened counts the databases Open made in this process.
var opened atomic.Int64

// Opened is the number of databases Open has made in this process: tests
// check with it that state went to disk.
func Opened() int64 { return opened.Load() }

func cmpOr(v, def int64) int64 {
	if v > 0 {
		return v
	}
	return def
}

// sanitize keeps the letters, digits, '-', '_' and '.' of name.
func sanitize(name string) string {
	name = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, name)
	if len(name) > 64 {
		name = name[:64]
	}
	return name
}

// Adopt makes the checkpoint whose files are in dir (see PrepareRestore)
// the database, taking the files over: a restore without a copy of the
// state. The database must hold nothing that matters yet, and no snapshot
// or checkpoint of it may be under way; batches made before belong to the
// database replaced (make new ones). A failure leaves it closed.
func (d *DB) Adopt(dir string) error {
	if d.held != nil {
		return errors.New("disk state: adopt while a checkpoint is pending")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if err := d.fail.get(); err != nil {
		return err
	}
	fail := func(err error) error {
		d.closed = true
		d.releaseCache()
		_ = os.RemoveAll(d.dir)
		_ = os.RemoveAll(d.checkpointsDir())
		return fmt.Errorf("disk state: adopt the checkpoint in %s: %w", dir, err)
	}
	d.dropIters()
	d.version++
	if err := d.db.Close(); err != nil {
		return fail(err)
	}
	if err := os.RemoveAll(d.dir); err != nil {
		return fail(err)
	}
	if err := os.Rename(dir, d.dir); err != nil {
		return fail(err)
	}
	opts := d.cfg.options(d.cache)
	d.fail.watch(opts)
	db, err := pebble.Open(d.dir, opts)
	if err != nil {
		return fail(err)
	}
	d.db = db
	d.adopted++
	return nil
}

// Gets is the number of point reads (Get) the database has served.
func (d *DB) Gets() uint64 { return d.gets }

// Generation changes whenever the database's content is replaced other
// than by writes (Adopt, Ingest), so that what a task keeps of it in memory can be
// dropped.
func (d *DB) Generation() uint64 { return d.adopted }

// KeptShare is how many bytes of decoded values the database's task may
// keep in memory (counted as their stored keys and values and a fixed
// part per entry; see Config.CacheBytes): a quarter of CacheBytes, shared
// equally by the databases open on the same block cache.
func (d *DB) KeptShare() int64 { return d.shared.keptShare() }

// ID tells the databases Open made in this process apart.
func (d *DB) ID() uint64 { return d.id }

// Dir is the database's directory.
func (d *DB) Dir() string { return d.dir }

// Get appends the value of key to dst and reports whether key is present.
func (d *DB) Get(dst, key []byte) ([]byte, bool, error) {
	d.gets++
	var v []byte
	var closer io.Closer
	var err error
	if err := d.fail.get(); err != nil {
		return dst, false, err
	}
	if d.held != nil {
		if err := d.settle(false); err != nil {
			return dst, false, err
		}
	}
	if d.held != nil {
		v, closer, err = d.held.Get(key)
	} else {
		v, closer, err = d.db.Get(key)
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return dst, false, nil
	}
	if err != nil {
		return dst, false, d.failed(fmt.Errorf("read: %w", err))
	}
	dst = append(dst, v...)
	if err := closer.Close(); err != nil {
		return dst, false, d.failed(fmt.Errorf("read: %w", err))
	}
	return dst, true, nil
}

// Batch gathers writes that Apply makes at once.
type Batch struct{ b *pebble.Batch }

// NewBatch returns an empty batch.
func (d *DB) NewBatch() *Batch { return &Batch{b: d.db.NewBatch()} }

// Set writes key's value; the batch copies both.
func (b *Batch) Set(key, value []byte) error { return b.b.Set(key, value, nil) }

// Delete removes key.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(key, nil) }

// Len is the number of bytes the batch holds.
func (b *Batch) Len() int { return b.b.Len() }

// Empty reports whether the batch holds no write.
func (b *Batch) Empty() bool { return b.b.Empty() }

// Apply writes b and makes it empty for reuse.
func (d *DB) Apply(b *Batch) error {
	if b.b.Empty() {
		return nil
	}
	if err := d.fail.get(); err != nil {
		return err
	}
	if err := d.settle(false); err != nil {
		return err
	}
	d.dropIters()
	d.version++
	if d.held != nil { // a checkpoint is pending: hold the writes
		if err := d.held.Apply(b.b, nil); err != nil {
			return fmt.Errorf("disk state: %w", err)
		}
		b.b.Reset()
		if int64(d.held.Len()) < d.cfg.memTableBytes() || d.scans > 0 {
			return nil // within the bound, or a scan holds them
		}
		return d.settle(true) // held long enough: wait for the checkpoint
	}
	if err := d.db.Apply(b.b, d.wo); err != nil {
		return d.failed(fmt.Errorf("write: %w", err))
	}
	b.b.Reset()
	return d.fail.get() // a write held by a failed flush ends once it failed
}

// Scan calls fn for every key in [lower, upper) with its value, in key
// order; the slices are valid only during the call. fn returning
// errStop (see Stop) ends the scan without an error.
func (d *DB) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	it, err := d.NewIter(lower, upper)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		var v []byte
		if v, err = it.Value(); err != nil {
			break
		}
		if err = fn(it.Key(), v); err != nil {
			break
		}
	}
	if errors.Is(err, Stop) {
		err = nil
	}
	if cerr := it.Close(); err == nil {
		err = cerr
	}
	return err
}

// Iter iterates over the keys of a range of the database in key order,
// through the writes held for a pending checkpoint (see BeginCheckpoint).
// It sees the database as it was when NewIter returned it. Close returns
// it to the DB, which reuses it for the next range while nothing is
// written: a range read then costs a seek, not a new iterator.
type Iter struct {
	d    *DB
	it   *pebble.Iterator
	held *pebble.Batch // the held writes it reads through (nil: none)
	gen  uint64        // d.gen when it was made
}

// NewIter returns an iterator over [lower, upper) (nil: unbounded),
// unpositioned; the bounds may be changed once it returns. The DB's
// goroutine calls it, and Close when done: until then the writes held
// for a pending checkpoint are kept (see Scan).
func (d *DB) NewIter(lower, upper []byte) (*Iter, error) {
	if err := d.fail.get(); err != nil {
		return nil, err
	}
	if err := d.settle(false); err != nil {
		return nil, err
	}
	var it *Iter
	if n := len(d.iters); n > 0 {
		it, d.iters = d.iters[n-1], d.iters[:n-1]
		if it.gen == d.gen && it.held == d.held {
			it.it.SetBounds(lower, upper)
		} else { // a checkpoint began since
			_ = it.it.Close() // unused since Close, which reported its error
			it = nil
		}
	}
	if it == nil {
		it = &Iter{d: d, held: d.held, gen: d.gen}
		var err error
		if d.held != nil {
			it.it, err = d.held.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		} else {
			it.it, err = d.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		}
		if err != nil {
			return nil, d.failed(fmt.Errorf("scan: %w", err))
		}
	}
	d.scans++
	return it, nil
}

// First moves to the range's first key and reports whether there is one.
func (i *Iter) First() bool { return i.it.First() }

// SeekGE moves to the first key at or after key within the range.
func (i *Iter) SeekGE(key []byte) bool { return i.it.SeekGE(key) }

// Next moves to the next key and reports whether there is one.
func (i *Iter) Next() bool { return i.it.Next() }

// Key is the current key, valid until the iterator moves.
func (i *Iter) Key() []byte { return i.it.Key() }

// Value is the current key's value, valid until the iterator moves.
func (i *Iter) Value() ([]byte, error) {
	v, err := i.it.ValueAndErr()
	if err != nil {
		return nil, i.d.failed(fmt.Errorf("scan: %w", err))
	}
	return v, nil
}

// Close ends the iteration and reports an error the iterator met; the
// iterator must not be used after.
func (i *Iter) Close() error {
	d := i.d
	d.scans--
	err := i.it.Error()
	if err == nil && i.gen == d.gen && i.held == d.held && len(d.iters) < maxIters && !d.closed {
		d.iters = append(d.iters, i)
		return nil
	}
	if cerr := i.it.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return d.failed(fmt.Errorf("scan: %w", err))
	}
	return nil
}

// Version changes whenever what a read may return changes: at every write
// (Apply, also of writes held for a checkpoint) and at Adopt; the held
// writes reaching the database change nothing a read returns. Callers
// that keep what they read compare it to tell whether that is still what
// is stored.
func (d *DB) Version() uint64 { return d.version }

// maxIters bounds the iterators a DB keeps for reuse: one per level of
// nested range reads.
const maxIters = 4

// dropIters closes the iterators kept for reuse: the database or the held
// writes change, and an iterator sees them as they were when it was made.
func (d *DB) dropIters() {
	d.gen++
	for _, it := range d.iters {
		_ = it.it.Close() // unused since Close, which reported its error
	}
	clear(d.iters)
	d.iters = d.iters[:0]
}

// Stop, returned by a scan's function, ends the scan early.
var Stop = errors.New("stop the scan")

// scan calls fn for every entry of it and closes it; an error of the
// iterator's (not fn's) is the failure of f's database (nil: none).
func scan(it *pebble.Iterator, fn func(key, value []byte) error, f *failure) error {
	var err, ierr error
	for ok := it.First(); ok; ok = it.Next() {
		var v []byte
		if v, ierr = it.ValueAndErr(); ierr != nil {
			break
		}
		if err = fn(it.Key(), v); err != nil {
			break
		}
	}
	if errors.Is(err, Stop) {
		err = nil
	}
	if err == nil && ierr == nil {
		ierr = it.Error()
	}
	if cerr := it.Close(); ierr == nil && cerr != nil {
		ierr = cerr
	}
	switch {
	case err != nil:
		return err
	case ierr == nil:
		return nil
	case f != nil:
		return f.set(fmt.Errorf("scan: %w", ierr))
	}
	return fmt.Errorf("disk state: %w", ierr)
}

// Snapshot is a point-in-time view of the database, taken in a moment and
// read later, from another goroutine.
type Snapshot struct {
	d *DB
	s *pebble.Snapshot
}

// Snapshot returns a view of the database as it is now, waiting for a
// pending checkpoint to apply the writes it holds. Close releases it.
func (d *DB) Snapshot() (*Snapshot, error) {
	if err := d.fail.get(); err != nil {
		return nil, err
	}
	if err := d.settle(true); err != nil {
		return nil, err
	}
	s := &Snapshot{d: d, s: d.db.NewSnapshot()}
	d.smu.Lock()
	d.snaps[s] = struct{}{}
	d.smu.Unlock()
	return s, nil
}

// Scan is DB.Scan on the snapshot. It fails with ErrClosed once the DB is
// closed, and Close waits for a scan under way.
func (s *Snapshot) Scan(lower, upper []byte, fn func(key, value []byte) error) error {
	s.d.mu.RLock()
	defer s.d.mu.RUnlock()
	s.d.smu.Lock()
	ps := s.s
	s.d.smu.Unlock()
	if s.d.closed || ps == nil {
		return ErrClosed
	}
	if err := s.d.fail.get(); err != nil {
		return err
	}
	it, err := ps.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return s.d.failed(fmt.Errorf("scan a snapshot: %w", err))
	}
	return scan(it, fn, s.d.fail)
}

// Close releases the snapshot; it may be called more than once.
func (s *Snapshot) Close() {
	s.d.smu.Lock()
	defer s.d.smu.Unlock()
	s.closeLocked()
}

func (s *Snapshot) closeLocked() {
	if s.s != nil {
		_ = s.s.Close()
		s.s = nil
	}
	delete(s.d.snaps, s)
}

// Close releases every snapshot still open, closes the database and
// removes its directory.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.dropIters()
	if d.held != nil { // the writes held for a checkpoint go with the database
		_ = d.held.Close()
		d.held, d.heldDone = nil, nil
	}
	d.smu.Lock()
	for s := range d.snaps {
		s.closeLocked()
	}
	d.smu.Unlock()
	err := d.db.Close()
	d.log.flush()
	d.releaseCache()
	if rerr := os.RemoveAll(d.dir); err == nil && rerr != nil {
		err = rerr
	}
	if rerr := os.RemoveAll(d.checkpointsDir()); err == nil && rerr != nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("disk state: close %s: %w", d.dir, err)
	}
	return nil
}

// Prefix appends the prefix of a state's keys in key group kg.
func Prefix(dst []byte, kg int, state uint16) []byte {
	return binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(dst, uint16(kg)), state)
}

// GroupStart appends the first key of key group kg (every state's).
func GroupStart(dst []byte, kg int) []byte {
	return binary.BigEndian.AppendUint16(dst, uint16(kg))
}

// GroupEnd appends the key just after key group kg's last; for the last
// key group it appends nothing (no upper bound).
func GroupEnd(dst []byte, kg int) []byte {
	if kg+1 >= MaxKeyGroups {
		return dst
	}
	return binary.BigEndian.AppendUint16(dst, uint16(kg+1))
}

// Split parses a key into its key group, state id and the rest.
func Split(key []byte) (kg int, state uint16, rest []byte, ok bool) {
	if len(key) < 4 {
		return 0, 0, nil, false
	}
	return int(binary.BigEndian.Uint16(key)), binary.BigEndian.Uint16(key[2:]), key[4:], true
}

// MapKey appends a map state's key: its prefix, then key length-prefixed,
// then the user key.
func MapKey(dst []byte, kg int, state uint16, key, userKey []byte) []byte {
	dst = MapPrefix(dst, kg, state, key)
	return append(dst, userKey...)
}

// MapPrefix appends the prefix of the entries of one key of a map state.
func MapPrefix(dst []byte, kg int, state uint16, key []byte) []byte {
	dst = Prefix(dst, kg, state)
	dst = binary.AppendUvarint(dst, uint64(len(key)))
	return append(dst, key...)
}

// SplitMap parses what follows a map state's prefix into key and user key.
func SplitMap(rest []byte) (key, userKey []byte, ok bool) {
	n, w := binary.Uvarint(rest)
	if w <= 0 || uint64(len(rest)-w) < n {
		return nil, nil, false
	}
	return rest[w : w+int(n)], rest[w+int(n):], true
}

// PrefixEnd returns the smallest key after every key that starts with
// prefix (nil: none, prefix is all 0xff).
func PrefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// logger passes pebble's messages to slog.
type logger struct{ l *slog.Logger }

func (l logger) Infof(format string, args ...any) {
	if l.l != nil {
		l.l.Debug("disk state: " + fmt.Sprintf(format, args...))
	}
}

func (l logger) Errorf(format string, args ...any) {
	if l.l != nil {
		l.l.Error("disk state: " + fmt.Sprintf(format, args...))
	}
}

func (l logger) Fatalf(format string, args ...any) {
	msg := "disk state: " + fmt.Sprintf(format, args...)
	if l.l != nil {
		l.l.Error(msg)
	}
	panic(msg)
}

// GetCacheBytes is c's CacheBytes, 0 for a nil c.
func (c *Config) GetCacheBytes() int64 {
	if c == nil {
		return 0
	}
	return c.CacheBytes
}

// GetMemTableBytes is c's MemTableBytes, 0 for a nil c.
func (c *Config) GetMemTableBytes() int64 {
	if c == nil {
		return 0
	}
	return c.MemTableBytes
}

// GetNoLocalRecovery is c's NoLocalRecovery, false for a nil c.
func (c *Config) GetNoLocalRecovery() bool { return c != nil && c.NoLocalRecovery }
