package incremental

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// DefaultRewriteEvery is the default of RewriteEvery (see New): every key
// group is stored again at least once every 100 checkpoints of its task.
const DefaultRewriteEvery = 100

// maxSnaps bounds the snapshots a Tracker remembers after its base. More
// accumulate only while checkpoints keep failing; the oldest of those that
// can no longer become a base are then merged.
const maxSnaps = 32

// Plan is what a task uploads for one checkpoint.
type Plan struct {
	// Full says to store the whole state, with no references: there is no
	// usable base, or the checkpoint is a savepoint.
	Full bool
	// Base is the checkpoint whose objects Refs point into (0 when Full).
	Base uint64
	// Upload holds the key groups to store (bit kg%64 of word kg/64), nil
	// when Full.
	Upload []uint64
	// Refs are the sections of the other key groups the base holds, with
	// their object keys resolved, in key-group order.
	Refs []*messages.KeyGroupSection
	// Rewritten counts the key groups in Upload that did not change since
	// the base but are stored again because their object was oldest.
	Rewritten int
}

// snap is one snapshot of the task.
type snap struct {
	id    uint64
	dirty []uint64 // key groups written between the previous snapshot and this one
	// sections is the snapshot's index with resolved keys, once its upload
	// succeeded and when it can be referenced; nil otherwise.
	sections []*messages.KeyGroupSection
	// never says the snapshot cannot become a base: a savepoint, or a
	// checkpoint that aborted.
	never bool
}

// Tracker is the incremental bookkeeping of one task (see the package
// documentation). It is not safe for concurrent use.
type Tracker struct {
	start, end int
	every      int
	words      int
	snaps      []*snap // oldest first, increasing ids
	// stored maps the object keys that the newest base's sections, and
	// later uploads, point into to the checkpoint that stored them.
	stored map[string]uint64
}

// New returns the tracker of a task that owns key groups [start, end) of
// maxParallelism. Every key group is stored again at least once every
// rewriteEvery checkpoints (DefaultRewriteEvery when rewriteEvery < 1).
func New(start, end, maxParallelism, rewriteEvery int) (*Tracker, error) {
	if start < 0 || end < start || end > maxParallelism {
		return nil, fmt.Errorf("incremental: key groups [%d,%d) do not fit max parallelism %d", start, end, maxParallelism)
	}
	if rewriteEvery < 1 {
		rewriteEvery = DefaultRewriteEvery
	}
	return &Tracker{start: start, end: end, every: rewriteEvery, words: (maxParallelism + 63) / 64, stored: map[string]uint64{}}, nil
}

// Words is the length of the bit sets the tracker takes and gives.
func (t *Tracker) Words() int { return t.words }

// Restored records that the task restored checkpoint id from its own
// state h, taken at the same key-group range: the next checkpoint may
// build on it. Do not call it for a state redistributed from other tasks.
func (t *Tracker) Restored(id uint64, h *messages.StateHandle) {
	t.snaps = t.snaps[:0]
	clear(t.stored)
	s := &snap{id: id, dirty: make([]uint64, t.words)}
	t.snaps = append(t.snaps, s)
	t.setSections(s, h)
}

// Snapshot records the snapshot of checkpoint id, whose barrier named base
// (see messages.Barrier), with dirty the key groups written since the
// previous snapshot (the tracker keeps a copy), and returns what to
// upload. savepoint says the checkpoint is a savepoint: it is stored in
// full and never becomes a base.
func (t *Tracker) Snapshot(id, base uint64, dirty []uint64, savepoint bool) Plan {
	s := &snap{id: id, dirty: make([]uint64, t.words), never: savepoint}
	copy(s.dirty, dirty)
	t.snaps = append(t.snaps, s)
	if savepoint || base == 0 {
		t.trim()
		return Plan{Full: true}
	}
	b := slices.IndexFunc(t.snaps, func(s *snap) bool { return s.id == base })
	if b < 0 || t.snaps[b].sections == nil || t.snaps[b].never {
		if b > 0 {
			t.snaps = slices.Delete(t.snaps, 0, b) // nothing before the base is needed any more
		}
		t.trim()
		return Plan{Full: true}
	}
	t.snaps = slices.Delete(t.snaps, 0, b)
	bs := t.snaps[0]
	t.keepStored(bs.sections)
	upload := make([]uint64, t.words)
	for _, s := range t.snaps[1:] {
		for i, w := range s.dirty {
			upload[i] |= w
		}
	}
	// The clean key groups the base holds, oldest object first.
	var clean []*messages.KeyGroupSection
	for _, sec := range bs.sections {
		if !has(upload, sec.GetKeyGroup()) {
			clean = append(clean, sec)
		}
	}
	// Key groups whose object is every checkpoints old or older must be
	// stored again; then the oldest, up to ceil(held/every) in all.
	n := (len(bs.sections) + t.every - 1) / t.every
	byAge := slices.Clone(clean)
	slices.SortStableFunc(byAge, func(a, b *messages.KeyGroupSection) int {
		return cmp.Compare(t.age(a.GetKey()), t.age(b.GetKey()))
	})
	k := 0
	for k < len(byAge) && (k < n || t.age(byAge[k].GetKey())+uint64(t.every) <= id) {
		set(upload, byAge[k].GetKeyGroup())
		k++
	}
	n = k
	p := Plan{Base: base, Upload: upload, Rewritten: n}
	for _, sec := range clean {
		if !has(upload, sec.GetKeyGroup()) {
			p.Refs = append(p.Refs, sec)
		}
	}
	t.trim()
	return p
}

// Uploaded records the handle under which checkpoint id's snapshot is
// stored. A handle that cannot be referenced (inline, or without an
// index) leaves the snapshot unable to become a base.
func (t *Tracker) Uploaded(id uint64, h *messages.StateHandle) {
	for _, s := range t.snaps {
		if s.id == id && !s.never {
			t.setSections(s, h)
			return
		}
	}
}

// Aborted records that checkpoint id will never complete: its snapshot
// cannot become a base (its key groups stay in the next upload).
func (t *Tracker) Aborted(id uint64) {
	for _, s := range t.snaps {
		if s.id == id {
			s.never, s.sections = true, nil
		}
	}
	t.trim()
}

// setSections records h's index, with resolved keys, on s.
func (t *Tracker) setSections(s *snap, h *messages.StateHandle) {
	secs, ok := snapshots.Sections(h)
	if !ok {
		return
	}
	var own []*messages.KeyGroupSection
	for _, sec := range secs {
		if g := int(sec.GetKeyGroup()); g >= t.start && g < t.end {
			own = append(own, sec)
		}
	}
	if own == nil {
		own = []*messages.KeyGroupSection{} // referable, and empty
	}
	s.sections = own
	t.stored[h.GetKey()] = s.id
}

// age returns the checkpoint that stored the object under key: as
// recorded, else as its key says (see snapshots.StateKey), else 0.
func (t *Tracker) age(key string) uint64 {
	if id, ok := t.stored[key]; ok {
		return id
	}
	id := checkpointOfKey(key)
	t.stored[key] = id
	return id
}

// checkpointOfKey parses the checkpoint id out of a state key,
// "<job>/checkpoints/chk-<20 digits>/<task>.state"; 0 when it does not
// follow that layout.
func checkpointOfKey(key string) uint64 {
	i := strings.LastIndex(key, "/chk-")
	if i < 0 || len(key) < i+5+20 {
		return 0
	}
	id, err := strconv.ParseUint(key[i+5:i+5+20], 10, 64)
	if err != nil {
		return 0
	}
	return id
}

// keepStored forgets the ages of objects the base does not reference.
func (t *Tracker) keepStored(secs []*messages.KeyGroupSection) {
	keep := make(map[string]uint64, len(t.stored))
	for _, sec := range secs {
		if id, ok := t.stored[sec.GetKey()]; ok {
			keep[sec.GetKey()] = id
		}
	}
	t.stored = keep
}

// trim merges the oldest snapshots that can never become a base, after
// the first, while more than maxSnaps are kept: their dirty sets are
// unioned into the next one, so nothing written is forgotten.
func (t *Tracker) trim() {
	for i := 1; len(t.snaps) > maxSnaps && i < len(t.snaps)-1; {
		if s := t.snaps[i]; s.never || s.sections == nil {
			next := t.snaps[i+1]
			for w, x := range s.dirty {
				next.dirty[w] |= x
			}
			t.snaps = slices.Delete(t.snaps, i, i+1)
			continue
		}
		i++
	}
}

func has(b []uint64, kg uint32) bool { return b[kg/64]&(1<<(kg%64)) != 0 }
func set(b []uint64, kg uint32)      { b[kg/64] |= 1 << (kg % 64) }

// Count returns the number of key groups set in b.
func Count(b []uint64) int {
	n := 0
	for _, w := range b {
		n += bits.OnesCount64(w)
	}
	return n
}
