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
	// keepers are the value states, which keep values decoded (see
	// diskValue.kept); keptGen is the database's generation (see
	// diskstate.DB.Generation) their values were kept at.
	keepers []keeper
	keptGen uint64
	// staging: a flush is under way, whose writes are staged (in staged,
	// their bytes in stageBuf) and go into the batch in key order (see
	// unstage).
	staging  bool
	staged   []stagedWrite
	stageBuf []byte
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
	// forgets them, unless keep: a flush in the middle of a record keeps
	// the values it handed out, which may still change in place.
	flushPending(d *diskKeyed, keep bool) error
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
func (s *KeyedSetup[K]) flushState() error { return s.writePending(false) }

// writePending writes the pending entries of the on-disk states and, but
// for keep (in the middle of a record), forgets them.
func (s *KeyedSetup[K]) writePending(keep bool) error {
	d := s.disk
	if d == nil || d.pending == 0 {
		return nil
	}
	d.staging = true
	for _, ds := range d.states {
		if err := ds.flushPending(d, keep); err != nil {
			d.staging, d.staged, d.stageBuf = false, d.staged[:0], d.stageBuf[:0]
			return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
		}
	}
	d.staging = false
	if !keep {
		d.pending = 0
	}
	d.written = true
	if err := d.unstage(); err != nil {
		return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
	}
	if err := d.db.Apply(d.batch); err != nil {
		return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
	}
	return nil
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
		d.staged = append(d.staged, stagedWrite{at: len(d.stageBuf), keyLen: len(key), valueLen: len(value), del: del})
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
	slices.SortFunc(d.staged, func(a, b stagedWrite) int {
		if c := bytes.Compare(buf[a.at:a.at+a.keyLen], buf[b.at:b.at+b.keyLen]); c != 0 {
			return c
		}
		return cmp.Compare(a.at, b.at) // two writes of a key: the later last
	})
	var err error
	for _, w := range d.staged {
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
	d.staged, d.stageBuf = d.staged[:0], d.stageBuf[:0]
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

// diskLen counts the state's keys: the pending ones are written first.
func (v *ValueState[K, V]) diskLen() int {
	s := v.setup
	if err := s.writePending(true); err != nil {
		panic(diskFailure(v.name, err))
	}
	n := 0
	err := s.disk.db.Scan(nil, nil, func(key, value []byte) error {
		if _, sid, _, ok := diskstate.Split(key); ok && sid == v.d.sid {
			if _, _, live, err := liveValue(value, v.ttl, s.now); err != nil || !live {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		panic(diskFailure(v.name, err))
	}
	return n
}

func (v *ValueState[K, V]) flushPending(d *diskKeyed, keep bool) error {
	s := v.setup
	if !keep {
		d.checkKept()
	}
	for k, p := range v.d.pend {
		key := s.diskKey(v.d.sid, k)
		if p.del {
			if err := d.write(key, nil, true); err != nil {
				return err
			}
			if !keep {
				v.d.keep(d, k, p.v, 0, true, len(key))
			}
			continue
		}
		var err error
		if d.val, err = v.codec.Append(storedPrefix(d.val[:0], v.ttl, p.written), p.v); err != nil {
			return fmt.Errorf("state %q: %w", v.name, err)
		}
		if err := d.write(key, d.val, false); err != nil {
			return err
		}
		if !keep { // it leaves the pending writes: the database holds it now
			v.d.keep(d, k, p.v, p.written, false, len(key)+len(d.val))
		}
	}
	if !keep {
		clear(v.d.pend)
	}
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

// pendMap is a map state's pending writes of one key: the user keys
// written, and those handed out that may change in place.
type pendMap[UK comparable, V any] map[UK]pendValue[V]

// diskMap is a map state's on-disk part.
type diskMap[K Key, UK comparable, V any] struct {
	sid       uint16
	copies    bool // the value codec's Decode copies
	keyCopies bool // the user-key codec's Decode copies
	pend      map[K]pendMap[UK, V]
	ukey      []byte // scratch for user keys
}

// mapKey sets the setup's scratch key to the stored key of (k, uk).
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

func (ms *MapState[K, UK, V]) pendOf(k K) pendMap[UK, V] {
	p := ms.d.pend[k]
	if p == nil {
		p = pendMap[UK, V]{}
		ms.d.pend[k] = p
	}
	return p
}

func (ms *MapState[K, UK, V]) diskGet(uk UK) (V, bool) {
	s, d := ms.setup, ms.d
	k := s.cur.key
	if p, ok := d.pend[k][uk]; ok {
		if p.del || (ms.ttl > 0 && s.now-p.written >= ms.ttl) {
			var zero V
			return zero, false
		}
		if ms.readMarks {
			s.markDirty()
		}
		return p.v, true
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
		ms.pendOf(k)[uk] = pendValue[V]{v: x, written: written}
		s.disk.pending++
		s.markDirty()
	}
	return x, ok
}

func (ms *MapState[K, UK, V]) diskPut(uk UK, x V, del bool) {
	if del && !ms.diskHas(uk) {
		return // nothing changes, as on the heap
	}
	ms.pendOf(ms.setup.cur.key)[uk] = pendValue[V]{v: x, written: ms.setup.now, del: del}
	ms.setup.disk.pending++
	ms.setup.markDirty()
}

// diskHas reports whether the current key's map holds uk.
func (ms *MapState[K, UK, V]) diskHas(uk UK) bool {
	s := ms.setup
	if p, ok := ms.d.pend[s.cur.key][uk]; ok {
		return !p.del && (ms.ttl == 0 || s.now-p.written < ms.ttl)
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

// diskScan flushes the pending writes, then calls fn with each stored
// user key and value of the current key that has not expired, decoded, in
// the order of the user keys' bytes, with its write time.
func (ms *MapState[K, UK, V]) diskScan(fn func(UK, V, int64) bool) {
	s := ms.setup
	if err := s.writePending(true); err != nil {
		panic(diskFailure(ms.name, err))
	}
	k := s.cur.key
	kb := s.codec.append(nil, k)
	lo := diskstate.MapPrefix(nil, s.keyGroup(k), ms.d.sid, kb)
	err := s.disk.db.Scan(lo, diskstate.PrefixEnd(lo), func(key, stored []byte) error {
		written, value, live, err := liveValue(stored, ms.ttl, s.now)
		if err != nil || !live {
			return err
		}
		ukb := key[len(lo):]
		if !ms.d.keyCopies {
			ukb = append([]byte(nil), ukb...)
		}
		uk, err := ms.keyCodec.Decode(ukb)
		if err != nil {
			return err
		}
		if !ms.d.copies {
			value = append([]byte(nil), value...)
		}
		x, err := ms.codec.Decode(value)
		if err != nil {
			return err
		}
		if !fn(uk, x, written) {
			return diskstate.Stop
		}
		return nil
	})
	if err != nil {
		panic(diskFailure(ms.name, err))
	}
}

func (ms *MapState[K, UK, V]) diskLen() int {
	n := 0
	ms.diskScan(func(UK, V, int64) bool { n++; return true })
	return n
}

func (ms *MapState[K, UK, V]) diskAll(yield func(UK, V) bool) {
	k := ms.setup.cur.key
	marked := false
	ms.diskScan(func(uk UK, x V, written int64) bool {
		if ms.readMarks { // it may change in place: write it back
			ms.pendOf(k)[uk] = pendValue[V]{v: x, written: written}
			ms.setup.disk.pending++
			if !marked {
				ms.setup.markDirty()
				marked = true
			}
		}
		return yield(uk, x)
	})
}

func (ms *MapState[K, UK, V]) flushPending(d *diskKeyed, keep bool) error {
	for k, p := range ms.d.pend {
		for uk, pv := range p {
			key, err := ms.mapKey(k, uk)
			if err != nil {
				return err
			}
			if pv.del {
				if err := d.write(key, nil, true); err != nil {
					return err
				}
				continue
			}
			if d.val, err = ms.codec.Append(storedPrefix(d.val[:0], ms.ttl, pv.written), pv.v); err != nil {
				return fmt.Errorf("state %q: %w", ms.name, err)
			}
			if err := d.write(key, d.val, false); err != nil {
				return err
			}
		}
	}
	if !keep {
		clear(ms.d.pend)
	}
	return nil
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
	return d.db.Apply(d.batch)
}
