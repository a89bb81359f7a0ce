package incremental

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// model is a task and a store, driven at random against a Tracker: the
// state rebuilt from every completed checkpoint's handle must equal the
// task's state at that barrier, and no handle may reference an object that
// retention (keep 1) has deleted.
type model struct {
	t        *testing.T
	r        *rand.Rand
	start    int
	end      int
	maxP     int
	every    int
	tr       *Tracker
	state    map[uint32]int // key group -> version (absent: empty)
	dirty    []uint64
	next     int
	store    map[string]map[uint32]int // object key -> key group -> version
	id       uint64
	base     uint64 // newest complete checkpoint, 0 after a savepoint
	handles  map[uint64]*messages.StateHandle
	truth    map[uint64]map[uint32]int
	uploaded int // key groups stored, all checkpoints
	referred int // key groups referenced, all checkpoints
}

func newModel(t *testing.T, seed uint64, start, end, maxP, every int) *model {
	tr, err := New(start, end, maxP, every)
	if err != nil {
		t.Fatal(err)
	}
	return &model{t: t, r: rand.New(rand.NewPCG(seed, 7)), start: start, end: end, maxP: maxP, every: every, tr: tr,
		state: map[uint32]int{}, dirty: make([]uint64, tr.Words()), store: map[string]map[uint32]int{},
		handles: map[uint64]*messages.StateHandle{}, truth: map[uint64]map[uint32]int{}}
}

func (m *model) write(n int) {
	for range n {
		kg := uint32(m.start + m.r.IntN(m.end-m.start))
		if m.r.IntN(10) == 0 {
			delete(m.state, kg)
		} else {
			m.next++
			m.state[kg] = m.next
		}
		set(m.dirty, kg)
	}
}

// checkpoint takes the next checkpoint and returns whether it completed.
func (m *model) checkpoint(savepoint bool) {
	m.id++
	id := m.id
	p := m.tr.Snapshot(id, m.base, m.dirty, savepoint)
	clear(m.dirty)
	key := fmt.Sprintf("j/checkpoints/chk-%020d/t.state", id)
	obj := map[uint32]int{}
	h := &messages.StateHandle{Key: key, Indexed: true}
	var secs []*messages.KeyGroupSection
	for kg := uint32(m.start); kg < uint32(m.end); kg++ {
		v, ok := m.state[kg]
		if ok && (p.Full || has(p.Upload, kg)) {
			obj[kg] = v
			secs = append(secs, &messages.KeyGroupSection{KeyGroup: kg})
		}
	}
	if p.Full && (p.Refs != nil || p.Upload != nil) {
		m.t.Fatalf("checkpoint %d: a full plan with references or an upload set", id)
	}
	if !p.Full && p.Base != m.base {
		m.t.Fatalf("checkpoint %d: plan on base %d, the barrier named %d", id, p.Base, m.base)
	}
	for _, ref := range p.Refs {
		if has(p.Upload, ref.GetKeyGroup()) {
			m.t.Fatalf("checkpoint %d: key group %d both uploaded and referenced", id, ref.GetKeyGroup())
		}
		if _, ok := m.store[ref.GetKey()][ref.GetKeyGroup()]; !ok {
			m.t.Fatalf("checkpoint %d: references key group %d in %s, which the store does not hold", id, ref.GetKeyGroup(), ref.GetKey())
		}
		secs = append(secs, ref)
	}
	// The index is in key-group order, as snapshots writes it.
	sortSections(secs)
	h.KeyGroups = secs
	m.store[key] = obj
	m.uploaded += len(obj)
	m.referred += len(p.Refs)
	got := m.rebuild(h)
	if !equal(got, m.state) {
		m.t.Fatalf("checkpoint %d (base %d, full %t): rebuilt %v, the task holds %v", id, p.Base, p.Full, got, m.state)
	}
	if objs := objects(h); !p.Full && objs > m.every {
		m.t.Fatalf("checkpoint %d: the state spans %d objects, more than RewriteEvery = %d", id, objs, m.every)
	}
	switch o := m.r.IntN(10); {
	case o == 0: // aborted before the upload ended
		m.tr.Aborted(id)
		delete(m.store, key)
	case o == 1: // uploaded, then aborted (another task declined)
		m.tr.Uploaded(id, h)
		m.tr.Aborted(id)
		delete(m.store, key)
	default:
		if !savepoint {
			m.tr.Uploaded(id, h)
		}
		m.complete(id, h, savepoint)
	}
}

// complete completes checkpoint id and applies retention, keeping one
// checkpoint: every object its handle references stays, the others go.
func (m *model) complete(id uint64, h *messages.StateHandle, savepoint bool) {
	m.handles[id] = h
	m.truth[id] = clone(m.state)
	m.base = id
	if savepoint {
		m.base = 0 // the coordinator names no savepoint as a base
	}
	keep := map[string]bool{h.GetKey(): true}
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() != "" {
			keep[s.GetKey()] = true
		}
	}
	for k := range m.store {
		if !keep[k] {
			delete(m.store, k)
		}
	}
}

// restore restores the newest complete checkpoint, as recovery does.
func (m *model) restore() {
	if m.id == 0 || m.handles[m.base] == nil {
		return
	}
	h := m.handles[m.base]
	m.state = m.rebuild(h)
	if !equal(m.state, m.truth[m.base]) {
		m.t.Fatalf("restore of %d: rebuilt %v, want %v", m.base, m.state, m.truth[m.base])
	}
	clear(m.dirty)
	m.tr.Restored(m.base, h)
}

func (m *model) rebuild(h *messages.StateHandle) map[uint32]int {
	out := map[uint32]int{}
	for _, s := range h.GetKeyGroups() {
		key := s.GetKey()
		if key == "" {
			key = h.GetKey()
		}
		v, ok := m.store[key][s.GetKeyGroup()]
		if !ok {
			m.t.Fatalf("handle %s: key group %d in %s is not in the store", h.GetKey(), s.GetKeyGroup(), key)
		}
		out[s.GetKeyGroup()] = v
	}
	return out
}

func TestTrackerModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			m := newModel(t, seed, 16, 80, 128, 1+int(seed%7))
			for range 300 {
				m.write(m.r.IntN(6))
				switch m.r.IntN(20) {
				case 0:
					m.restore()
				case 1:
					m.checkpoint(true)
				default:
					m.checkpoint(false)
				}
			}
		})
	}
}

// TestTrackerUploadsWhatChanged: with a base, a checkpoint uploads exactly
// the key groups written since it, plus ceil(held/every) of the oldest.
func TestTrackerUploadsWhatChanged(t *testing.T) {
	tr, err := New(0, 64, 64, 32)
	if err != nil {
		t.Fatal(err)
	}
	all := &messages.StateHandle{Key: "j/checkpoints/chk-1/t.state", Indexed: true}
	for kg := range uint32(64) {
		all.KeyGroups = append(all.KeyGroups, &messages.KeyGroupSection{KeyGroup: kg, Offset: uint64(kg) * 10, Length: 10})
	}
	if p := tr.Snapshot(1, 0, make([]uint64, 1), false); !p.Full {
		t.Fatalf("first checkpoint without a base: %+v, want full", p)
	}
	tr.Uploaded(1, all)
	dirty := []uint64{1<<3 | 1<<40}
	p := tr.Snapshot(2, 1, dirty, false)
	if p.Full || p.Base != 1 || Count(p.Upload) != 2+2 || len(p.Refs) != 60 || p.Rewritten != 2 {
		t.Fatalf("plan = full %t base %d upload %d refs %d rewritten %d; want an incremental plan on 1 with 4 uploads (2 written, 2 oldest), 60 refs",
			p.Full, p.Base, Count(p.Upload), len(p.Refs), p.Rewritten)
	}
	if !has(p.Upload, 3) || !has(p.Upload, 40) {
		t.Fatalf("the written key groups 3 and 40 are not uploaded: %b", p.Upload)
	}
	for _, r := range p.Refs {
		if r.GetKey() != all.GetKey() {
			t.Fatalf("reference to %q, want the base's object", r.GetKey())
		}
	}
	dirty[0] = 0
	// Checkpoint 2 aborts: its writes must be in checkpoint 3, still on base 1.
	tr.Aborted(2)
	p = tr.Snapshot(3, 1, dirty, false)
	if !has(p.Upload, 3) || !has(p.Upload, 40) {
		t.Fatalf("after an abort, the key groups written before it are not uploaded: %b", p.Upload)
	}
	// A base the task has no handle for: full.
	if p := tr.Snapshot(4, 3, dirty, false); !p.Full {
		t.Fatalf("base 3 was never uploaded: plan %+v, want full", p)
	}
	// A savepoint is full and never a base.
	if p := tr.Snapshot(5, 1, dirty, true); !p.Full {
		t.Fatalf("savepoint: %+v, want full", p)
	}
	tr.Uploaded(5, all)
	if p := tr.Snapshot(6, 5, dirty, false); !p.Full {
		t.Fatalf("on a savepoint as base: %+v, want full", p)
	}
}

// TestTrackerInlineBase: a base stored inline cannot be referenced.
func TestTrackerInlineBase(t *testing.T) {
	tr, err := New(0, 8, 8, 10)
	if err != nil {
		t.Fatal(err)
	}
	tr.Snapshot(1, 0, make([]uint64, 1), false)
	tr.Uploaded(1, &messages.StateHandle{Key: "k", Indexed: true, Inline: []byte{1},
		KeyGroups: []*messages.KeyGroupSection{{KeyGroup: 1}}})
	if p := tr.Snapshot(2, 1, make([]uint64, 1), false); !p.Full {
		t.Fatalf("on an inline base: %+v, want full", p)
	}
}

// TestTrackerBounded: while checkpoints keep aborting, the tracker keeps
// at most maxSnaps snapshots, and forgets no write.
func TestTrackerBounded(t *testing.T) {
	tr, err := New(0, 128, 128, 10)
	if err != nil {
		t.Fatal(err)
	}
	tr.Snapshot(1, 0, make([]uint64, 2), false)
	h := &messages.StateHandle{Key: "k1", Indexed: true}
	tr.Uploaded(1, h)
	for id := uint64(2); id < 1000; id++ {
		d := make([]uint64, 2)
		set(d, uint32(id%128))
		tr.Snapshot(id, 1, d, false)
		tr.Uploaded(id, &messages.StateHandle{Key: fmt.Sprint("k", id), Indexed: true})
		tr.Aborted(id)
		if len(tr.snaps) > maxSnaps+1 {
			t.Fatalf("after %d aborted checkpoints the tracker keeps %d snapshots", id-1, len(tr.snaps))
		}
	}
	p := tr.Snapshot(1000, 1, make([]uint64, 2), false)
	if Count(p.Upload) != 128 {
		t.Fatalf("after 998 aborted checkpoints writing every key group, the plan uploads %d key groups, want 128", Count(p.Upload))
	}
}

func TestNewRefusesBadRange(t *testing.T) {
	if _, err := New(4, 200, 128, 0); err == nil {
		t.Fatal("New(4, 200, 128) = nil error")
	}
}

func sortSections(s []*messages.KeyGroupSection) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j].GetKeyGroup() < s[j-1].GetKeyGroup(); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

func objects(h *messages.StateHandle) int {
	seen := map[string]bool{h.GetKey(): true}
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() != "" {
			seen[s.GetKey()] = true
		}
	}
	return len(seen)
}

func equal(a, b map[uint32]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func clone(m map[uint32]int) map[uint32]int {
	out := make(map[uint32]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// TestTrackerSpread: in a steady state with no failures, the key groups
// stored again for age are spread, ceil(held/every) per checkpoint, never
// a full copy at once, and the state spans at most every objects.
func TestTrackerSpread(t *testing.T) {
	const groups, every = 1024, 100
	m := newModel(t, 1, 0, groups, groups, every)
	for kg := range uint32(groups) {
		m.state[kg] = 1
	}
	max := 0
	for i := range 600 {
		for range 3 {
			kg := uint32(m.r.IntN(groups))
			m.next++
			m.state[kg] = m.next
			set(m.dirty, kg)
		}
		m.id++
		p := m.tr.Snapshot(m.id, m.base, m.dirty, false)
		clear(m.dirty)
		if i > 0 && p.Full {
			t.Fatalf("checkpoint %d: full", m.id)
		}
		if p.Rewritten > max {
			max = p.Rewritten
		}
		h := &messages.StateHandle{Key: fmt.Sprintf("j/checkpoints/chk-%020d/t.state", m.id), Indexed: true}
		for kg := range uint32(groups) {
			if p.Full || has(p.Upload, kg) {
				h.KeyGroups = append(h.KeyGroups, &messages.KeyGroupSection{KeyGroup: kg})
			}
		}
		h.KeyGroups = append(h.KeyGroups, p.Refs...)
		sortSections(h.KeyGroups)
		if n := objects(h); n > every {
			t.Fatalf("checkpoint %d spans %d objects", m.id, n)
		}
		m.tr.Uploaded(m.id, h)
		m.base = m.id
	}
	if want := (groups + every - 1) / every; max > want {
		t.Fatalf("up to %d key groups stored again for age in one checkpoint, want at most %d", max, want)
	}
}
