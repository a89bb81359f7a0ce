package dataflow

import (
	"fmt"
	"math/bits"
	"reflect"
	"slices"
	"unsafe"

	"github.com/snapflow/snapflow/messages"
)

// current is the key of the record being processed, and whether the
// record wrote state. State writes only set wrote, which keeps them small
// enough to be inlined; processInstance hashes the key into its key group
// once the record is done, and only when it wrote: a record that touches
// no state costs no hash, and one that writes costs one hash however many
// writes it makes.
type current[K Key] struct {
	key   K
	wrote bool
}

// KeyGroupWords is the number of uint64 words of a key-group bit set (bit
// kg%64 of word kg/64) for maxParallelism key groups: the length a
// KeyGroupSnapshotter needs in TakeDirtyKeyGroups.
func KeyGroupWords(maxParallelism int) int { return (maxParallelism + 63) / 64 }

// markDirty records that the current record wrote state of its key (or
// may have, through a reference handed out by a read).
func (s *KeyedSetup[K]) markDirty() { s.cur.wrote = true }

// keyHash says how markWritten hashes keys: as HashString or HashUint64
// directly, or through the key codec (integers of under 64 bits).
type keyHash uint8

const (
	hashByCodec keyHash = iota
	hashString
	hashUint64
)

func keyHashOf[K Key](c keyCodec[K]) keyHash {
	switch t := reflect.TypeFor[K](); {
	case c.custom: // KeyByHash: the user's hash places the keys
		return hashByCodec
	case t.Kind() == reflect.String:
		return hashString
	case t.Size() == 8:
		return hashUint64
	}
	return hashByCodec
}

// markWritten marks the key group of the current key dirty and clears
// wrote; processInstance calls it after each record that wrote state.
func (s *KeyedSetup[K]) markWritten() {
	c := s.cur
	var h uint64
	switch s.keyHash {
	case hashString:
		h = HashString(*(*string)(unsafe.Pointer(&c.key)))
	case hashUint64:
		h = HashUint64(*(*uint64)(unsafe.Pointer(&c.key)))
	default:
		h = s.codec.hash(c.key)
	}
	var kg uint64
	if s.maxP&(s.maxP-1) == 0 {
		kg = h & (s.maxP - 1) // the same as h % maxP, without a division
	} else {
		kg = h % s.maxP
	}
	s.dirty[kg>>6] |= 1 << (kg & 63)
	c.wrote = false
}

// markGroup marks key group kg dirty: a timer of it fired.
func (s *KeyedSetup[K]) markGroup(kg int) {
	if !s.untracked {
		s.dirty[kg>>6] |= 1 << (kg & 63)
	}
}

// takeDirty ORs the written key groups into dst and forgets them.
func (s *KeyedSetup[K]) takeDirty(dst []uint64) {
	if len(dst) < len(s.dirty) {
		panic(fmt.Sprintf("topology: operator %q: TakeDirtyKeyGroups given %d words, want at least %d for %d key groups",
			s.task.Operator, len(dst), len(s.dirty), s.maxP))
	}
	if s.untracked {
		for kg := range s.maxP {
			dst[kg>>6] |= 1 << (kg & 63)
		}
		return
	}
	if s.cur.wrote { // written outside processInstance (tests)
		s.markWritten()
	}
	for i, w := range s.dirty {
		dst[i] |= w
	}
	clear(s.dirty)
}

// reachesReference reports whether a value of type t holds a pointer,
// slice, map, interface, function or channel, through which a copy of the
// value (what Get returns) can change the stored value in place. Strings are
// immutable and do not count.
func reachesReference(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Pointer, reflect.UnsafePointer, reflect.Slice, reflect.Map,
		reflect.Interface, reflect.Func, reflect.Chan:
		return true
	case reflect.Array:
		return t.Len() > 0 && reachesReference(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if reachesReference(t.Field(i).Type) {
				return true
			}
		}
	}
	return false
}

// groupSet is a set of key groups: bit kg%64 of word kg/64.
type groupSet []uint64

func (g groupSet) has(kg int) bool {
	w := kg >> 6
	return w < len(g) && g[w]&(1<<(kg&63)) != 0
}

// countIn is the number of key groups of the set in [start, end).
func (g groupSet) countIn(start, end int) int {
	n := 0
	for kg := start; kg < end; {
		w := kg >> 6
		if w >= len(g) {
			break
		}
		word := g[w] >> (kg & 63)
		span := min(64-kg&63, end-kg)
		if span < 64 {
			word &= 1<<span - 1
		}
		n += bits.OnesCount64(word)
		kg += span
	}
	return n
}

// snapshotBuilder gathers the entries of a snapshot by key group: every key
// group, or only those of a set.
type snapshotBuilder struct {
	only  groupSet // nil: every key group
	start int      // the task's first key group: groups[kg-start]
	// groups holds the key groups of the task's range, by kg-start; other
	// holds any other (a task only holds keys of its range when its
	// records are routed by KeyBy, but nothing else enforces it), and all
	// of them when few are selected.
	groups []*messages.KeyGroupState
	other  map[int]*messages.KeyGroupState
	share  float64 // the part of the task's key groups selected, to size buffers
	// now is the processing time of the snapshot: entries whose
	// time-to-live has passed by then are left out.
	now int64
}

func newSnapshotBuilder(task *TaskPlan, only groupSet) *snapshotBuilder {
	start, end := task.KeyGroupStart, max(task.KeyGroupStart, task.KeyGroupEnd)
	b := &snapshotBuilder{only: only, start: start, share: 1}
	if only != nil && end > start {
		n := only.countIn(start, end)
		b.share = float64(n) / float64(end-start)
		if n*4 < end-start {
			return b // few key groups: all in other, not a slice of the range
		}
	}
	b.groups = make([]*messages.KeyGroupState, end-start)
	return b
}

// selected reports whether the snapshot holds key group kg.
func (b *snapshotBuilder) selected(kg int) bool { return b.only == nil || b.only.has(kg) }

// estimate is the part of n entries the snapshot is expected to hold.
func (b *snapshotBuilder) estimate(n int) int {
	if b.only == nil {
		return n
	}
	return int(float64(n)*b.share) + 16
}

// named returns the NamedState of state name in key group kg, creating it.
// States are added one after another, so the state being added, when
// present, is the group's last.
func (b *snapshotBuilder) named(kg int, name string) *messages.NamedState {
	var g *messages.KeyGroupState
	if i := kg - b.start; i >= 0 && i < len(b.groups) {
		if g = b.groups[i]; g == nil {
			g = &messages.KeyGroupState{KeyGroup: uint32(kg)}
			b.groups[i] = g
		}
	} else {
		if b.other == nil {
			b.other = map[int]*messages.KeyGroupState{}
		}
		if g = b.other[kg]; g == nil {
			g = &messages.KeyGroupState{KeyGroup: uint32(kg)}
			b.other[kg] = g
		}
	}
	if n := len(g.States); n > 0 && g.States[n-1].Name == name {
		return g.States[n-1]
	}
	ns := &messages.NamedState{Name: name}
	g.States = append(g.States, ns)
	return ns
}

// appendTo appends the gathered key groups to st, in key-group order.
func (b *snapshotBuilder) appendTo(st *messages.TaskState) {
	var below, above []int
	for kg := range b.other {
		if kg < b.start {
			below = append(below, kg)
		} else {
			above = append(above, kg)
		}
	}
	slices.Sort(below)
	slices.Sort(above)
	for _, kg := range below {
		st.KeyGroups = append(st.KeyGroups, b.other[kg])
	}
	for _, g := range b.groups {
		if g != nil {
			st.KeyGroups = append(st.KeyGroups, g)
		}
	}
	for _, kg := range above {
		st.KeyGroups = append(st.KeyGroups, b.other[kg])
	}
}

// entrySlab hands out StateEntries from a few large allocations rather
// than one per entry: a first chunk of the expected number, then chunks
// that double from a quarter of it.
type entrySlab struct {
	buf  []messages.StateEntry
	next int // the size of the next chunk
	grow int // the size of the chunk after a first one
}

func newEntrySlab(expected int) entrySlab {
	return entrySlab{next: max(expected, 1), grow: max(64, expected/4)}
}

func (s *entrySlab) take() *messages.StateEntry {
	if len(s.buf) == 0 {
		s.buf = make([]messages.StateEntry, s.next)
		s.next, s.grow = s.grow, 2*s.grow
	}
	e := &s.buf[0]
	s.buf = s.buf[1:]
	return e
}
