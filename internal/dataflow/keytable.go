package dataflow

import (
	"hash/maphash"
	"iter"
	"math/rand/v2"
	"reflect"
	"unsafe"
)

// keyTable is the heap backend's table of one value per key.
//
// It replaces a Go map on the per-record path of ValueState because a
// record's Get and Set of its own key then cost one lookup, not two: find
// remembers the slot it returned for a key, and the next find of the same
// key, with the table unchanged since (gen), is a comparison. The parity
// job's keyed count spent 20 ns per record in the map's lookup alone.
//
// The keys are spread over parts by the top bits of their hash (extendible
// hashing, as Go's own maps do): a directory of 2^depth entries points at
// the parts, and a part of local depth d serves the 2^(depth-d) entries
// that share its d top bits. A part is open addressing with linear probing
// over a power-of-two array of slots, and a control byte per slot (0:
// empty, else 0x80 and 7 bits of the key's hash, so that a probe compares
// keys only on a likely match). A part doubles up to maxPartSlots slots
// and then splits in two by the next bit of the hash, so that growing a
// table of any size copies the keys of one part at most; only the
// directory, a pointer per part, is copied when it doubles.
//
// Keys are hashed with a seed drawn per table (maphash for strings, the
// murmur3 finaliser over the integer for integer keys), so that the slots
// that keys land in cannot be chosen from outside to make probes long, as
// a deterministic hash would let them be. A table is used by one task at a
// time, like the map it replaces.
type keyTable[K Key, V any] struct {
	// first is the table's only part until it splits (depth 0): a lookup
	// then finds it without a load.
	first keyPart[K, V]
	dir   []*keyPart[K, V]
	depth uint8 // the directory has 2^depth entries
	n     int   // keys held
	// gen changes whenever a slot is filled, emptied or moved, which
	// invalidates the remembered lookup.
	gen uint64
	// The last lookup: its key, part and slot and whether the key was
	// there, valid while gen is lastGen.
	lastKey   K
	lastPart  *keyPart[K, V]
	lastSlot  uint64
	lastFound bool
	lastGen   uint64

	kind keyKind
	seed uint64
	str  maphash.Seed
	toU  func(K) uint64 // integers of under 64 bits
}

// keyPart is one part of a keyTable.
type keyPart[K Key, V any] struct {
	ctrl  []uint8
	slots []keySlot[K, V]
	mask  uint64
	n     int   // keys held
	max   int   // keys held before the part grows (3/4 of its slots)
	depth uint8 // the top bits of the hash its keys share
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

const (
	minPartSlots = 8
	// maxPartSlots bounds a part: 128 KiB of slots for 8-byte keys and
	// values.
	maxPartSlots = 1 << 13
)

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
	t.first = *newKeyPart[K, V](minPartSlots, 0)
	t.dir = []*keyPart[K, V]{&t.first}
	return t
}

func newKeyPart[K Key, V any](slots int, depth uint8) *keyPart[K, V] {
	return &keyPart[K, V]{ctrl: make([]uint8, slots), slots: make([]keySlot[K, V], slots),
		mask: uint64(slots - 1), max: slots / 4 * 3, depth: depth}
}

// hash is the seeded hash of k. find computes the common case, an 8-byte
// integer, itself: generic code is compiled once per shape, and this
// method is over the compiler's inlining budget there.
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

// tag is the control byte of a full slot: bits the part's index (the low
// bits) and the directory (the top bits) do not use.
func tag(h uint64) uint8 { return uint8(h>>32) | 0x80 }

// part returns the part of the keys of hash h.
func (t *keyTable[K, V]) part(h uint64) *keyPart[K, V] {
	if t.depth == 0 {
		return &t.first
	}
	return t.dir[h>>(64-uint64(t.depth))]
}

// find returns the part of k and the slot of k in it and true, or the
// empty slot where k would go and false.
func (t *keyTable[K, V]) find(k K) (*keyPart[K, V], uint64, bool) {
	if t.lastGen == t.gen && t.lastKey == k {
		return t.lastPart, t.lastSlot, t.lastFound
	}
	var h uint64
	if t.kind == keyWord {
		h = HashUint64(*(*uint64)(unsafe.Pointer(&k)) ^ t.seed)
	} else {
		h = t.hashOther(k)
	}
	p := t.part(h)
	want := tag(h)
	i := h & p.mask
	for {
		c := p.ctrl[i]
		if c == 0 {
			break
		}
		if c == want && p.slots[i].k == k {
			t.lastKey, t.lastPart, t.lastSlot, t.lastFound, t.lastGen = k, p, i, true, t.gen
			return p, i, true
		}
		i = (i + 1) & p.mask
	}
	t.lastKey, t.lastPart, t.lastSlot, t.lastFound, t.lastGen = k, p, i, false, t.gen
	return p, i, false
}

// set stores x as k's value.
func (t *keyTable[K, V]) set(k K, x V) {
	p, i, ok := t.find(k)
	if ok {
		p.slots[i].v = x
		return
	}
	t.fill(p, i, k, x)
}

// fill puts k, which is not in the table, into the empty slot i of part p
// that find returned for it.
func (t *keyTable[K, V]) fill(p *keyPart[K, V], i uint64, k K, x V) {
	t.gen++
	h := t.hash(k)
	if p.n+1 > p.max {
		if len(p.ctrl) < maxPartSlots {
			t.resize(p, 2*len(p.ctrl))
		} else {
			t.split(p)
		}
		p, i, _ = t.find(k)
		t.gen++
	}
	p.ctrl[i] = tag(h)
	p.slots[i] = keySlot[K, V]{k: k, v: x}
	p.n++
	t.n++
	t.lastKey, t.lastPart, t.lastSlot, t.lastFound, t.lastGen = k, p, i, true, t.gen
}

// remove deletes k, if it is in the table. The keys after it in its run
// of full slots move back into the gap when their home slot allows, so
// that no slot is ever marked deleted and lookups stay as short as the
// part's load makes them. A part left with under an eighth of its slots
// full halves (down to minPartSlots), so that a table whose keys are
// cleared or expire gives its memory back; it grows again at three
// quarters, so a key set and removed at the edge does not resize it each
// time. Parts that split do not merge again: their number stays, each at
// least minPartSlots.
func (t *keyTable[K, V]) remove(k K) {
	p, i, ok := t.find(k)
	if !ok {
		return
	}
	t.gen++
	t.n--
	p.n--
	for j := (i + 1) & p.mask; p.ctrl[j] != 0; j = (j + 1) & p.mask {
		home := t.hash(p.slots[j].k) & p.mask
		// The key at j may fill the gap at i unless its home slot lies
		// cyclically in (i, j]: it would then sit before its home.
		if (j-home)&p.mask >= (j-i)&p.mask {
			p.ctrl[i], p.slots[i] = p.ctrl[j], p.slots[j]
			i = j
		}
	}
	p.ctrl[i] = 0
	p.slots[i] = keySlot[K, V]{}
	if n := len(p.ctrl); n > minPartSlots && p.n < n/8 {
		t.resize(p, n/2)
	}
}

// resize moves the keys of part p into n slots (a power of two).
func (t *keyTable[K, V]) resize(p *keyPart[K, V], n int) {
	ctrl, slots := p.ctrl, p.slots
	*p = *newKeyPart[K, V](n, p.depth)
	t.gen++
	for i, c := range ctrl {
		if c != 0 {
			p.put(c, t.hash(slots[i].k), slots[i])
		}
	}
}

// put places a key of hash h, not in p, with control byte c.
func (p *keyPart[K, V]) put(c uint8, h uint64, s keySlot[K, V]) {
	j := h & p.mask
	for p.ctrl[j] != 0 {
		j = (j + 1) & p.mask
	}
	p.ctrl[j], p.slots[j] = c, s
	p.n++
}

// split replaces part p, full at maxPartSlots, with two parts of its size
// that take its keys by the next bit of their hash, doubling the
// directory first when p's keys are told apart by all of its bits.
func (t *keyTable[K, V]) split(p *keyPart[K, V]) {
	if p.depth == t.depth {
		dir := make([]*keyPart[K, V], 2*len(t.dir))
		for i, q := range t.dir {
			dir[2*i], dir[2*i+1] = q, q
		}
		t.dir, t.depth = dir, t.depth+1
	}
	a, b := newKeyPart[K, V](len(p.ctrl), p.depth+1), newKeyPart[K, V](len(p.ctrl), p.depth+1)
	bit := uint64(1) << (63 - p.depth)
	for i, c := range p.ctrl {
		if c == 0 {
			continue
		}
		if h := t.hash(p.slots[i].k); h&bit == 0 {
			a.put(c, h, p.slots[i])
		} else {
			b.put(c, h, p.slots[i])
		}
	}
	// p served the run of 2^(depth - p.depth) entries that share its top
	// bits: a takes the first half, b the second.
	run := 1 << (t.depth - p.depth)
	first := 0
	for first < len(t.dir) && t.dir[first] != p {
		first += run
	}
	for i := range run {
		if i < run/2 {
			t.dir[first+i] = a
		} else {
			t.dir[first+i] = b
		}
	}
	*p = keyPart[K, V]{} // the first part keeps no keys alive once split
	t.gen++
}

// len is the number of keys in the table.
func (t *keyTable[K, V]) len() int { return t.n }

// all yields every key and value. The table must not change during the
// loop (collect the keys to remove, and remove them after it).
func (t *keyTable[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i := 0; i < len(t.dir); i += 1 << (t.depth - t.dir[i].depth) {
			p := t.dir[i]
			for j, c := range p.ctrl {
				if c != 0 && !yield(p.slots[j].k, p.slots[j].v) {
					return
				}
			}
		}
	}
}
