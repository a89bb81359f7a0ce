package diskstate

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/sstable"
)

// A restore at another parallelism builds a task's database from the
// stored databases of the tasks whose key groups it takes over, as Flink's
// RocksDB backend does (FLINK-31238). Of each stored database it reads
// only the tables that hold keys of the task's key groups (TablesFor; a
// flush splits its output by key range, so that most tables hold a few
// key groups). It writes its key groups of all but one into tables, in
// key order (Ingest), and then adopts the one that holds most of its key
// groups (AdoptKeyGroups), removing the others from it by excising, which
// rewrites no file, and ingesting the tables, which the database takes in
// as they are, below its memtable and without a compaction, as no key it
// holds lies in their range.

// TablesFor returns the names of the tables of the database in dir that
// may hold keys of the key groups [start, end): a virtual table's file
// where the table does. Only its files besides the tables (the manifest)
// need be in dir: no table is opened.
func TablesFor(dir string, start, end int) (map[string]bool, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: logger{}, DisableConsistencyCheck: true, DisableTableStats: true})
	if err != nil {
		return nil, fmt.Errorf("disk state: open the manifest of the checkpoint in %s: %w", dir, err)
	}
	defer db.Close()
	lower := GroupStart(nil, start)
	upper := GroupEnd(nil, end-1)
	out := map[string]bool{}
	eachTable(db, func(smallest, largest []byte, file string) {
		if bytes.Compare(largest, lower) >= 0 && (len(upper) == 0 || bytes.Compare(smallest, upper) < 0) {
			out[file] = true
		}
	})
	return out, nil
}

// eachTable calls fn with the bounds of each table of db's current
// version and the name of its file. It reads the version the manifest
// describes (DebugCurrentVersion), not the tables: DB.SSTables looks each
// table's file up, which fails for a table left out of a restore.
func eachTable(db *pebble.DB, fn func(smallest, largest []byte, file string)) {
	v := db.DebugCurrentVersion()
	for i := range v.Levels {
		for m := range v.Levels[i].All() {
			fn(m.Smallest().UserKey, m.Largest().UserKey, m.TableBacking.DiskFileNum.String()+".sst")
		}
	}
}

// OpenPartialReader is OpenReader for a checkpoint in dir whose tables are
// there only where they hold keys of the key groups to be read (see
// TablesFor): a scan of other keys fails.
func OpenPartialReader(dir string) (*Reader, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: logger{}, DisableConsistencyCheck: true, DisableTableStats: true})
	if err != nil {
		return nil, fmt.Errorf("disk state: open the checkpoint in %s: %w", dir, err)
	}
	return &Reader{db: db}, nil
}

// AdoptKeyGroups is Adopt for a checkpoint in dir that may hold key groups
// outside [start, end), and of whose tables dir may hold only those that
// hold keys of [start, end) (see TablesFor), with tables ts (of other key
// groups in [start, end)) to take in: the checkpoint drops the other key
// groups first, in place, by excising them, and ingests ts, before it
// becomes the database, so that the compactions that it may be due start
// once it is complete. The tables that hold only keys outside [start, end)
// leave the database unopened; one that straddles a bound becomes a
// virtual table over the same file, which keeps the excised keys' bytes
// until a compaction rewrites it (pebble's compaction picker counts them
// as garbage). It returns the number of ranges excised (0, 1 or 2).
func (d *DB) AdoptKeyGroups(dir string, start, end int, ts []Tables) (int, error) {
	n, err := d.keepInDir(dir, start, end, ts)
	if err != nil {
		return 0, err
	}
	return n, d.Adopt(dir)
}

// keepInDir excises the keys outside the key groups [start, end) from the
// checkpoint in dir and ingests ts into it. It opens the checkpoint with
// the consistency check (every table present), table statistics and
// compactions off, as tables outside [start, end) may be missing, and
// closes it again.
func (d *DB) keepInDir(dir string, start, end int, ts []Tables) (int, error) {
	opts := d.cfg.options(d.cache)
	opts.DisableConsistencyCheck = true
	opts.DisableTableStats = true
	opts.DisableAutomaticCompactions = true
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return 0, fmt.Errorf("disk state: open the checkpoint in %s: %w", dir, err)
	}
	n, err := exciseOutside(db, start, end)
	// The tables are in the format d writes, which a checkpoint stored by
	// an older build may not have reached.
	if v := d.db.FormatMajorVersion(); err == nil && len(ts) > 0 && db.FormatMajorVersion() < v {
		err = db.RatchetFormatMajorVersion(v)
	}
	if err == nil {
		err = ingestInto(db, ts)
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("disk state: keep key groups [%d, %d) of the checkpoint in %s: %w", start, end, dir, err)
	}
	return n, nil
}

// exciseOutside excises from db the keys outside the key groups
// [start, end), judged by its tables' bounds: no table wholly outside is
// opened. The memtable must be empty.
func exciseOutside(db *pebble.DB, start, end int) (int, error) {
	lower := GroupStart(nil, start)
	upper := GroupEnd(nil, end-1)
	var smallest, largest []byte
	eachTable(db, func(s, l []byte, _ string) {
		if smallest == nil || bytes.Compare(s, smallest) < 0 {
			smallest = s
		}
		if largest == nil || bytes.Compare(l, largest) > 0 {
			largest = l
		}
	})
	var spans []pebble.KeyRange
	if smallest != nil && bytes.Compare(smallest, lower) < 0 {
		spans = append(spans, pebble.KeyRange{Start: append([]byte(nil), smallest...), End: lower})
	}
	if largest != nil && len(upper) > 0 && bytes.Compare(largest, upper) >= 0 { // the span ends just after the largest key
		spans = append(spans, pebble.KeyRange{Start: upper, End: append(append([]byte(nil), largest...), 0)})
	}
	if len(spans) == 0 {
		return 0, nil
	}
	// Excise needs virtual tables, which a database made at pebble's
	// oldest format (Config.options sets none) does not have yet.
	if db.FormatMajorVersion() < pebble.FormatVirtualSSTables {
		if err := db.RatchetFormatMajorVersion(pebble.FormatVirtualSSTables); err != nil {
			return 0, fmt.Errorf("raise the format to excise: %w", err)
		}
	}
	for _, s := range spans {
		if err := db.Excise(context.Background(), s); err != nil {
			return 0, fmt.Errorf("excise the keys in [%x, %x): %w", s.Start, s.End, err)
		}
	}
	return len(spans), nil
}

// ingestTableBytes bounds each table an Ingest writes, so that a later
// compaction of part of the range rewrites a part of them only.
const ingestTableBytes = 64 << 20

// Ingest writes entries, given in increasing key order, into tables in a
// directory beside the database (Close), which a database then ingests
// (DB.IngestTables, AdoptKeyGroups): it links the files in and removes
// them from that directory, so that it owns them. The entries must lie in
// a key range the database holds no key of (the key groups of another
// stored database): the tables then go to the lowest level, and neither
// the memtable nor a compaction copies them.
type Ingest struct {
	dir   string
	opts  sstable.WriterOptions
	w     *sstable.Writer
	paths []string
	// Entries counts the entries written.
	Entries int64
}

// Tables are the tables an Ingest wrote, not yet in a database.
type Tables struct {
	dir     string
	paths   []string
	Bytes   int64
	Entries int64
}

// Len is the number of tables.
func (t Tables) Len() int { return len(t.paths) }

// Remove removes the tables (those not ingested) and their directory.
func (t Tables) Remove() { _ = os.RemoveAll(t.dir) }

// NewIngest starts an Ingest whose tables d or the checkpoint it adopts
// can ingest, written under a directory named after name beside d's.
func (d *DB) NewIngest(name string) (*Ingest, error) {
	dir := filepath.Join(d.checkpointsDir(), "ingest-"+sanitize(name))
	if err := os.RemoveAll(dir); err != nil {
		return nil, fmt.Errorf("disk state: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("disk state: %w", err)
	}
	o := d.cfg.options(d.cache)
	o.EnsureDefaults()
	// The tables are written as the database writes those of its lowest
	// level (block size, filter, compression), in the table format it
	// writes now: a format every database of this version can ingest.
	wo := o.MakeWriterOptions(len(o.Levels)-1, d.db.TableFormat())
	wo.WritingToLowestLevel = false // the tables may land higher, and every key is written once
	return &Ingest{dir: dir, opts: wo}, nil
}

// Set writes key's value; keys come in increasing order. Neither slice is
// kept.
func (in *Ingest) Set(key, value []byte) error {
	if in.w == nil {
		path := filepath.Join(in.dir, strconv.Itoa(len(in.paths))+".sst")
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("disk state: ingest: %w", err)
		}
		in.w = sstable.NewWriter(&fileWritable{f: f, w: bufio.NewWriterSize(f, ingestWriteBuffer)}, in.opts)
		in.paths = append(in.paths, path)
	}
	if err := in.w.Set(key, value); err != nil {
		return fmt.Errorf("disk state: ingest: %w", err)
	}
	in.Entries++
	if in.w.Raw().EstimatedSize() >= ingestTableBytes {
		return in.closeTable()
	}
	return nil
}

func (in *Ingest) closeTable() error {
	if in.w == nil {
		return nil
	}
	w := in.w
	in.w = nil
	if err := w.Close(); err != nil {
		return fmt.Errorf("disk state: ingest: write %s: %w", in.paths[len(in.paths)-1], err)
	}
	return nil
}

// Close finishes the tables and returns them; a failure removes them.
func (in *Ingest) Close() (Tables, error) {
	t := Tables{dir: in.dir, paths: in.paths, Entries: in.Entries}
	if err := in.closeTable(); err != nil {
		t.Remove()
		return Tables{}, err
	}
	for _, p := range in.paths {
		fi, err := os.Stat(p)
		if err != nil {
			t.Remove()
			return Tables{}, fmt.Errorf("disk state: ingest: %w", err)
		}
		t.Bytes += fi.Size()
	}
	return t, nil
}

// Abort gives the tables written up.
func (in *Ingest) Abort() {
	if in.w != nil {
		_ = in.w.Close()
		in.w = nil
	}
	_ = os.RemoveAll(in.dir)
}

// IngestTables ingests ts into the database, atomically, and removes
// their directories. It is called with no checkpoint pending.
func (d *DB) IngestTables(ts []Tables) error {
	if d.held != nil {
		return errors.New("disk state: ingest while a checkpoint is pending")
	}
	// The content changes other than by a write: iterators kept for reuse
	// and what tasks keep in memory of the database are out of date.
	d.dropIters()
	d.version++
	d.adopted++
	if err := ingestInto(d.db, ts); err != nil {
		return fmt.Errorf("disk state: %s: %w", d.dir, err)
	}
	return nil
}

// ingestInto ingests ts into db and removes their directories.
func ingestInto(db *pebble.DB, ts []Tables) error {
	var paths []string
	for _, t := range ts {
		paths = append(paths, t.paths...)
		defer t.Remove()
	}
	if len(paths) == 0 {
		return nil
	}
	if err := db.Ingest(context.Background(), paths); err != nil {
		return fmt.Errorf("ingest %d tables: %w", len(paths), err)
	}
	return nil
}

// ingestWriteBuffer is the write buffer of a table an Ingest writes: the
// writer hands over a block (4 KiB to 32 KiB, compressed) at a time, which
// the buffer turns into a system call per MiB.
const ingestWriteBuffer = 1 << 20

// fileWritable writes a table through a buffer. Finish does not sync, as
// the database's file system does not (see noSync): a task's database is
// rebuilt from its checkpoint after a crash.
type fileWritable struct {
	f *os.File
	w *bufio.Writer
}

func (fw *fileWritable) Write(p []byte) error {
	_, err := fw.w.Write(p)
	return err
}

func (fw *fileWritable) Finish() error {
	err := fw.w.Flush()
	if cerr := fw.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (fw *fileWritable) Abort() { _ = fw.f.Close() }
