package dataflow

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// A state's time-to-live (WithTTL) is judged in processing time: an entry
// expires ttl after it was last written (Set, Put; reads do not renew it),
// and is never returned after that. Expired entries are removed when a
// read finds them, when a snapshot passes them (they are not stored), by
// an incremental clean-up after each input batch, and when a restore
// meets them (they are not loaded). A checkpoint stores each entry's
// write time, so an entry expires at the same moment after a restore,
// whichever backend restores it. A restore also leaves out the entries
// that had expired under the checkpoint's own time-to-live, whatever the
// state declares now (see ttl_restore.go). A state first declared with a
// time-to-live counts the entries of a checkpoint without one as written
// at the restore; a state declared without one keeps every entry that had
// not expired by the restore.

// WithTTL gives the state a time-to-live: an entry expires d after it was
// last set, and is never returned after that (see the package
// documentation of topology). It must be called in the setup function,
// before the setup returns; d must be positive.
func (v *ValueState[K, V]) WithTTL(d time.Duration) *ValueState[K, V] {
	if v.setup.declareTTL(v.name, d) {
		v.ttl = int64(d)
		v.desc.TtlNanos = int64(d)
		if v.d == nil {
			v.written = map[K]int64{}
		}
		v.setup.ttlStates = append(v.setup.ttlStates, v)
	}
	return v
}

// WithTTL gives the map state a time-to-live per user key, as
// ValueState.WithTTL does per key.
func (ms *MapState[K, UK, V]) WithTTL(d time.Duration) *MapState[K, UK, V] {
	if ms.setup.declareTTL(ms.name, d) {
		ms.ttl = int64(d)
		ms.desc.TtlNanos = int64(d)
		if ms.d == nil {
			ms.written = map[K]map[UK]int64{}
		}
		ms.setup.ttlStates = append(ms.setup.ttlStates, ms)
	}
	return ms
}

// declareTTL checks a time-to-live of state name; false when it is
// refused (the setup then fails).
func (s *KeyedSetup[K]) declareTTL(name string, d time.Duration) bool {
	if s.sealed {
		panic(fmt.Sprintf("topology: operator %q: state %q: WithTTL called after the setup function returned; call it where the state is declared",
			s.task.Operator, name))
	}
	if d <= 0 {
		s.fail("state %q: WithTTL(%v): the time-to-live must be positive", name, d)
		return false
	}
	s.ttl = true
	if s.clock == nil {
		s.clock = func() int64 { return time.Now().UnixNano() }
	}
	return true
}

// tick reads the processing time that expiries are judged at, when some
// state has a time-to-live: once per batch, timer run, snapshot and
// restore rather than once per record.
func (s *KeyedSetup[K]) tick() {
	if s.ttl {
		s.now = s.clock()
	}
}

// restoredWrite is the write time of a restored entry of a state with a
// time-to-live, and whether it is still live: an entry stored without one
// (its state had none) counts as written now.
func (s *KeyedSetup[K]) restoredWrite(ttl int64, e *messages.StateEntry) (int64, bool) {
	w := e.GetWrittenAt()
	if w == 0 {
		w = s.now
	}
	return w, s.now-w < ttl
}

// ttlState is a state with a time-to-live, for the incremental clean-up.
type ttlState interface {
	// cleanup removes some of the expired entries on the heap; the
	// on-disk ones are cleaned up by the backend's scan (cleanupDisk).
	cleanup(now int64)
}

// ttlCleanupBatch is how many entries of each state the clean-up after an
// input batch looks at.
const ttlCleanupBatch = 16

// cleanupTTL removes expired entries incrementally: after every input
// batch, it looks at a few entries of each state with a time-to-live.
// Go's map iteration starts at a random entry, so the heap's clean-up
// visits every entry over time; the disk's walks its keys in order.
func (s *KeyedSetup[K]) cleanupTTL() error {
	if !s.ttl {
		return nil
	}
	if s.disk != nil {
		return s.disk.cleanupDisk(s.now)
	}
	for _, st := range s.ttlStates {
		st.cleanup(s.now)
	}
	return nil
}

// expire reports whether the current key's value has expired, and
// removes it if so. A removal marks the key group written, as every
// removal by expiry does: an incremental checkpoint then stores the group
// again instead of referring back to an object that holds the entry.
func (v *ValueState[K, V]) expire(k K) bool {
	if v.setup.now-v.written[k] < v.ttl {
		return false
	}
	v.m.remove(k)
	delete(v.written, k)
	v.setup.markDirty()
	return true
}

// liveLen counts the keys whose value has not expired.
func (v *ValueState[K, V]) liveLen() int {
	n := 0
	for _, w := range v.written {
		if v.setup.now-w < v.ttl {
			n++
		}
	}
	return n
}

func (v *ValueState[K, V]) cleanup(now int64) {
	if v.d != nil {
		return
	}
	n := 0
	for k, w := range v.written {
		if now-w >= v.ttl {
			v.m.remove(k)
			delete(v.written, k)
			v.setup.markGroup(v.setup.keyGroup(k))
		}
		if n++; n == ttlCleanupBatch {
			return
		}
	}
}

// expire reports whether uk's value of key k has expired, and removes it
// if so.
func (ms *MapState[K, UK, V]) expire(k K, uk UK) bool {
	if ms.setup.now-ms.written[k][uk] < ms.ttl {
		return false
	}
	ms.removeEntry(k, uk)
	ms.setup.markDirty()
	return true
}

// removeEntry removes uk from key k's map, and the map once empty.
func (ms *MapState[K, UK, V]) removeEntry(k K, uk UK) {
	inner := ms.m[k]
	delete(inner, uk)
	if len(inner) == 0 {
		delete(ms.m, k)
	}
	ms.dropWritten(k, uk)
}

func (ms *MapState[K, UK, V]) setWritten(k K, uk UK, at int64) {
	w := ms.written[k]
	if w == nil {
		w = map[UK]int64{}
		ms.written[k] = w
	}
	w[uk] = at
}

func (ms *MapState[K, UK, V]) dropWritten(k K, uk UK) {
	w := ms.written[k]
	delete(w, uk)
	if len(w) == 0 {
		delete(ms.written, k)
	}
}

// liveLen counts the current key's user keys that have not expired.
func (ms *MapState[K, UK, V]) liveLen() int {
	n := 0
	for _, w := range ms.written[ms.setup.cur.key] {
		if ms.setup.now-w < ms.ttl {
			n++
		}
	}
	return n
}

func (ms *MapState[K, UK, V]) cleanup(now int64) {
	if ms.d != nil {
		return
	}
	n := 0
	for k, w := range ms.written {
		for uk, at := range w {
			if now-at >= ms.ttl {
				ms.removeEntry(k, uk)
				ms.setup.markGroup(ms.setup.keyGroup(k))
			}
		}
		if n++; n == ttlCleanupBatch {
			return
		}
	}
}

// endBatch writes the pending on-disk state and cleans up a few expired
// entries, after an input batch.
func (s *KeyedSetup[K]) endBatch() error {
	if err := s.flushState(); err != nil {
		return err
	}
	if err := s.cleanupTTL(); err != nil {
		return fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
	}
	return nil
}
