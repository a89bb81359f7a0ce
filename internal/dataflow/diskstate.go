package dataflow

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"unsafe"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// diskKeyed is the on-disk backend of one KeyedSetup: the task's database
// and the states kept in it. Value and map states write into maps of
// pending entries, which flushPending writes to the database in one batch
// at the end of every input batch and before a snapshot; reads look at the
// pending entries first. Values handed out by a read are pending too when
// they reach a reference, so that a change made in place is written back,
// as the heap backend keeps it.
type diskKeyed struct {
	cfg    diskstate.Config
	name   string // the job and task, for the directory's name
	db     *diskstate.DB
	batch  *diskstate.Batch
	states []diskState // by state id
	// pending counts the entries made pending since the last flush (a
	// bound, not an exact figure), so that long runs of timers flush.
	pending int
	key     []byte // scratch
	val     []byte // scratch
	// ttlCursor is where the incremental clean-up of expired entries
	// goes on (nil: from the start).
	ttlCursor []byte
	// written says that something was written to the database: a restore
	// can no longer replace it with a checkpoint's files.
	written bool
	// staged are the tables a restore wrote from stored databases, which
	// the restore of the last one (the base) ingests (see restoreFiles).
	staged []diskstate.Tables
	// keepers are the value states, which keep values decoded (see
	// diskValue.kept); keptGen is the database's generation (see
	// diskstate.DB.Generation) their values were kept at.
	keepers []keeper
	keptGen uint64
	// staging: a flush is under way, whose writes are staged (in stagedWrites,
	// their bytes in stageBuf) and go into the batch in key order (see
	// unstage).
	staging      bool
	stagedWrites []stagedWrite
	stageBuf     []byte
}

// keeper is a state that keeps values of the database in memory.
type keeper interface {
	// dropKept forgets the values kept.
	dropKept()
}

// checkKept drops the values kept if the database's content was
// replaced since they were kept.
func (d *diskKeyed) checkKept() {
	if gen := d.db.Generation(); gen != d.keptGen {
		d.dropKept()
		d.keptGen = gen
	}
}

// dropKept makes every state forget the values it keeps.
func (d *diskKeyed) dropKept() {
	for _, k := range d.keepers {
		k.dropKept()
	}
}

// flushEvery bounds the entries pending between two flushes while timers
// fire; input batches flush once each.
const flushEvery = 4096

// diskState is a state kept on disk.
type diskState interface {
	keyedState
	// flushPending writes the state's pending entries into the batch and
	// forgets them, between records; before is the database's version
	// then.
	flushPending(d *diskKeyed, before uint64) error
	// synced tells the state that the database's version went from
	// before to after by the setup's own writes (see flushState and
	// cleanupDisk), which what it keeps of the stored entries accounts
	// for.
	synced(before, after uint64)
	// appendDiskEntry adds the entry of a stored key (what follows the
	// key group and state id) and value to b.
	appendDiskEntry(b *snapshotBuilder, a *arena, kg int, rest, value []byte) error
	// ttlNanos is the state's time-to-live (0: none).
	ttlNanos() int64
}

// A stored value of a state with a time-to-live starts with its write
// time, 8 bytes big-endian (Unix nanoseconds).
const writtenBytes = 8

// splitWritten parses a stored value of a state with a time-to-live.
func splitWritten(stored []byte) (written int64, value []byte, ok bool) {
	if len(stored) < writtenBytes {
		return 0, nil, false
	}
	return int64(binary.BigEndian.Uint64(stored)), stored[writtenBytes:], true
}

// liveValue is the value bytes of a stored value, and whether it is live
// at now (a state without a time-to-live: always).
func liveValue(stored []byte, ttl, now int64) (written int64, value []byte, live bool, err error) {
	if ttl == 0 {
		return 0, stored, true, nil
	}
	written, value, ok := splitWritten(stored)
	if !ok {
		return 0, nil, false, fmt.Errorf("a stored value of %d bytes has no write time", len(stored))
	}
	return written, value, now-written < ttl, nil
}

// storedPrefix appends what a stored value starts with: its write time,
// for a state with a time-to-live, else nothing.
func storedPrefix(dst []byte, ttl, written int64) []byte {
	if ttl > 0 {
		dst = binary.BigEndian.AppendUint64(dst, uint64(written))
	}
	return dst
}

// useDisk makes the setup keep its declared value and map states on disk.
func (s *KeyedSetup[K]) useDisk(cfg *diskstate.Config, job string) {
	if cfg != nil {
		s.disk = &diskKeyed{cfg: *cfg, name: job + "-" + s.task.ID}
	}
}

// addDiskState opens the database on the first state and returns the
// state's id.
func (s *KeyedSetup[K]) addDiskState(ds diskState) uint16 {
	d := s.disk
	if d.db == nil && s.err == nil {
		if s.maxP > diskstate.MaxKeyGroups {
			s.err = &stateError{msg: fmt.Sprintf("topology: operator %q: max parallelism %d: the on-disk state backend holds at most %d key groups",
				s.task.Operator, s.maxP, diskstate.MaxKeyGroups), sentinel: ErrInvalidState}
			return 0
		}
		db, err := diskstate.Open(d.cfg, d.name)
		if err != nil {
			s.err = fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
			return 0
		}
		d.db, d.batch = db, db.NewBatch()
	}
	d.states = append(d.states, ds)
	return uint16(len(d.states) - 1)
}

// closeDisk closes the database and removes its directory.
func (s *KeyedSetup[K]) closeDisk() error {
	if s.disk == nil || s.disk.db == nil {
		return nil
	}
	return s.disk.db.Close()
}

// flushState writes the pending entries of the on-disk states, between
// records; it does nothing on the heap backend. A failure fails the task.
// Reads never need it: they merge the pending entries with what is
// stored.
func (s *KeyedSetup[K]) flushState() error {
	d := s.disk
	if d == nil || d.pending == 0 {
		return nil
	}
	before := d.db.Version()
	d.staging = true
	for _, ds := range d.states {
		if err := ds.flushPending(d, before); err != nil {
			d.staging, d.stagedWrites, d.stageBuf = false, d.stagedWrites[:0], d.stageBuf[:0]
			return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
		}
	}
	d.staging = false
	d.pending = 0
	if err := d.unstage(); err != nil {
		return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
	}
	if err := d.db.Apply(d.batch); err != nil {
		return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
	}
	d.synced(before)
	return nil
}

// synced tells the states that the database's writes since version
// before are the setup's own.
func (d *diskKeyed) synced(before uint64) {
	after := d.db.Version()
	for _, ds := range d.states {
		ds.synced(before, after)
	}
}

// diskKey sets d.key to the stored key of k in state sid.
func (s *KeyedSetup[K]) diskKey(sid uint16, k K) []byte {
	d := s.disk
	d.key = s.codec.append(diskstate.Prefix(d.key[:0], s.keyGroup(k), sid), k)
	return d.key
}

// diskFailure is what an on-disk state's read panics with when the
// database fails or a stored value does not decode: the task fails, and
// the job recovers from its last checkpoint.
func diskFailure(name string, err error) error {
	return fmt.Errorf("state %q: on-disk read: %w", name, err)
}

// decodeCopies reports whether c's Decode copies what it decodes (the
// built-in codecs), so that the bytes given to it may be reused after.
func decodeCopies[T any](c Codec[T]) bool {
	switch c.(type) {
	case fixedCodec[T], stringCodec[T], JSONCodec[T], *JSONCodec[T]:
		return true
	}
	return false
}

// diskLoad reads and decodes the value stored at key, and its write time
// for a state with a time-to-live; an expired value is absent. size is
// the stored value's length (0: none).
func diskLoad[V any](d *diskKeyed, key []byte, c Codec[V], copies bool, ttl, now int64) (x V, written int64, ok bool, size int, err error) {
	dst := d.val[:0]
	if !copies {
		dst = nil
	}
	dst, ok, err = d.db.Get(dst, key)
	if copies {
		d.val = dst
	}
	if err != nil || !ok {
		return x, 0, false, 0, err
	}
	written, value, live, err := liveValue(dst, ttl, now)
	if err != nil || !live {
		return x, 0, false, len(dst), err
	}
	x, err = c.Decode(value)
	return x, written, err == nil, len(dst), err
}

// snapshotDisk adds the on-disk states' entries of the key groups b
// selects, as snap holds them, to b.
func (d *diskKeyed) snapshotDisk(b *snapshotBuilder, snap *diskstate.Snapshot, maxP int) error {
	a := &arena{}
	add := func(key, value []byte) error {
		kg, sid, rest, ok := diskstate.Split(key)
		if !ok || int(sid) >= len(d.states) {
			return fmt.Errorf("on-disk state: a stored key of %d bytes names no declared state", len(key))
		}
		if !b.selected(kg) {
			return nil
		}
		ds := d.states[sid]
		written, value, live, err := liveValue(value, ds.ttlNanos(), b.now)
		if err != nil || !live {
			return err // an expired entry is left out
		}
		if err := ds.appendDiskEntry(b, a, kg, rest, value); err != nil {
			return err
		}
		if written != 0 { // the entry just added
			ns := b.named(kg, ds.descriptor().GetName())
			ns.Entries[len(ns.Entries)-1].WrittenAt = written
		}
		return nil
	}
	if b.only == nil {
		return snap.Scan(nil, nil, add)
	}
	var lo, hi []byte
	for w, word := range b.only {
		for word != 0 {
			kg := w*64 + bits.TrailingZeros64(word)
			word &= word - 1
			if kg >= maxP {
				return nil
			}
			lo, hi = diskstate.GroupStart(lo[:0], kg), diskstate.GroupEnd(hi[:0], kg)
			if len(hi) == 0 {
				hi = nil
			}
			if err := snap.Scan(lo, hi, add); err != nil {
				return err
			}
		}
	}
	return nil
}

// applyBytes bounds a batch of writes: a larger one is applied at once,
// so that a batch of input records that writes large values holds at most
// this much besides them.
const applyBytes = 8 << 20

// write adds a write of key (a delete, or a set to value) to the batch,
// applying it when it grows large.
func (d *diskKeyed) write(key, value []byte, del bool) error {
	d.written = true
	if d.staging {
		d.stagedWrites = append(d.stagedWrites, stagedWrite{at: len(d.stageBuf), keyLen: len(key), valueLen: len(value), del: del})
		d.stageBuf = append(append(d.stageBuf, key...), value...)
		if len(d.stageBuf) < applyBytes {
			return nil
		}
		if err := d.unstage(); err != nil {
			return err
		}
		return d.db.Apply(d.batch)
	}
	var err error
	if del {
		err = d.batch.Delete(key)
	} else {
		err = d.batch.Set(key, value)
	}
	if err == nil && d.batch.Len() >= applyBytes {
		err = d.db.Apply(d.batch)
	}
	return err
}

// stagedWrite is a write of a flush, its key and value at stageBuf[at:].
type stagedWrite struct {
	at, keyLen, valueLen int
	del                  bool
}

// unstage adds the writes staged during a flush to the batch in the
// order of their keys: the memtable takes keys in order for less than keys
// at random, as each insertion starts its search where the one before
// ended (measured on 256 keys at a time among 512 Ki: 310 ns a key sorted,
// the sort included, against 430 ns).
func (d *diskKeyed) unstage() error {
	buf := d.stageBuf
	slices.SortFunc(d.stagedWrites, func(a, b stagedWrite) int {
		if c := bytes.Compare(buf[a.at:a.at+a.keyLen], buf[b.at:b.at+b.keyLen]); c != 0 {
			return c
		}
		return cmp.Compare(a.at, b.at) // two writes of a key: the later last
	})
	var err error
	for _, w := range d.stagedWrites {
		key := buf[w.at : w.at+w.keyLen]
		if w.del {
			err = d.batch.Delete(key)
		} else {
			err = d.batch.Set(key, buf[w.at+w.keyLen:w.at+w.keyLen+w.valueLen])
		}
		if err != nil {
			break
		}
	}
	d.stagedWrites, d.stageBuf = d.stagedWrites[:0], d.stageBuf[:0]
	return err
}

// restoreWrite writes a restored entry; the values kept no longer
// reflect the database.
func (d *diskKeyed) restoreWrite(key, value []byte) error {
	d.dropKept()
	return d.write(key, value, false)
}

// arena copies the bytes of snapshot entries into large chunks.
type arena struct{ buf []byte }

func (a *arena) copy(b []byte) []byte {
	if len(b) > cap(a.buf)-len(a.buf) {
		a.buf = make([]byte, 0, max(1<<20, len(b)))
	}
	start := len(a.buf)
	a.buf = append(a.buf, b...)
	return a.buf[start:len(a.buf):len(a.buf)]
}

// pendValue is a pending write of a value: the value and its write time
// (states with a time-to-live), or its removal.
type pendValue[V any] struct {
	v       V
	written int64
	del     bool
}

// diskValue is a value state's on-disk part.
type diskValue[K Key, V any] struct {
	sid    uint16
	copies bool // the codec's Decode copies: scratch bytes may be reused
	pend   map[K]pendValue[V]
	// Scratch of Len: the pending keys' stored keys, their bytes, and a
	// key to seek to.
	keys  [][]byte
	arena []byte
	seek  []byte
	// kept holds values as the database holds them, decoded: those the
	// task wrote (once written) or read lately, and keys read and found
	// absent, so that reading one again is a map lookup rather than a
	// lookup in the tree, which costs 3 to 10 µs. keptBytes is what they
	// count: each its stored key and value's bytes and entryBytes. The
	// state keeps at most its share of the task's (diskstate.DB.KeptShare
	// divided among the task's value states that keep values), and past it
	// forgets entries at random (the map's order) until it holds 15/16 of
	// it. A value that reaches a reference is never kept (kept is nil): a
	// change made in place after its batch must not be read back when the
	// database does not hold it.
	kept       map[K]keptValue[V]
	keptBytes  int64
	entryBytes int64
}

// keptValue is a value kept (see diskValue.kept): the value and its write
// time, or its absence, and the bytes it counts.
type keptValue[V any] struct {
	v       V
	written int64
	bytes   int32
	del     bool
}

// keptFixed is what an entry of a kept map counts besides its key and
// value: the map's slot overhead and the key's codec bytes' header.
const keptFixed = 16

// newDiskValue returns a value state's on-disk part, which keeps values
// in memory if keep.
func newDiskValue[K Key, V any](copies, keep bool) *diskValue[K, V] {
	d := &diskValue[K, V]{copies: copies, pend: map[K]pendValue[V]{},
		entryBytes: int64(unsafe.Sizeof(*new(K))+unsafe.Sizeof(keptValue[V]{})) + keptFixed}
	if keep {
		d.kept = map[K]keptValue[V]{}
	}
	return d
}

func (d *diskValue[K, V]) dropKept() {
	clear(d.kept)
	d.keptBytes = 0
}

// keep records the value the database holds for k (del: none), whose
// stored key and value take size bytes, and forgets others past the
// state's share.
func (d *diskValue[K, V]) keep(dk *diskKeyed, k K, x V, written int64, del bool, size int) {
	if d.kept == nil {
		return
	}
	if old, ok := d.kept[k]; ok {
		d.keptBytes -= d.entryBytes + int64(old.bytes)
	}
	size = min(size, math.MaxInt32)
	d.kept[k] = keptValue[V]{v: x, written: written, bytes: int32(size), del: del}
	d.keptBytes += d.entryBytes + int64(size)
	share := dk.db.KeptShare() / int64(len(dk.keepers))
	if d.keptBytes <= share {
		return
	}
	target := share - share/16
	for k, e := range d.kept {
		delete(d.kept, k)
		d.keptBytes -= d.entryBytes + int64(e.bytes)
		if d.keptBytes <= target {
			break
		}
	}
}

func (v *ValueState[K, V]) diskGet() (V, bool) {
	s, d := v.setup, v.d
	k := s.cur.key
	if p, ok := d.pend[k]; ok {
		if p.del || (v.ttl > 0 && s.now-p.written >= v.ttl) {
			var zero V
			return zero, false
		}
		if v.readMarks {
			s.markDirty()
		}
		return p.v, true
	}
	s.disk.checkKept()
	if p, ok := d.kept[k]; ok { // never a value that reaches a reference
		if p.del || (v.ttl > 0 && s.now-p.written >= v.ttl) {
			var zero V
			return zero, false
		}
		return p.v, true
	}
	key := s.diskKey(d.sid, k)
	x, written, ok, size, err := diskLoad(s.disk, key, v.codec, d.copies, v.ttl, s.now)
	if err != nil {
		panic(diskFailure(v.name, err))
	}
	switch {
	case ok && v.readMarks: // it may change in place: write it back
		d.pend[k] = pendValue[V]{v: x, written: written}
		s.disk.pending++
		s.markDirty()
	case ok:
		d.keep(s.disk, k, x, written, false, len(key)+size)
	default: // absent, or expired, which stays absent (on the heap a read removes it)
		d.keep(s.disk, k, x, 0, true, len(key))
	}
	return x, ok
}

func (v *ValueState[K, V]) diskSet(x V, del bool) {
	v.d.pend[v.setup.cur.key] = pendValue[V]{v: x, written: v.setup.now, del: del}
	v.setup.disk.pending++
	v.setup.markDirty()
}

// diskLen counts the state's live keys: those stored that no pending
// write replaces, and the pending ones set. It reads the state's stored
// keys, merged in key order with the pending ones, without writing them.
func (v *ValueState[K, V]) diskLen() int {
	s, d := v.setup, v.d
	n, err := v.countStored()
	if err != nil {
		panic(diskFailure(v.name, err))
	}
	for _, p := range d.pend {
		if !p.del && (v.ttl == 0 || s.now-p.written < v.ttl) {
			n++
		}
	}
	return n
}

// countStored counts the stored live keys of the state that no pending
// write replaces: one pass over the state's keys in each key group (a
// seek skips the other states'), merged with the pending keys' stored
// keys, sorted.
func (v *ValueState[K, V]) countStored() (int, error) {
	s, d := v.setup, v.d
	d.keys = d.keys[:0]
	d.arena = d.arena[:0]
	for k := range d.pend {
		start := len(d.arena)
		d.arena = s.codec.append(diskstate.Prefix(d.arena, s.keyGroup(k), d.sid), k)
		d.keys = append(d.keys, d.arena[start:len(d.arena):len(d.arena)])
	}
	slices.SortFunc(d.keys, bytes.Compare)
	it, err := s.disk.db.NewIter(nil, nil)
	if err != nil {
		return 0, err
	}
	n, j := 0, 0
	d.seek = diskstate.Prefix(d.seek[:0], 0, d.sid)
	for ok := it.SeekGE(d.seek); ok; {
		key := it.Key()
		kg, sid, _, valid := diskstate.Split(key)
		switch {
		case !valid:
			ok = it.Next()
			continue
		case sid < d.sid: // another state's key: on to this state's in the key group
			d.seek = diskstate.Prefix(d.seek[:0], kg, d.sid)
			ok = it.SeekGE(d.seek)
			continue
		case sid > d.sid: // on to the next key group
			if kg+1 >= diskstate.MaxKeyGroups {
				ok = false
				continue
			}
			d.seek = diskstate.Prefix(d.seek[:0], kg+1, d.sid)
			ok = it.SeekGE(d.seek)
			continue
		}
		for j < len(d.keys) && bytes.Compare(d.keys[j], key) < 0 {
			j++
		}
		if j < len(d.keys) && bytes.Equal(d.keys[j], key) {
			j++ // pending: counted with the pending keys
		} else if v.ttl == 0 {
			n++
		} else {
			value, err := it.Value()
			if err != nil {
				_ = it.Close()
				return 0, err
			}
			_, _, live, err := liveValue(value, v.ttl, s.now)
			if err != nil {
				_ = it.Close()
				return 0, err
			}
			if live {
				n++
			}
		}
		ok = it.Next()
	}
	return n, it.Close()
}

func (v *ValueState[K, V]) synced(before, after uint64) {}

func (v *ValueState[K, V]) flushPending(d *diskKeyed, _ uint64) error {
	s := v.setup
	d.checkKept()
	for k, p := range v.d.pend {
		key := s.diskKey(v.d.sid, k)
		if p.del {
			if err := d.write(key, nil, true); err != nil {
				return err
			}
			v.d.keep(d, k, p.v, 0, true, len(key)) // the database holds it now
			continue
		}
		var err error
		if d.val, err = v.codec.Append(storedPrefix(d.val[:0], v.ttl, p.written), p.v); err != nil {
			return fmt.Errorf("state %q: %w", v.name, err)
		}
		if err := d.write(key, d.val, false); err != nil {
			return err
		}
		v.d.keep(d, k, p.v, p.written, false, len(key)+len(d.val)) // the database holds it now
	}
	clear(v.d.pend)
	return nil
}

func (v *ValueState[K, V]) appendDiskEntry(b *snapshotBuilder, a *arena, kg int, rest, value []byte) error {
	ns := b.named(kg, v.name)
	ns.Entries = append(ns.Entries, &messages.StateEntry{Key: a.copy(rest), Value: a.copy(value)})
	return nil
}

// restoreDisk checks that e decodes and writes it to the database.
func (v *ValueState[K, V]) restoreDisk(kg int, e *messages.StateEntry) error {
	if _, err := v.setup.codec.decode(e.Key); err != nil {
		return err
	}
	if _, err := v.codec.Decode(e.Value); err != nil {
		return err
	}
	return v.setup.restoreDiskEntry(append(diskstate.Prefix(v.setup.disk.key[:0], kg, v.d.sid), e.Key...), v.ttl, e)
}

func (v *ValueState[K, V]) ttlNanos() int64 { return v.ttl }

// pendMap is what a map state holds in memory of one key's map: the
// pending writes of the current batch (the user keys written, and those
// handed out that may change in place), and, once an iteration has read
// them all, a copy of its stored entries, which the flushes keep equal to
// what they write while the copy lasts (see cacheBudget).
type pendMap[K Key, UK comparable, V any] struct {
	k    K
	idx  map[UK]int32 // index in ents
	ents []pendEntry[UK, V]
	// ord is the indices of ents in the order of their user keys' bytes,
	// the order on disk; the entries added since it was sorted (those
	// after its length) are not in it yet (see order).
	ord []int32
	// iters counts the iterations under way over ord and the cache: they
	// are then not changed in place.
	iters int
	// touched says that the map is in diskMap.touched: made, iterated or
	// written since the last flush.
	touched bool
	// cache holds, when cached, the key's stored live entries that no
	// pending write replaces, in the order of their user keys' bytes,
	// which are in cbytes; csize is what it counts for in
	// diskMap.cacheBytes.
	cache  []cacheEntry[UK, V]
	cbytes []byte
	cached bool
	csize  int
}

// pendEntry is a pending write of a user key.
type pendEntry[UK comparable, V any] struct {
	uk  UK
	ukb span // uk's bytes, in diskMap.arena
	pendValue[V]
	vlen int32 // the length of v's bytes, once the flush has encoded it
}

// span is where bytes are in an arena of bytes: offsets rather than slices
// keep the entries of types without references free of pointers.
type span struct{ off, n uint32 }

func (sp span) in(arena []byte) []byte { return arena[sp.off : sp.off+sp.n : sp.off+sp.n] }

// appendSpan appends b to arena and returns where it is.
func appendSpan(arena, b []byte) ([]byte, span) {
	start := len(arena)
	arena = append(arena, b...)
	return arena, span{uint32(start), uint32(len(b))}
}

// cacheEntry is a stored entry of a map, decoded.
type cacheEntry[UK comparable, V any] struct {
	uk      UK
	ukb     span // in pendMap.cbytes
	v       V
	written int64
	size    int32 // counted in diskMap.cacheBytes
}

// order returns the indices of pm's entries in the order of their user
// keys' bytes (in arena), sorting in those added since the last call.
func (pm *pendMap[K, UK, V]) order(arena []byte) []int32 {
	n := len(pm.ord)
	if n == len(pm.ents) {
		return pm.ord
	}
	ord := pm.ord
	if pm.iters > 0 { // an iteration reads ord: sort a copy
		ord = slices.Clone(ord)
	}
	cmp := func(a, b int32) int { return bytes.Compare(pm.ents[a].ukb.in(arena), pm.ents[b].ukb.in(arena)) }
	if added := len(pm.ents) - n; added > 8 && added > n/4 {
		ord = ord[:0]
		for i := range pm.ents {
			ord = append(ord, int32(i))
		}
		slices.SortFunc(ord, cmp)
	} else { // a few: insert them
		for i := int32(n); i < int32(len(pm.ents)); i++ {
			pos, _ := slices.BinarySearchFunc(ord, i, cmp)
			ord = slices.Insert(ord, pos, i)
		}
	}
	pm.ord = ord
	return ord
}

// find returns the index in pm's cache of the entry whose user key's
// bytes are ukb, or where it would be.
func (pm *pendMap[K, UK, V]) find(ukb []byte) (int, bool) {
	cb := pm.cbytes
	return slices.BinarySearchFunc(pm.cache, ukb, func(e cacheEntry[UK, V], b []byte) int { return bytes.Compare(e.ukb.in(cb), b) })
}

// dropCache forgets pm's copy of the stored entries.
func (pm *pendMap[K, UK, V]) dropCache() {
	if pm.iters == 0 {
		clear(pm.cache)
		pm.cache, pm.cbytes = pm.cache[:0], pm.cbytes[:0]
	} else { // an iteration reads them
		pm.cache, pm.cbytes = nil, nil
	}
	pm.cached, pm.csize = false, 0
}

// maxReusedPend bounds the entries of a pendMap kept for reuse after a
// flush: a larger one is left to the garbage collector.
const maxReusedPend = 1024

// cacheBudget bounds the memory a map state keeps copies of stored
// entries in between batches (see pendMap.cache), counted as the bytes of
// their user keys and values plus the decoded entry's size: at a flush
// beyond it, the copies of the keys not used since the last flush go
// first, then those used. An iteration copies what it reads while the
// copies hold less than twice the budget. Tests make it small.
var cacheBudget = 4 << 20

// diskMap is a map state's on-disk part.
type diskMap[K Key, UK comparable, V any] struct {
	sid       uint16
	copies    bool // the value codec's Decode copies
	keyCopies bool // the user-key codec's Decode copies
	// pend holds the keys' maps held in memory, and touched those made,
	// iterated or written since the last flush, which the flush goes
	// through; free are maps emptied, for reuse.
	pend    map[K]*pendMap[K, UK, V]
	touched []*pendMap[K, UK, V]
	free    []*pendMap[K, UK, V]
	// arena holds the pending user keys' bytes until the flush.
	arena []byte
	// cacheBytes is what the copies of stored entries count for; gen is
	// the database's version they agree with (see diskstate.DB.Version),
	// and drops counts the times they were all forgotten.
	cacheBytes int
	gen        uint64
	drops      uint64
	// encErr is the first user key the codec could not encode since the
	// last flush, which fails with it.
	encErr error
	// writes counts Puts and Deletes: an iteration during which the
	// caller writes looks for the writes of the user keys it reaches.
	writes uint64
	// Scratch: a user key, a key's bytes, the bounds of a key's map, the
	// order of a key's entries that an iteration builds, and the
	// entries and bytes of a cache that a flush builds.
	ukey, kb, lo, hi []byte
	ord              []int32
	spare            []cacheEntry[UK, V]
	spareBytes       []byte
}

// mapKey sets the setup's scratch key to the stored key of (k, uk), and
// d.ukey to uk's bytes.
func (ms *MapState[K, UK, V]) mapKey(k K, uk UK) ([]byte, error) {
	s, d := ms.setup, ms.d
	var err error
	if d.ukey, err = ms.keyCodec.Append(d.ukey[:0], uk); err != nil {
		return nil, fmt.Errorf("state %q: %w", ms.name, err)
	}
	s.disk.val = s.codec.append(s.disk.val[:0], k) // the key's bytes, then the stored key
	s.disk.key = diskstate.MapKey(s.disk.key[:0], s.keyGroup(k), d.sid, s.disk.val, d.ukey)
	return s.disk.key, nil
}

// pendOf returns k's map in memory, made if need be, touched.
func (ms *MapState[K, UK, V]) pendOf(k K) *pendMap[K, UK, V] {
	d := ms.d
	pm := d.pend[k]
	if pm == nil {
		if n := len(d.free); n > 0 {
			pm, d.free = d.free[n-1], d.free[:n-1]
		} else {
			pm = &pendMap[K, UK, V]{idx: map[UK]int32{}}
		}
		pm.k = k
		d.pend[k] = pm
	}
	ms.touch(pm)
	return pm
}

// touch puts pm in the maps the next flush goes through.
func (ms *MapState[K, UK, V]) touch(pm *pendMap[K, UK, V]) {
	if !pm.touched {
		pm.touched = true
		ms.d.touched = append(ms.d.touched, pm)
		ms.setup.disk.pending++ // so that there is a flush
	}
}

// syncCaches forgets the copies of stored entries when the database
// changed otherwise than by the flushes that kept them up to date.
func (ms *MapState[K, UK, V]) syncCaches() {
	d := ms.d
	if v := ms.setup.disk.db.Version(); d.gen != v {
		ms.dropCaches()
		d.gen = v
	}
}

// dropCaches forgets every copy of stored entries; the maps held in
// memory only for theirs go.
func (ms *MapState[K, UK, V]) dropCaches() {
	d := ms.d
	d.drops++
	for k, pm := range d.pend {
		if pm.cached {
			d.cacheBytes -= pm.csize
			pm.dropCache()
		}
		if !pm.touched && pm.iters == 0 {
			delete(d.pend, k)
			ms.recycle(pm)
		}
	}
}

// recycle keeps pm, which is in no map, for reuse, unless it grew large.
func (ms *MapState[K, UK, V]) recycle(pm *pendMap[K, UK, V]) {
	if len(pm.ents) > maxReusedPend || cap(pm.cache) > maxReusedPend {
		return
	}
	clear(pm.idx)
	clear(pm.ents)
	clear(pm.cache)
	var zero K
	pm.k, pm.ents, pm.ord, pm.iters, pm.touched = zero, pm.ents[:0], pm.ord[:0], 0, false
	pm.cache, pm.cbytes, pm.cached, pm.csize = pm.cache[:0], pm.cbytes[:0], false, 0
	ms.d.free = append(ms.d.free, pm)
}

// setPend makes pv the pending write of uk, whose bytes are ukb (nil:
// encode uk).
func (ms *MapState[K, UK, V]) setPend(pm *pendMap[K, UK, V], uk UK, ukb []byte, pv pendValue[V]) {
	if i, ok := pm.idx[uk]; ok {
		pm.ents[i].pendValue = pv
		return
	}
	d := ms.d
	ms.touch(pm)
	var sp span
	if ukb != nil {
		d.arena, sp = appendSpan(d.arena, ukb)
	} else {
		start := len(d.arena)
		var err error
		if d.arena, err = ms.keyCodec.Append(d.arena, uk); err != nil && d.encErr == nil {
			d.encErr = fmt.Errorf("state %q: %w", ms.name, err)
		}
		sp = span{uint32(start), uint32(len(d.arena) - start)}
	}
	pm.idx[uk] = int32(len(pm.ents))
	pm.ents = append(pm.ents, pendEntry[UK, V]{uk: uk, ukb: sp, pendValue: pv})
}

// live reports whether a pending write leaves its user key in the map.
func (ms *MapState[K, UK, V]) live(pv *pendValue[V]) bool {
	return !pv.del && (ms.ttl == 0 || ms.setup.now-pv.written < ms.ttl)
}

// liveAt reports whether an entry written at written has not expired.
func (ms *MapState[K, UK, V]) liveAt(written int64) bool {
	return ms.ttl == 0 || ms.setup.now-written < ms.ttl
}

// lookup finds uk in the current key's pending writes, then in its
// cache: ok says whether it is known there, and pv what it is.
func (ms *MapState[K, UK, V]) lookup(pm *pendMap[K, UK, V], uk UK) (pv pendValue[V], pending, ok bool) {
	if pm == nil {
		return pv, false, false
	}
	if i, found := pm.idx[uk]; found {
		return pm.ents[i].pendValue, true, true
	}
	if !pm.cached {
		return pv, false, false
	}
	d := ms.d
	var err error
	if d.ukey, err = ms.keyCodec.Append(d.ukey[:0], uk); err != nil {
		panic(fmt.Errorf("state %q: %w", ms.name, err))
	}
	i, found := pm.find(d.ukey)
	if !found {
		return pendValue[V]{del: true}, false, true
	}
	e := &pm.cache[i]
	return pendValue[V]{v: e.v, written: e.written}, false, true
}

func (ms *MapState[K, UK, V]) diskGet(uk UK) (V, bool) {
	s, d := ms.setup, ms.d
	k := s.cur.key
	var zero V
	ms.syncCaches()
	pm := d.pend[k]
	if pv, pending, ok := ms.lookup(pm, uk); ok {
		if !ms.live(&pv) {
			return zero, false
		}
		if ms.readMarks {
			if !pending { // it may change in place: write it back
				ms.setPend(pm, uk, d.ukey, pv)
				s.disk.pending++
			}
			s.markDirty()
		}
		return pv.v, true
	}
	key, err := ms.mapKey(k, uk)
	if err != nil {
		panic(err)
	}
	x, written, ok, _, err := diskLoad(s.disk, key, ms.codec, d.copies, ms.ttl, s.now)
	if err != nil {
		panic(diskFailure(ms.name, err))
	}
	if ok && ms.readMarks {
		ms.setPend(ms.pendOf(k), uk, d.ukey, pendValue[V]{v: x, written: written})
		s.disk.pending++
		s.markDirty()
	}
	return x, ok
}

func (ms *MapState[K, UK, V]) diskPut(uk UK, x V, del bool) {
	if del && !ms.diskHas(uk) {
		return // nothing changes, as on the heap
	}
	s := ms.setup
	ms.setPend(ms.pendOf(s.cur.key), uk, nil, pendValue[V]{v: x, written: s.now, del: del})
	ms.d.writes++
	s.disk.pending++
	s.markDirty()
}

// diskHas reports whether the current key's map holds uk.
func (ms *MapState[K, UK, V]) diskHas(uk UK) bool {
	s := ms.setup
	ms.syncCaches()
	if pv, _, ok := ms.lookup(ms.d.pend[s.cur.key], uk); ok {
		return ms.live(&pv)
	}
	key, err := ms.mapKey(s.cur.key, uk)
	if err != nil {
		panic(err)
	}
	var ok bool
	if s.disk.val, ok, err = s.disk.db.Get(s.disk.val[:0], key); err != nil {
		panic(diskFailure(ms.name, err))
	}
	if !ok {
		return false
	}
	_, _, live, err := liveValue(s.disk.val, ms.ttl, s.now)
	if err != nil {
		panic(diskFailure(ms.name, err))
	}
	return live
}

// appendPrefixEnd appends to dst the smallest key after every key that
// starts with prefix, and returns nil when there is none (prefix is all
// 0xff).
func appendPrefixEnd(dst, prefix []byte) []byte {
	dst = append(dst, prefix...)
	for i := len(dst) - 1; i >= 0; i-- {
		if dst[i] < 0xff {
			dst[i]++
			return dst[:i+1]
		}
	}
	return nil
}

// mapCursor walks the stored entries of one key's map in the order of
// their user keys' bytes: from the key's cache, or from the disk.
type mapCursor[K Key, UK comparable, V any] struct {
	ms     *MapState[K, UK, V]
	it     *diskstate.Iter // nil: the cache
	prefix int             // of the stored keys, before the user key
	cache  []cacheEntry[UK, V]
	cbytes []byte
	i      int
}

// open starts the walk over k's stored entries, from pm's cache when it
// has one.
func (c *mapCursor[K, UK, V]) open(ms *MapState[K, UK, V], pm *pendMap[K, UK, V], k K) bool {
	c.ms = ms
	if pm != nil && pm.cached {
		c.cache, c.cbytes = pm.cache, pm.cbytes
		return len(c.cache) > 0
	}
	s, d := ms.setup, ms.d
	d.kb = s.codec.append(d.kb[:0], k)
	d.lo = diskstate.MapPrefix(d.lo[:0], s.keyGroup(k), d.sid, d.kb)
	hi := appendPrefixEnd(d.hi[:0], d.lo)
	if hi != nil {
		d.hi = hi
	}
	it, err := s.disk.db.NewIter(d.lo, hi)
	if err != nil {
		panic(diskFailure(ms.name, err))
	}
	c.it, c.prefix = it, len(d.lo)
	return it.First()
}

func (c *mapCursor[K, UK, V]) next() bool {
	if c.it == nil {
		c.i++
		return c.i < len(c.cache)
	}
	return c.it.Next()
}

// ukb is the current entry's user key's bytes.
func (c *mapCursor[K, UK, V]) ukb() []byte {
	if c.it == nil {
		return c.cache[c.i].ukb.in(c.cbytes)
	}
	return c.it.Key()[c.prefix:]
}

// live reports whether the current entry has not expired.
func (c *mapCursor[K, UK, V]) live() bool {
	ms := c.ms
	if c.it == nil {
		return ms.liveAt(c.cache[c.i].written)
	}
	if ms.ttl == 0 {
		return true
	}
	stored, err := c.it.Value()
	if err != nil {
		c.fail(err)
	}
	_, _, live, err := liveValue(stored, ms.ttl, ms.setup.now)
	if err != nil {
		c.fail(err)
	}
	return live
}

// entry decodes the current entry, which has not expired, and returns
// the length of its stored value too.
func (c *mapCursor[K, UK, V]) entry() (UK, V, int64, int) {
	if c.it == nil {
		e := &c.cache[c.i]
		return e.uk, e.v, e.written, 0
	}
	ms := c.ms
	stored, err := c.it.Value()
	if err != nil {
		c.fail(err)
	}
	written, value, _, err := liveValue(stored, ms.ttl, ms.setup.now)
	if err != nil {
		c.fail(err)
	}
	ukb := c.ukb()
	if !ms.d.keyCopies {
		ukb = append([]byte(nil), ukb...)
	}
	uk, err := ms.keyCodec.Decode(ukb)
	if err != nil {
		c.fail(err)
	}
	n := len(value)
	if !ms.d.copies {
		value = append([]byte(nil), value...)
	}
	x, err := ms.codec.Decode(value)
	if err != nil {
		c.fail(err)
	}
	return uk, x, written, n
}

// close ends the walk; a failure of the disk's fails the task.
func (c *mapCursor[K, UK, V]) close() {
	c.cache, c.cbytes = nil, nil
	if c.it != nil {
		it := c.it
		c.it = nil
		if err := it.Close(); err != nil {
			panic(diskFailure(c.ms.name, err))
		}
	}
}

// fail closes the walk and fails the task with err.
func (c *mapCursor[K, UK, V]) fail(err error) {
	if c.it != nil {
		_ = c.it.Close()
		c.it = nil
	}
	panic(diskFailure(c.ms.name, err))
}

// diskLen counts the live entries of the current key's map: the pending
// ones that set a value, and the stored ones that no pending write
// replaces. It decodes nothing and writes nothing.
func (ms *MapState[K, UK, V]) diskLen() int {
	s := ms.setup
	ms.syncCaches()
	n := 0
	pm := ms.d.pend[s.cur.key]
	var ord []int32
	if pm != nil {
		for i := range pm.ents {
			if ms.live(&pm.ents[i].pendValue) {
				n++
			}
		}
		ord = pm.order(ms.d.arena)
	}
	var c mapCursor[K, UK, V]
	j := 0
	for ok := c.open(ms, pm, s.cur.key); ok; ok = c.next() {
		ukb := c.ukb()
		for j < len(ord) && bytes.Compare(pm.ents[ord[j]].ukb.in(ms.d.arena), ukb) < 0 {
			j++
		}
		if j < len(ord) && bytes.Equal(pm.ents[ord[j]].ukb.in(ms.d.arena), ukb) {
			j++ // counted with the pending entries
			continue
		}
		if c.live() {
			n++
		}
	}
	c.close()
	return n
}

// cacheEntrySize is what a copy of a stored entry counts for besides
// the bytes of its user key and value.
func cacheEntrySize[UK comparable, V any]() int {
	var e cacheEntry[UK, V]
	return int(unsafe.Sizeof(e))
}

// diskAll calls yield with each live entry of the current key's map, in
// the order of the user keys' bytes (the order on disk): the stored
// entries merged with the pending writes, a pending write in place of a
// stored entry of its user key. Nothing is written to the database. An
// iteration to the end keeps a copy of the stored entries it read (see
// pendMap.cache), so that the next reads of the key's map need not read
// the disk. When UK or V reaches a reference, every stored entry handed
// out becomes pending, so that a change made in place is written back at
// the flush. A Put or Delete made by yield of a user key not reached yet
// is seen when it is reached, as the heap's Go maps do.
func (ms *MapState[K, UK, V]) diskAll(yield func(UK, V) bool) {
	s, d := ms.setup, ms.d
	k := s.cur.key
	ms.syncCaches()
	pm := ms.pendOf(k)
	ord := pm.order(d.arena)
	pm.iters++
	var c mapCursor[K, UK, V]
	defer func() {
		pm.iters--
		if c.it != nil { // yield panicked
			_ = c.it.Close()
		}
	}()
	marked := false
	// emit yields the pending entry i if it is live, and reports whether
	// to go on.
	emit := func(i int32) bool {
		e := &pm.ents[i]
		if !ms.live(&e.pendValue) {
			return true
		}
		if ms.readMarks && !marked {
			s.markDirty()
			marked = true
		}
		return yield(e.uk, e.v)
	}
	// The outermost iteration copies the stored entries into the cache
	// (within twice the budget) and, with write-back, builds the order of
	// the entries as they will be: the pending ones and those written
	// back.
	fill := !pm.cached && pm.iters == 1 && d.cacheBytes < 2*cacheBudget
	fillSize, drops, entrySize := 0, d.drops, cacheEntrySize[UK, V]()
	build := ms.readMarks && pm.iters == 1
	var built []int32
	if build {
		built = d.ord[:0]
	}
	writes := d.writes
	j := 0
	stop := func() {
		c.close()
		if fill {
			pm.dropCache()
		}
	}
	for ok := c.open(ms, pm, k); ok; ok = c.next() {
		ukb := c.ukb()
		replaced := false
		for j < len(ord) {
			i := ord[j]
			cmp := bytes.Compare(pm.ents[i].ukb.in(d.arena), ukb)
			if cmp > 0 {
				break
			}
			j++
			replaced = cmp == 0
			if build {
				built = append(built, i)
			}
			if !emit(i) {
				stop()
				return
			}
		}
		if replaced || !c.live() {
			continue
		}
		uk, x, written, vlen := c.entry()
		if d.writes != writes { // yield wrote: a write of uk wins
			if i, ok := pm.idx[uk]; ok {
				build = false // an entry the order does not place
				if !emit(i) {
					stop()
					return
				}
				continue
			}
		}
		if fill {
			if size := entrySize + len(ukb) + vlen; d.cacheBytes+fillSize+size < 2*cacheBudget {
				var sp span
				pm.cbytes, sp = appendSpan(pm.cbytes, ukb)
				pm.cache = append(pm.cache, cacheEntry[UK, V]{uk: uk, ukb: sp, v: x, written: written, size: int32(size)})
				fillSize += size
			} else {
				pm.dropCache()
				fill = false
			}
		}
		if ms.readMarks { // it may change in place: write it back
			if build {
				built = append(built, int32(len(pm.ents)))
			}
			ms.setPend(pm, uk, ukb, pendValue[V]{v: x, written: written})
			s.disk.pending++
			if !marked {
				s.markDirty()
				marked = true
			}
		}
		if !yield(uk, x) {
			stop()
			return
		}
	}
	c.close()
	if fill {
		if d.drops == drops { // every stored entry read: the copy is complete
			pm.cached, pm.csize = true, fillSize
			d.cacheBytes += fillSize
		} else {
			pm.dropCache()
		}
	}
	for ; j < len(ord); j++ {
		if build {
			built = append(built, ord[j])
		}
		if !emit(ord[j]) {
			return
		}
	}
	if build && len(built) == len(pm.ents) {
		d.ord, pm.ord = pm.ord[:0], built
	}
}

// flushPending writes the pending entries, in the order of their keys,
// and brings the copies of stored entries up to date with them (or
// forgets them, for a state whose values reach references: those may
// change in place). before is the database's version before the flush.
func (ms *MapState[K, UK, V]) flushPending(d *diskKeyed, before uint64) error {
	md := ms.d
	if err := md.encErr; err != nil {
		md.encErr = nil
		return err
	}
	keep := md.gen == before && !ms.readMarks
	if !keep {
		ms.dropCaches()
	} else if md.cacheBytes > cacheBudget {
		ms.evict()
	}
	for _, pm := range md.touched {
		ord := pm.order(md.arena)
		if len(pm.ents) > 0 {
			md.kb = ms.setup.codec.append(md.kb[:0], pm.k)
			d.key = diskstate.MapPrefix(d.key[:0], ms.setup.keyGroup(pm.k), md.sid, md.kb)
			n := len(d.key)
			for _, i := range ord {
				e := &pm.ents[i]
				d.key = append(d.key[:n], e.ukb.in(md.arena)...)
				if e.del {
					if err := d.write(d.key, nil, true); err != nil {
						return err
					}
					continue
				}
				var err error
				if d.val, err = ms.codec.Append(storedPrefix(d.val[:0], ms.ttl, e.written), e.v); err != nil {
					return fmt.Errorf("state %q: %w", ms.name, err)
				}
				e.vlen = int32(len(d.val))
				if err := d.write(d.key, d.val, false); err != nil {
					return err
				}
			}
		}
		if pm.cached {
			if keep && md.cacheBytes <= cacheBudget {
				ms.mergeCache(pm, ord)
			} else {
				md.cacheBytes -= pm.csize
				pm.dropCache()
			}
		}
		clear(pm.idx)
		clear(pm.ents)
		pm.ents, pm.ord, pm.touched = pm.ents[:0], pm.ord[:0], false
		if !pm.cached {
			delete(md.pend, pm.k)
			ms.recycle(pm)
		}
	}
	clear(md.touched)
	md.touched = md.touched[:0]
	md.arena = md.arena[:0]
	return nil
}

// mergeCache makes pm's cache what the stored entries are once its
// pending entries, in the order ord, are written.
func (ms *MapState[K, UK, V]) mergeCache(pm *pendMap[K, UK, V], ord []int32) {
	md := ms.d
	out, ob := md.spare[:0], md.spareBytes[:0]
	entrySize, size := cacheEntrySize[UK, V](), 0
	i, j := 0, 0
	for i < len(pm.cache) || j < len(ord) {
		cmp := -1
		switch {
		case i == len(pm.cache):
			cmp = 1
		case j < len(ord):
			cmp = bytes.Compare(pm.cache[i].ukb.in(pm.cbytes), pm.ents[ord[j]].ukb.in(md.arena))
		}
		if cmp < 0 { // stored, not written
			e := pm.cache[i]
			i++
			if !ms.liveAt(e.written) {
				continue // expired: no longer worth keeping
			}
			ob, e.ukb = appendSpan(ob, e.ukb.in(pm.cbytes))
			out = append(out, e)
			size += int(e.size)
			continue
		}
		if cmp == 0 {
			i++ // written over
		}
		pe := &pm.ents[ord[j]]
		j++
		if pe.del {
			continue
		}
		var sp span
		ob, sp = appendSpan(ob, pe.ukb.in(md.arena))
		n := entrySize + int(sp.n) + int(pe.vlen)
		out = append(out, cacheEntry[UK, V]{uk: pe.uk, ukb: sp, v: pe.v, written: pe.written, size: int32(n)})
		size += n
	}
	clear(pm.cache)
	md.spare, pm.cache = pm.cache[:0], out
	md.spareBytes, pm.cbytes = pm.cbytes[:0], ob
	md.cacheBytes += size - pm.csize
	pm.csize = size
}

// evict forgets the copies of the keys not used since the last flush
// until the copies count for at most three quarters of the budget.
func (ms *MapState[K, UK, V]) evict() {
	md := ms.d
	for k, pm := range md.pend {
		if md.cacheBytes <= cacheBudget/4*3 {
			return
		}
		if pm.touched || pm.iters > 0 {
			continue
		}
		md.cacheBytes -= pm.csize
		pm.dropCache()
		delete(md.pend, k)
		ms.recycle(pm)
	}
}

// synced tells the state that the database's version went from before
// to after by writes that its copies of stored entries account for (a
// flush, or the clean-up of expired entries).
func (ms *MapState[K, UK, V]) synced(before, after uint64) {
	if ms.d.gen != before {
		ms.dropCaches()
	}
	ms.d.gen = after
}

func (ms *MapState[K, UK, V]) appendDiskEntry(b *snapshotBuilder, a *arena, kg int, rest, value []byte) error {
	kb, ukb, ok := diskstate.SplitMap(rest)
	if !ok {
		return fmt.Errorf("state %q: a stored key of key group %d does not parse", ms.name, kg)
	}
	ns := b.named(kg, ms.name)
	ns.Entries = append(ns.Entries, &messages.StateEntry{Key: a.copy(kb), MapKey: a.copy(ukb), Value: a.copy(value)})
	return nil
}

func (ms *MapState[K, UK, V]) restoreDisk(kg int, e *messages.StateEntry) error {
	if _, err := ms.setup.codec.decode(e.Key); err != nil {
		return err
	}
	if _, err := ms.keyCodec.Decode(e.MapKey); err != nil {
		return err
	}
	if _, err := ms.codec.Decode(e.Value); err != nil {
		return err
	}
	return ms.setup.restoreDiskEntry(diskstate.MapKey(ms.setup.disk.key[:0], kg, ms.d.sid, e.Key, e.MapKey), ms.ttl, e)
}

func (ms *MapState[K, UK, V]) ttlNanos() int64 { return ms.ttl }

// restoreDiskEntry writes a restored entry at key, with its write time
// for a state with a time-to-live; an expired one is left out.
func (s *KeyedSetup[K]) restoreDiskEntry(key []byte, ttl int64, e *messages.StateEntry) error {
	d := s.disk
	d.key = key
	value := e.Value
	if ttl > 0 {
		written, live := s.restoredWrite(ttl, e)
		if !live {
			return nil
		}
		d.val = append(binary.BigEndian.AppendUint64(d.val[:0], uint64(written)), e.Value...)
		value = d.val
	}
	return d.restoreWrite(d.key, value)
}

// cleanupDisk looks at the next few stored entries after the clean-up's
// cursor and deletes those of states with a time-to-live that have
// expired at now, wrapping around at the end.
func (d *diskKeyed) cleanupDisk(now int64) error {
	before := d.db.Version()
	seen := 0
	var last []byte
	err := d.db.Scan(d.ttlCursor, nil, func(key, value []byte) error {
		seen++
		last = append(last[:0], key...)
		if _, sid, _, ok := diskstate.Split(key); ok && int(sid) < len(d.states) {
			if ttl := d.states[sid].ttlNanos(); ttl > 0 {
				if _, _, live, _ := liveValue(value, ttl, now); !live {
					if err := d.batch.Delete(key); err != nil {
						return err
					}
				}
			}
		}
		if seen == ttlCleanupBatch*4 {
			return diskstate.Stop
		}
		return nil
	})
	if err != nil {
		return err
	}
	if seen < ttlCleanupBatch*4 {
		d.ttlCursor = nil // the end: from the start next time
	} else {
		d.ttlCursor = append(last, 0) // just after the last key seen
	}
	if err := d.db.Apply(d.batch); err != nil {
		return err
	}
	d.synced(before) // what it deleted had expired: no copy kept shows it
	return nil
}
