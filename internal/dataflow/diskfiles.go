package dataflow

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// DiskCheckpointer is implemented by instances that may keep keyed state
// in a database on disk (see actors.WithDiskState). When they do, a
// checkpoint stores that state as the files of a checkpoint of the
// database, which later checkpoints share while the files last, instead
// of encoding its entries: SnapshotFiles replaces SnapshotAsync, and
// RestoreFiles follows Restore. A savepoint still stores the entries (see
// SnapshotAsync): it is self-contained and readable by either backend.
type DiskCheckpointer interface {
	// OnDisk reports whether the instance holds state on disk.
	OnDisk() bool
	// DatabaseID identifies the instance's database (see DiskFiles.DB).
	DatabaseID() uint64
	// SnapshotFiles is SnapshotAsync for the states on the heap (timers,
	// for one) and the watermark, of the key groups of groups (all when
	// full), with the descriptors of every state; the states on disk are
	// captured as a checkpoint of the database, named name, begun now and
	// taken by DiskFiles.Take later. st is complete on return.
	SnapshotFiles(st *messages.TaskState, groups []uint64, full bool, name string) (*DiskFiles, error)
	// PrepareRestore returns a new empty directory, removed when the
	// instance closes, to put a stored checkpoint's files into.
	PrepareRestore(name string) (string, error)
	// RestoreFiles loads, after Restore, the entries of the task's key
	// groups that the database in dir, a checkpoint that d describes,
	// holds. It fails, with ErrIncompatibleState, for a state that the
	// operator does not keep on disk. The runtime gives the stored
	// databases that hold key groups of the task in turn, the one that
	// holds most of them last (base): the task's key groups of the others
	// are written into tables in key order, and when the base's states
	// keep their ids and formats, the base becomes the task's database,
	// the files in dir taken over without a copy, the key groups outside
	// the task's range excised and the tables ingested, and the report
	// says Adopted: its files are then those d lists (see restoreFiles).
	RestoreFiles(dir string, d *messages.DiskCheckpoint, base bool) (DiskRestore, error)
	// WatchDisk has fn called once, from any goroutine, when the
	// instance's database fails (see diskstate.DB.OnFailure); fn must
	// return at once.
	WatchDisk(fn func(error))
}

// DiskRestore is what RestoreFiles did with one stored database.
type DiskRestore struct {
	// Adopted: the stored database became the task's, its files taken
	// over without a copy.
	Adopted bool
	// Excised counts the ranges of key groups outside the task's that
	// were removed from the adopted database, without rewriting a file.
	Excised int
	// IngestedTables, IngestedBytes and IngestedEntries are the tables
	// written from the stored database's entries of the task's key groups,
	// in key order, and ingested into the task's database.
	IngestedTables  int
	IngestedBytes   int64
	IngestedEntries int64
	// Rebuilt is the entries written one by one, through batches.
	Rebuilt int64
}

// DiskFiles is a checkpoint of a task's database: the directory of its
// files once taken (see Take), and what a messages.DiskCheckpoint says of
// it but its files.
type DiskFiles struct {
	// Checkpoint is nil until Take.
	*diskstate.Checkpoint
	pending *diskstate.Pending
	// Desc holds the key groups and the states; the runtime adds the
	// stored files.
	Desc *messages.DiskCheckpoint
	// DB identifies the database the files are of: file names are unique
	// within one database only.
	DB uint64
}

// Take takes the database's checkpoint, as it was in the synchronous
// phase, off the task's goroutine: a flush of the memtable and a
// directory of hard links. The task's writes are held in memory until
// then. It is called once; Release gives the checkpoint up instead.
func (f *DiskFiles) Take() error {
	c, err := f.pending.Take()
	f.Checkpoint = c
	return err
}

// Release gives up the checkpoint if Take was not called, so that the
// task's writes reach its database; it may follow Take.
func (f *DiskFiles) Release() { f.pending.Release() }

// OnDisk implements DiskCheckpointer.
func (p *processInstance[K, I, O]) OnDisk() bool {
	return p.setup.disk != nil && p.setup.disk.db != nil
}

// DatabaseID implements DiskCheckpointer.
func (p *processInstance[K, I, O]) DatabaseID() uint64 {
	if !p.OnDisk() {
		return 0
	}
	return p.setup.disk.db.ID()
}

// SnapshotFiles implements DiskCheckpointer.
func (p *processInstance[K, I, O]) SnapshotFiles(st *messages.TaskState, groups []uint64, full bool, name string) (*DiskFiles, error) {
	if !p.OnDisk() {
		return nil, fmt.Errorf("topology: operator %q keeps no state on disk", p.setup.task.Operator)
	}
	if full {
		groups = nil
	} else if groups == nil {
		groups = []uint64{}
	}
	p.snapshotWatermark(st)
	return p.setup.snapshotFiles(st, groups, name)
}

// PrepareRestore implements DiskCheckpointer.
func (p *processInstance[K, I, O]) PrepareRestore(name string) (string, error) {
	if !p.OnDisk() {
		return "", fmt.Errorf("topology: operator %q keeps no state on disk", p.setup.task.Operator)
	}
	return p.setup.disk.db.PrepareRestore(name)
}

// WatchDisk implements DiskCheckpointer.
func (p *processInstance[K, I, O]) WatchDisk(fn func(error)) {
	if p.OnDisk() {
		p.setup.disk.db.OnFailure(fn)
	}
}

// RestoreFiles implements DiskCheckpointer.
func (p *processInstance[K, I, O]) RestoreFiles(dir string, d *messages.DiskCheckpoint, base bool) (DiskRestore, error) {
	return p.setup.restoreFiles(dir, d, base)
}

// snapshotFiles writes the heap states' entries of the key groups only
// selects and every descriptor into st, and takes a checkpoint of the
// database.
func (s *KeyedSetup[K]) snapshotFiles(st *messages.TaskState, only groupSet, name string) (*DiskFiles, error) {
	b, err := s.snapshotHeap(only)
	if err != nil {
		return nil, err
	}
	desc := &messages.DiskCheckpoint{KeyGroupStart: uint32(s.task.KeyGroupStart), KeyGroupEnd: uint32(s.task.KeyGroupEnd)}
	for id, ds := range s.disk.states {
		desc.States = append(desc.States, &messages.DiskStateID{Id: uint32(id), Name: ds.descriptor().GetName(), Timed: ds.ttlNanos() > 0})
		st.DiskStates = append(st.DiskStates, ds.descriptor().GetName())
	}
	b.appendTo(st)
	st.StateDescriptors = append(st.StateDescriptors, s.descriptors()...)
	p, err := s.disk.db.BeginCheckpoint(name)
	if err != nil {
		return nil, fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
	}
	return &DiskFiles{pending: p, Desc: desc, DB: s.disk.db.ID()}, nil
}

// diskMapping is how a restore maps a stored state's entries: the state's
// id now, and its time-to-live then and now.
type diskMapping struct {
	to           uint16
	timed, timer bool  // the stored values carry write times / the state's will
	ttl, stored  int64 // the state's time-to-live now / in the checkpoint
}

// same reports whether the stored entries of state id are the state's as
// they are: the same id, and the same time-to-live.
func (m diskMapping) same(id uint32) bool {
	return uint32(m.to) == id && m.timed == m.timer && m.ttl == m.stored
}

// value returns the value to write for a stored value v, in scratch when
// it changes, and false for an entry expired now, under the time-to-live
// the checkpoint had or the one declared now.
func (m diskMapping) value(v []byte, now int64, scratch *[]byte) ([]byte, bool, error) {
	written, value := now, v
	if m.timed {
		w, rest, ok := splitWritten(v)
		if !ok {
			return nil, false, fmt.Errorf("a stored value of %d bytes has no write time", len(v))
		}
		if storedExpired(w, m.stored, now) {
			return nil, false, nil // expired before the restore, under the checkpoint's time-to-live
		}
		written, value = w, rest
	}
	if !m.timer {
		return value, true, nil
	}
	if now-written >= m.ttl {
		return nil, false, nil // expired
	}
	if m.timed {
		return v, true, nil // the write time stays
	}
	*scratch = append(binary.BigEndian.AppendUint64((*scratch)[:0], uint64(written)), value...)
	return *scratch, true, nil
}

// restoreFiles loads the entries of the task's key groups from the
// database in dir, a checkpoint that desc describes (of whose tables dir
// may hold only those that hold keys of the task's key groups: see
// diskstate.TablesFor), under the ids its states have now, adding or
// dropping write times where a state's time-to-live came or went, and
// leaving out the entries expired now, under the time-to-live the
// checkpoint had or the one declared now (see ttl_restore.go). The runtime
// gives the task's stored databases in turn, the one that holds most of
// its key groups last (base). Each takes one of three ways:
//
//   - ingest: the entries of the task's key groups are written, in key
//     order, into tables (diskstate.Ingest), when every state keeps its
//     id: the keys, and so their order, stay. The tables wait for the
//     base, into which they are ingested.
//   - adopt: the base becomes the database, the files in dir without a
//     copy, its key groups outside the task's range excised and the
//     tables written before ingested (diskstate.DB.AdoptKeyGroups). Only
//     when nothing was written yet and every state keeps its id and
//     time-to-live: the expired entries the files may hold are then
//     judged by the same one when read. A base that is not adopted is
//     ingested, with the tables written before.
//   - rebuild: the entries are written one by one through batches, when a
//     state's id changed.
func (s *KeyedSetup[K]) restoreFiles(dir string, desc *messages.DiskCheckpoint, base bool) (rep DiskRestore, err error) {
	op := s.task.Operator
	if s.byName == nil {
		return rep, &stateError{msg: fmt.Sprintf("topology: operator %q: a disk checkpoint given before Restore checked the checkpoint's state descriptors", op), sentinel: ErrRestoreRefused}
	}
	start := max(s.task.KeyGroupStart, int(desc.GetKeyGroupStart()))
	end := min(s.task.KeyGroupEnd, int(desc.GetKeyGroupEnd()))
	if start >= end && !(base && s.disk != nil && len(s.disk.staged) > 0) {
		return rep, nil
	}
	if s.disk == nil || s.disk.db == nil {
		names := make([]string, len(desc.GetStates()))
		for i, id := range desc.GetStates() {
			names[i] = id.GetName()
		}
		return rep, &stateError{msg: fmt.Sprintf("topology: operator %q: the checkpoint holds states %q in a database on disk, and the operator keeps none there (restore from a savepoint to change backends)", op, names), sentinel: ErrIncompatibleState}
	}
	ids := map[uint32]diskMapping{}
	for _, id := range desc.GetStates() {
		ks := s.byName[id.GetName()]
		ds, ok := ks.(diskState)
		if !ok || ks == nil {
			return rep, &stateError{msg: fmt.Sprintf("topology: operator %q: the checkpoint holds state %q on disk, which the operator does not declare on disk (its entries would be lost)", op, id.GetName()), sentinel: ErrIncompatibleState}
		}
		sid, ok := s.disk.idOf(ds)
		if !ok {
			return rep, fmt.Errorf("topology: operator %q: state %q has no id on disk", op, id.GetName())
		}
		ids[id.GetId()] = diskMapping{to: sid, timed: id.GetTimed(), timer: ds.ttlNanos() > 0, ttl: ds.ttlNanos(), stored: s.storedTTL[id.GetName()]}
	}
	s.tickRestore()
	same, keepIDs := true, true
	for id, m := range ids {
		same = same && m.same(id)
		keepIDs = keepIDs && uint32(m.to) == id
	}
	d := s.disk
	if base && same && !d.written && start < end {
		staged := d.staged
		d.staged = nil
		if len(staged) == 0 && start == int(desc.GetKeyGroupStart()) && end == int(desc.GetKeyGroupEnd()) { // exactly the task's
			err = d.db.Adopt(dir)
		} else {
			rep.Excised, err = d.db.AdoptKeyGroups(dir, s.task.KeyGroupStart, s.task.KeyGroupEnd, staged)
		}
		if err != nil {
			return rep, fmt.Errorf("topology: operator %q: restore: %w", op, err)
		}
		d.batch = d.db.NewBatch() // a batch belongs to the database it was made by
		d.written = true          // the database holds the restored state now
		rep.Adopted = true
		return rep, nil
	}
	if start < end {
		// The runtime may have left out the tables that hold none of the
		// task's key groups.
		r, err := diskstate.OpenPartialReader(dir)
		if err != nil {
			return rep, fmt.Errorf("topology: operator %q: restore: %w", op, err)
		}
		lower := diskstate.GroupStart(nil, start)
		upper := diskstate.GroupEnd(nil, end-1)
		if len(upper) == 0 {
			upper = nil
		}
		if keepIDs {
			err = s.writeTables(r, filepath.Base(dir), lower, upper, ids, &rep)
		} else {
			err = s.rebuildFiles(r, lower, upper, ids, &rep)
		}
		if cerr := r.Close(); err == nil && cerr != nil {
			err = cerr
		}
		if err != nil {
			return rep, fmt.Errorf("topology: operator %q: restore from disk checkpoint: %w", op, err)
		}
	}
	if base && len(d.staged) > 0 { // the base is not adopted: into the database with the others
		if err := s.applyRestored(); err != nil { // nothing is pending, but what is goes first
			return rep, err
		}
		staged := d.staged
		d.staged = nil
		d.written = true
		if err := d.db.IngestTables(staged); err != nil {
			return rep, fmt.Errorf("topology: operator %q: restore: %w", op, err)
		}
	}
	return rep, nil
}

// writeTables writes the entries of the keys in [lower, upper) that r
// holds into tables, which wait in d.staged for the base's restore (see
// restoreFiles).
func (s *KeyedSetup[K]) writeTables(r *diskstate.Reader, name string, lower, upper []byte, ids map[uint32]diskMapping, rep *DiskRestore) error {
	d := s.disk
	in, err := d.db.NewIngest(name)
	if err != nil {
		return err
	}
	var val []byte
	err = r.Scan(lower, upper, func(k, v []byte) error {
		kg, sid, _, ok := diskstate.Split(k)
		m, known := ids[uint32(sid)]
		if !ok || !known {
			return fmt.Errorf("a stored key of %d bytes in key group %d names state id %d, which the checkpoint does not list", len(k), kg, sid)
		}
		value, keep, err := m.value(v, s.now, &val)
		if err != nil || !keep {
			return err
		}
		return in.Set(k, value)
	})
	if err != nil {
		in.Abort()
		return err
	}
	t, err := in.Close()
	if err != nil {
		return err
	}
	if t.Len() == 0 {
		t.Remove()
		return nil
	}
	d.staged = append(d.staged, t)
	rep.IngestedTables += t.Len()
	rep.IngestedBytes += t.Bytes
	rep.IngestedEntries += t.Entries
	return nil
}

// rebuildFiles writes the entries of the keys in [lower, upper) that r
// holds into the task's database one by one, under their states' ids now
// (see restoreFiles).
func (s *KeyedSetup[K]) rebuildFiles(r *diskstate.Reader, lower, upper []byte, ids map[uint32]diskMapping, rep *DiskRestore) error {
	d := s.disk
	var key, val []byte
	err := r.Scan(lower, upper, func(k, v []byte) error {
		kg, sid, rest, ok := diskstate.Split(k)
		m, known := ids[uint32(sid)]
		if !ok || !known {
			return fmt.Errorf("a stored key of %d bytes in key group %d names state id %d, which the checkpoint does not list", len(k), kg, sid)
		}
		value, keep, err := m.value(v, s.now, &val)
		if err != nil || !keep {
			return err
		}
		key = append(diskstate.Prefix(key[:0], kg, m.to), rest...)
		rep.Rebuilt++
		return d.restoreWrite(key, value)
	})
	if err != nil {
		return err
	}
	return s.applyRestored()
}

// idOf returns the id of a state kept on disk.
func (d *diskKeyed) idOf(ds diskState) (uint16, bool) {
	for i, x := range d.states {
		if x == ds {
			return uint16(i), true
		}
	}
	return 0, false
}
