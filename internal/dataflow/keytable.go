package dataflow

import (
	"hash/maphash"
	"iter"
	"math/rand/v2"
	"reflect"
	"unsafe"
)

// keyTable is the heap backend's table of one value per key: open
// addressing with linear probing over a power-of-two array of slots, and
// a control byte per slot (0: empty, else 0x80 and 7 bits of the key's
// hash, so that a probe compares keys only on a likely match).
//
// It replaces a Go map on the per-record path of ValueState because a
// record's Get and Set of its own key then cost one lookup, not two: find
// remembers the slot it returned for a key, and the next find of the same
// key, with the table unchanged since (gen), is a comparison. The parity
// job's keyed count spent 20 ns per record in the map's lookup alone.
//
// Keys are hashed with a seed drawn per table (maphash for strings, the
// murmur3 finaliser over the integer for integer keys), so that the
// slots that keys land in cannot be chosen from outside to make probes
// long, as a deterministic hash would let them be. A table is used by one
// task at a time, like the map it replaces.
type keyTable[K Key, V any] struct {
	ctrl  []uint8
	slots []keySlot[K, V]
	mask  uint64
	n     int // keys held
	max   int // keys held before the table doubles (3/4 of its slots)
	// gen changes whenever a slot is filled, emptied or moved, which
	// invalidates the remembered lookup.
	gen uint64
	// The last lookup: its key, the slot and whether the key was there,
	// valid while gen is lastGen.
	lastKey   K
	lastSlot  uint64
	lastFound bool
	lastGen   uint64

	kind keyKind
	seed uint64
	str  maphash.Seed
	toU  func(K) uint64 // integers of under 64 bits
}

type keySlot[K Key, V any] struct {
	k K
	v V
}

// keyKind says how a keyTable hashes its keys.
type keyKind uint8

const (
	keyWord   keyKind = iota // 8-byte integers, hashed as they are
	keyString                // strings, through maphash
	keySmall                 // integers of under 8 bytes, widened by toU
)

const minTableSlots = 8

// newKeyTable returns an empty table on cache lines of its own (its last
// lookup is written per record; see isolated).
func newKeyTable[K Key, V any](codec keyCodec[K]) *keyTable[K, V] {
	t := isolated[keyTable[K, V]]()
	switch rt := reflect.TypeFor[K](); {
	case rt.Kind() == reflect.String:
		t.kind = keyString
		t.str = maphash.MakeSeed()
	case rt.Size() == 8:
		t.kind = keyWord
	default:
		t.kind = keySmall
		t.toU = codec.toU
	}
	t.seed = rand.Uint64()
	t.gen = 1 // lastGen starts at 0: no lookup is remembered
	t.resize(minTableSlots)
	return t
}

// hash is the seeded hash of k. The common case, an 8-byte integer, is
// inlined into its callers.
func (t *keyTable[K, V]) hash(k K) uint64 {
	if t.kind == keyWord {
		return HashUint64(*(*uint64)(unsafe.Pointer(&k)) ^ t.seed)
	}
	return t.hashOther(k)
}

func (t *keyTable[K, V]) hashOther(k K) uint64 {
	if t.kind == keyString {
		return maphash.String(t.str, *(*string)(unsafe.Pointer(&k)))
	}
	return HashUint64(t.toU(k) ^ t.seed)
}

func tag(h uint64) uint8 { return uint8(h>>57) | 0x80 }

// find returns the slot of k and true, or the empty slot where k would go
// and false.
func (t *keyTable[K, V]) find(k K) (uint64, bool) {
	if t.lastGen == t.gen && t.lastKey == k {
		return t.lastSlot, t.lastFound
	}
	h := t.hash(k)
	want := tag(h)
	i := h & t.mask
	for {
		c := t.ctrl[i]
		if c == 0 {
			break
		}
		if c == want && t.slots[i].k == k {
			t.lastKey, t.lastSlot, t.lastFound, t.lastGen = k, i, true, t.gen
			return i, true
		}
		i = (i + 1) & t.mask
	}
	t.lastKey, t.lastSlot, t.lastFound, t.lastGen = k, i, false, t.gen
	return i, false
}

// get returns k's value and whether k is in the table.
func (t *keyTable[K, V]) get(k K) (V, bool) {
	i, ok := t.find(k)
	if !ok {
		var zero V
		return zero, false
	}
	return t.slots[i].v, true
}

// set stores x as k's value.
func (t *keyTable[K, V]) set(k K, x V) {
	i, ok := t.find(k)
	if ok {
		t.slots[i].v = x
		return
	}
	t.fill(i, k, x)
}

// fill puts k, which is not in the table, into the empty slot i that find
// returned for it.
func (t *keyTable[K, V]) fill(i uint64, k K, x V) {
	t.gen++
	if t.n+1 > t.max {
		t.resize(2 * len(t.ctrl))
		i, _ = t.find(k)
		t.gen++
	}
	t.ctrl[i] = tag(t.hash(k))
	t.slots[i] = keySlot[K, V]{k: k, v: x}
	t.n++
	t.lastKey, t.lastSlot, t.lastFound, t.lastGen = k, i, true, t.gen
}

// remove deletes k, if it is in the table. The keys after it in its run
// of full slots move back into the gap when their home slot allows, so
// that no slot is ever marked deleted and lookups stay as short as the
// table's load makes them.
func (t *keyTable[K, V]) remove(k K) {
	i, ok := t.find(k)
	if !ok {
		return
	}
	t.gen++
	t.n--
	for j := (i + 1) & t.mask; t.ctrl[j] != 0; j = (j + 1) & t.mask {
		home := t.hash(t.slots[j].k) & t.mask
		// The key at j may fill the gap at i unless its home slot lies
		// cyclically in (i, j]: it would then sit before its home.
		if (j-home)&t.mask >= (j-i)&t.mask {
			t.ctrl[i], t.slots[i] = t.ctrl[j], t.slots[j]
			i = j
		}
	}
	t.ctrl[i] = 0
	t.slots[i] = keySlot[K, V]{}
}

// resize moves every key into a table of n slots (a power of two).
func (t *keyTable[K, V]) resize(n int) {
	ctrl, slots := t.ctrl, t.slots
	t.ctrl, t.slots = make([]uint8, n), make([]keySlot[K, V], n)
	t.mask, t.max = uint64(n-1), n/4*3
	t.gen++
	for i, c := range ctrl {
		if c == 0 {
			continue
		}
		j := t.hash(slots[i].k) & t.mask
		for t.ctrl[j] != 0 {
			j = (j + 1) & t.mask
		}
		t.ctrl[j], t.slots[j] = c, slots[i]
	}
}

// len is the number of keys in the table.
func (t *keyTable[K, V]) len() int { return t.n }

// all yields every key and value. The table must not change during the
// loop (collect the keys to remove, and remove them after it).
func (t *keyTable[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i, c := range t.ctrl {
			if c != 0 && !yield(t.slots[i].k, t.slots[i].v) {
				return
			}
		}
	}
}
