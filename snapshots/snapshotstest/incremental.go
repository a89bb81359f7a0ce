package snapshotstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

var incrementalTests = []test{
	{"RoundTrip", testIncrementalRoundTrip},
	{"DamagedReference", testIncrementalDamagedReference},
	{"Retain", testIncrementalRetain},
	{"DeleteIncomplete", testIncrementalDeleteIncomplete},
	{"DeleteIncompleteRace", testIncrementalDeleteIncompleteRace},
	{"Delete", testIncrementalDelete},
	{"RefsRefused", testRefsRefused},
	{"ManifestRefsRefused", testManifestRefsRefused},
	{"SavepointRefsRefused", testSavepointRefsRefused},
}

// The keyed tasks of the incremental tests and their key groups.
var incrementalGroups = map[string][2]uint32{"sum#0": {0, 16}, "sum#1": {16, 32}}

// groupState is key group kg at version v: a few entries whose values say
// both.
func groupState(kg uint32, v uint64) *messages.KeyGroupState {
	g := &messages.KeyGroupState{KeyGroup: kg}
	ns := &messages.NamedState{Name: "sum"}
	for e := range 2 + int(kg)%4 {
		ns.Entries = append(ns.Entries, &messages.StateEntry{
			Key:   fmt.Appendf(nil, "k%d-%d", kg, e),
			Value: fmt.Appendf(nil, "%s@%d", strings.Repeat("v", int(kg)*3+e), v),
		})
	}
	g.States = []*messages.NamedState{ns}
	return g
}

// versions maps a task's key groups to the checkpoint that last changed
// them.
type versions map[uint32]uint64

// logicalState is what task holds at checkpoint id when its key groups are
// at vs: what a restore of id must return.
func logicalState(id uint64, task string, vs versions) *messages.TaskState {
	op, _, _ := strings.Cut(task, "#")
	st := &messages.TaskState{Job: job, TaskId: task, Operator: op, CheckpointId: id, OperatorState: fmt.Appendf(nil, "%s@%d", task, id)}
	kgs := make([]uint32, 0, len(vs))
	for kg := range vs {
		kgs = append(kgs, kg)
	}
	slices.Sort(kgs)
	for _, kg := range kgs {
		st.KeyGroups = append(st.KeyGroups, groupState(kg, vs[kg]))
	}
	return st
}

// chain is a job whose keyed tasks take incremental checkpoints.
type chain struct {
	t       *testing.T
	c       *snapshots.Checkpoints
	vs      map[string]versions                   // each keyed task's key groups
	handles map[string]*messages.StateHandle      // each keyed task's newest handle
	entries map[uint64][]*messages.TaskStateEntry // by checkpoint
}

func newChain(t *testing.T, c *snapshots.Checkpoints) *chain {
	return &chain{t: t, c: c, vs: map[string]versions{}, handles: map[string]*messages.StateHandle{},
		entries: map[uint64][]*messages.TaskStateEntry{}}
}

// checkpoint stores checkpoint id and completes it: src#0 in full and each
// keyed task with the key groups of changed[task] stored again (all of
// them when the task has no earlier handle or changed[task] is nil) and
// the others referenced where the task's previous handle says.
func (ch *chain) checkpoint(id uint64, changed map[string][]uint32) *messages.Manifest {
	t := ch.t
	t.Helper()
	entries := putStates(t, ch.c, id, "src#0")
	for _, task := range []string{"sum#0", "sum#1"} {
		if ch.vs[task] == nil {
			ch.vs[task] = versions{}
			for kg := incrementalGroups[task][0]; kg < incrementalGroups[task][1]; kg++ {
				ch.vs[task][kg] = id
			}
		}
		prev, ok := snapshots.Sections(ch.handles[task])
		full := !ok || changed[task] == nil
		st := logicalState(id, task, ch.vs[task])
		var refs []*messages.KeyGroupSection
		if !full {
			st.KeyGroups = nil
			for _, kg := range changed[task] {
				ch.vs[task][kg] = id
				st.KeyGroups = append(st.KeyGroups, groupState(kg, id))
			}
			for _, s := range prev {
				if !slices.Contains(changed[task], s.GetKeyGroup()) {
					refs = append(refs, s)
				}
			}
		} else {
			for kg := range ch.vs[task] {
				ch.vs[task][kg] = id
			}
			st = logicalState(id, task, ch.vs[task])
		}
		h, err := ch.c.PutTaskStateRefs(t.Context(), id, st, refs)
		if err != nil {
			t.Fatalf("PutTaskStateRefs %d %s: %v", id, task, err)
		}
		ch.handles[task] = h
		kg := incrementalGroups[task]
		entries = append(entries, &messages.TaskStateEntry{TaskId: task, State: h, KeyGroupStart: kg[0], KeyGroupEnd: kg[1]})
	}
	ch.entries[id] = entries
	return putManifest(t, ch.c, id, entries)
}

// want checks that r restores checkpoint id with the logical states.
func (ch *chain) want(r *snapshots.Restorable, id uint64) {
	t := ch.t
	t.Helper()
	if r == nil || r.Manifest.GetCheckpointId() != id {
		t.Fatalf("restored %v, want checkpoint %d", r, id)
	}
	for task, vs := range ch.vs {
		if got, want := r.States[task], logicalState(id, task, vs); !proto.Equal(got, want) {
			t.Errorf("checkpoint %d: state of %s =\n\t%v\nwant\n\t%v", id, task, got, want)
		}
	}
	if st := r.States["src#0"]; !proto.Equal(st, taskState(id, "src#0")) {
		t.Errorf("checkpoint %d: state of src#0 = %v", id, st)
	}
}

// sectionKeys returns the object of each key group of h.
func sectionKeys(h *messages.StateHandle) map[uint32]string {
	secs, ok := snapshots.Sections(h)
	if !ok {
		return nil
	}
	out := map[uint32]string{}
	for _, s := range secs {
		out[s.GetKeyGroup()] = s.GetKey()
	}
	return out
}

// testIncrementalRoundTrip: a state that references key groups of earlier
// checkpoints reads back as the whole logical state, through every read.
func testIncrementalRoundTrip(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": nil})
	h := ch.handles["sum#0"]
	k1, k2 := snapshots.StateKey(job, 1, "sum#0"), snapshots.StateKey(job, 2, "sum#0")

	// The index lists every key group, each in the one object holding it.
	keys := sectionKeys(h)
	if len(keys) != 16 || len(h.GetKeyGroups()) != 16 {
		t.Fatalf("index of %d key groups (%v), want 16", len(h.GetKeyGroups()), keys)
	}
	var refBytes uint64
	for _, sec := range h.GetKeyGroups() {
		want := k1
		if slices.Contains([]uint32{2, 3, 9}, sec.GetKeyGroup()) {
			want = k2
		}
		if keys[sec.GetKeyGroup()] != want {
			t.Errorf("key group %d lies in %s, want %s", sec.GetKeyGroup(), keys[sec.GetKeyGroup()], want)
		}
		if sec.GetKey() != "" {
			refBytes += sec.GetLength()
		}
	}
	if got, want := h.GetStateSize(), h.GetSize()+refBytes; got != want || snapshots.StateSize(h) != want {
		t.Errorf("state size %d, want own %d + referenced %d", got, h.GetSize(), refBytes)
	}
	if snapshots.UploadedSize(h) != h.GetSize() || h.GetSize() >= h.GetStateSize()/2 {
		t.Errorf("uploaded %d of a state of %d: the incremental state is not smaller", snapshots.UploadedSize(h), h.GetStateSize())
	}

	st, err := c.ReadTaskState(ctx, h)
	if want := logicalState(2, "sum#0", ch.vs["sum#0"]); err != nil || !proto.Equal(st, want) {
		t.Fatalf("ReadTaskState = %v, %v; want %v", st, err, want)
	}
	for _, r := range [][2]int{{0, 16}, {1, 11}, {2, 4}, {9, 10}, {4, 9}, {15, 40}, {16, 20}} {
		got, _, err := c.ReadKeyGroups(ctx, h, r[0], r[1])
		if err != nil {
			t.Fatalf("ReadKeyGroups [%d,%d): %v", r[0], r[1], err)
		}
		var want []*messages.KeyGroupState
		for _, g := range st.GetKeyGroups() {
			if int(g.GetKeyGroup()) >= r[0] && int(g.GetKeyGroup()) < r[1] {
				want = append(want, g)
			}
		}
		if len(got) != len(want) {
			t.Fatalf("ReadKeyGroups [%d,%d): %d key groups, want %d", r[0], r[1], len(got), len(want))
		}
		for i := range got {
			if !proto.Equal(got[i], want[i]) {
				t.Errorf("ReadKeyGroups [%d,%d): key group %d = %v, want %v", r[0], r[1], want[i].GetKeyGroup(), got[i], want[i])
			}
		}
	}
	fresh, _ := newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 2)
	if err := fresh.Verify(ctx, 2); err != nil {
		t.Errorf("Verify(2): %v", err)
	}

	// A third checkpoint references the objects of both: Sections passes on
	// where each key group lies, so no chain forms.
	ch.checkpoint(3, map[string][]uint32{"sum#0": {9, 10}, "sum#1": {20}})
	h3 := ch.handles["sum#0"]
	for kg, key := range sectionKeys(h3) {
		want := k1
		switch kg {
		case 2, 3:
			want = k2
		case 9, 10:
			want = snapshots.StateKey(job, 3, "sum#0")
		}
		if key != want {
			t.Errorf("checkpoint 3: key group %d lies in %s, want %s", kg, key, want)
		}
	}
	fresh, _ = newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 3)
	r, err := fresh.LoadCheckpoint(ctx, 2)
	if err != nil {
		t.Fatalf("LoadCheckpoint(2): %v", err)
	}
	if st := r.States["sum#1"]; !proto.Equal(st, logicalState(2, "sum#1", versionsAt(ch.vs["sum#1"], 2))) {
		t.Errorf("LoadCheckpoint(2): sum#1 = %v", st)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

// versionsAt returns vs as it was at checkpoint id, in chains that stored
// every key group at id: a key group changed since is back at id.
func versionsAt(vs versions, id uint64) versions {
	out := versions{}
	for kg, v := range vs {
		out[kg] = min(v, id)
	}
	return out
}

// testIncrementalDamagedReference: a corrupt or missing object that an
// incremental checkpoint references makes it unusable, with an error that
// names that object, and recovery falls back past it.
func testIncrementalDamagedReference(t *testing.T, newStore newStoreFunc) {
	k2 := snapshots.StateKey(job, 2, "sum#0")
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, s snapshots.Store, h2 *messages.StateHandle)
		want   error
	}{
		{"deleted", func(t *testing.T, s snapshots.Store, _ *messages.StateHandle) {
			if err := s.Delete(t.Context(), k2); err != nil {
				t.Fatal(err)
			}
		}, snapshots.ErrNotFound},
		{"garbage", func(t *testing.T, s snapshots.Store, _ *messages.StateHandle) {
			mustPut(t, s, k2, []byte("garbage"))
		}, snapshots.ErrCorrupt},
		{"flipped bit in a referenced key group", func(t *testing.T, s snapshots.Store, h2 *messages.StateHandle) {
			data := mustGet(t, s, k2)
			for _, sec := range h2.GetKeyGroups() {
				if sec.GetKeyGroup() == 3 {
					data[sec.GetOffset()+sec.GetLength()/2] ^= 0x40
				}
			}
			mustPut(t, s, k2, data)
		}, snapshots.ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			w, _ := newCheckpoints(s)
			ch := newChain(t, w)
			ch.checkpoint(1, nil)
			ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": {17}})
			h2 := ch.handles["sum#0"]
			ch.checkpoint(3, map[string][]uint32{"sum#0": {9}, "sum#1": {18}}) // references 2 and 3 in k2
			h3 := ch.handles["sum#0"]
			tc.damage(t, s, h2)

			c, logs := newCheckpoints(s)
			if _, err := c.ReadTaskState(t.Context(), h3); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), k2) {
				t.Errorf("ReadTaskState of checkpoint 3's state = %v; want an error wrapping %v naming %s", err, tc.want, k2)
			}
			if _, _, err := c.ReadKeyGroups(t.Context(), h3, 0, 5); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), k2) {
				t.Errorf("ReadKeyGroups of checkpoint 3's state = %v; want an error wrapping %v naming %s", err, tc.want, k2)
			}
			if err := c.Verify(t.Context(), 3); !errors.Is(err, tc.want) || !strings.Contains(err.Error(), k2) {
				t.Errorf("Verify(3) = %v; want an error wrapping %v naming %s", err, tc.want, k2)
			}
			r := loadLatest(t, c) // 3 and 2 are unusable
			ch.vs = map[string]versions{"sum#0": versionsAt(ch.vs["sum#0"], 1), "sum#1": versionsAt(ch.vs["sum#1"], 1)}
			ch.want(r, 1)
			wantLogged(t, logs, 3, "key="+k2)
			wantLogged(t, logs, 2, "key="+k2)
			if err := c.Retain(t.Context(), 1, 4); err != nil {
				t.Fatalf("Retain: %v", err)
			}
			ch.want(loadLatest(t, c), 1)
		})
	}
	t.Run("the full checkpoint", func(t *testing.T) {
		s := newStore(t)
		w, _ := newCheckpoints(s)
		ch := newChain(t, w)
		ch.checkpoint(1, nil)
		ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": {17}})
		k1 := snapshots.StateKey(job, 1, "sum#0")
		mustPut(t, s, k1, []byte("garbage"))
		c, _ := newCheckpoints(s)
		r, err := c.LoadLatest(t.Context())
		if r != nil || !errors.Is(err, snapshots.ErrNoUsableCheckpoint) || !errors.Is(err, snapshots.ErrCorrupt) ||
			!strings.Contains(err.Error(), "checkpoint 2: ") || !strings.Contains(err.Error(), k1) {
			t.Fatalf("LoadLatest = %v, %v; want ErrNoUsableCheckpoint naming checkpoint 2 and %s", r, err, k1)
		}
	})
}

// testIncrementalRetain: retention keeps the objects that a retained
// incremental checkpoint references, though their own checkpoint goes,
// and deletes them once nothing references them. It keeps a fallback
// that shares no object with the newest checkpoint, and until one exists
// the oldest checkpoint, which becomes one once the later checkpoints
// have stored its key groups again.
func testIncrementalRetain(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": nil}) // sum#1 in full
	k1 := snapshots.StateKey(job, 1, "sum#0")
	want := keysOf(t, s, 1, 2) // 1 shares k1 with 2: kept to become a fallback
	for _, r := range []*snapshots.Checkpoints{c, func() *snapshots.Checkpoints { f, _ := newCheckpoints(s); return f }()} {
		if err := r.Retain(ctx, 1, 3); err != nil {
			t.Fatalf("Retain(1, 3): %v", err)
		}
		wantKeys(t, s, "", want...)
	}
	if err := c.Delete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	want = append([]string{k1}, keysOf(t, s, 2)...)
	wantKeys(t, s, "", want...)
	fresh, flogs := newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 2)

	// What is left of checkpoint 1 is no aborted checkpoint.
	mark := len(logs.String())
	for _, d := range []*snapshots.Checkpoints{c, fresh} {
		if n, err := d.DeleteIncomplete(ctx, 3); n != 0 || err != nil {
			t.Errorf("DeleteIncomplete(3) = %d, %v; want 0, nil", n, err)
		}
		if err := d.Retain(ctx, 1, 3); err != nil {
			t.Fatalf("Retain(1, 3): %v", err)
		}
	}
	wantKeys(t, s, "", want...)
	for _, l := range []string{logs.String()[mark:], flogs.String()} {
		for line := range strings.Lines(l) {
			if strings.Contains(line, "deleting") && strings.Contains(line, "checkpoint=1 ") {
				t.Errorf("the objects left of checkpoint 1 were taken for an aborted checkpoint: %s", line)
			}
		}
	}

	// Checkpoint 3 references checkpoint 2's objects but none of 1's; 2
	// is kept, to become a fallback, and with it k1.
	ch.checkpoint(3, map[string][]uint32{"sum#0": {0, 1, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, "sum#1": {17}})
	for kg, key := range sectionKeys(ch.handles["sum#0"]) {
		if key == k1 {
			t.Fatalf("checkpoint 3 references key group %d in checkpoint 1", kg)
		}
	}
	want = append([]string{k1}, keysOf(t, s, 2, 3)...)
	if err := c.Retain(ctx, 1, 4); err != nil {
		t.Fatalf("Retain(1, 4): %v", err)
	}
	wantKeys(t, s, "", want...)

	// Checkpoint 4 references only checkpoint 3's sum#0: 2 is its
	// fallback, 3 the one to become the next.
	ch.checkpoint(4, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": nil})
	if err := c.Retain(ctx, 1, 5); err != nil {
		t.Fatalf("Retain(1, 5): %v", err)
	}
	wantKeys(t, s, "", append(want, keysOf(t, s, 4)...)...)

	// Checkpoint 5 is full: 4 is its fallback, which references 3's sum#0.
	// 2 and 3 go but that object, and nothing references k1 any more.
	ch.checkpoint(5, map[string][]uint32{"sum#0": nil, "sum#1": nil})
	want = append([]string{snapshots.StateKey(job, 3, "sum#0")}, keysOf(t, s, 4, 5)...)
	if err := c.Retain(ctx, 1, 6); err != nil {
		t.Fatalf("Retain(1, 6): %v", err)
	}
	wantKeys(t, s, "", want...)
	fresh, _ = newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 5)
}

// testIncrementalDeleteIncomplete: deleting aborted checkpoints leaves the
// objects that complete checkpoints reference, and deletes them once
// nothing does.
func testIncrementalDeleteIncomplete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": nil})
	if err := c.Delete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	k1 := snapshots.StateKey(job, 1, "sum#0")
	putStates(t, c, 3, defaultTasks...) // aborted
	want := append([]string{k1}, keysOf(t, s, 2)...)
	fresh, _ := newCheckpoints(s)
	for i, d := range []*snapshots.Checkpoints{c, fresh} {
		n, err := d.DeleteIncomplete(ctx, 4)
		if want := 1 - i; n != want || err != nil { // the aborted checkpoint 3, then nothing
			t.Errorf("DeleteIncomplete(4) #%d = %d, %v; want %d", i+1, n, err, want)
		}
		wantKeys(t, s, "", want...)
	}
	ch.want(loadLatest(t, c), 2)

	// Once checkpoint 2 is gone, nothing references the rest of 1.
	ch.checkpoint(4, map[string][]uint32{"sum#0": nil, "sum#1": nil})
	if err := c.Delete(ctx, 2); err != nil {
		t.Fatal(err)
	}
	want = keysOf(t, s, 4)
	fresh, _ = newCheckpoints(s)
	if n, err := fresh.DeleteIncomplete(ctx, 5); n != 1 || err != nil {
		t.Errorf("DeleteIncomplete(5) = %d, %v; want 1 (what was left of checkpoint 1)", n, err)
	}
	wantKeys(t, s, "", want...)
	ch.want(loadLatest(t, fresh), 4)
}

// getHook calls hook, once, before the first Get of key.
type getHook struct {
	snapshots.Store
	key  string
	once sync.Once
	hook func()
}

func (g *getHook) Get(ctx context.Context, key string) ([]byte, error) {
	if key == g.key {
		g.once.Do(g.hook)
	}
	return g.Store.Get(ctx, key)
}

// testIncrementalDeleteIncompleteRace: a deletion removes a manifest that
// DeleteIncomplete listed, after a newer checkpoint that references what
// is left of an older one completed. DeleteIncomplete must see the newer
// manifest, not take those objects for garbage.
func testIncrementalDeleteIncompleteRace(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	w, _ := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, w)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": nil})
	if err := w.Delete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	hooked := &getHook{Store: s, key: snapshots.ManifestKey(job, 2), hook: func() {
		ch.checkpoint(3, map[string][]uint32{"sum#0": {2}, "sum#1": {17}}) // references checkpoint 1's object
		if err := w.Delete(ctx, 2); err != nil {
			t.Errorf("Delete: %v", err)
		}
	}}
	c, _ := newCheckpoints(hooked)
	if n, err := c.DeleteIncomplete(ctx, 4); n != 0 || err != nil {
		t.Errorf("DeleteIncomplete(4) = %d, %v; want 0, nil: every object left is referenced", n, err)
	}
	fresh, _ := newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 3)
}

// testIncrementalDelete: deleting a checkpoint by id keeps the objects a
// newer one references, and DeleteAll deletes every one.
func testIncrementalDelete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2, 3, 9}, "sum#1": {17}})
	want := append([]string{snapshots.StateKey(job, 1, "sum#0"), snapshots.StateKey(job, 1, "sum#1")}, keysOf(t, s, 2)...)
	if err := c.Delete(ctx, 1); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, s, "", want...)
	ch.want(loadLatest(t, c), 2)
	if n, err := c.DeleteAll(ctx); n != 2 || err != nil {
		t.Errorf("DeleteAll = %d, %v; want 2", n, err)
	}
	wantKeys(t, s, "")
}

// testRefsRefused: PutTaskStateRefs refuses references that a restore
// could not rely on, and writes nothing.
func testRefsRefused(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	if _, err := c.PutSavepointState(ctx, "v1", logicalState(1, "sum#0", ch.vs["sum#0"])); err != nil {
		t.Fatal(err)
	}
	good, _ := snapshots.Sections(ch.handles["sum#0"])
	at := func(key string) []*messages.KeyGroupSection {
		refs := make([]*messages.KeyGroupSection, len(good))
		for i, r := range good {
			refs[i] = proto.CloneOf(r)
			refs[i].Key = key
		}
		return refs
	}
	before := mustList(t, s, "")
	st := &messages.TaskState{Job: job, TaskId: "sum#0", CheckpointId: 2}
	for _, tc := range []struct {
		name string
		refs []*messages.KeyGroupSection
		want error
	}{
		{"the same checkpoint", at(snapshots.StateKey(job, 2, "sum#0")), snapshots.ErrInvalidKey},
		{"a later checkpoint", at(snapshots.StateKey(job, 3, "sum#0")), snapshots.ErrInvalidKey},
		{"another job", at(snapshots.StateKey("other", 1, "sum#0")), snapshots.ErrInvalidKey},
		{"a savepoint", at(snapshots.SavepointStateKey(job, "v1", 1, "sum#0")), snapshots.ErrInvalidKey},
		{"a manifest", at(snapshots.ManifestKey(job, 1)), snapshots.ErrInvalidKey},
		{"no key", at(""), snapshots.ErrInvalidKey},
		{"an invalid key", at("../x"), snapshots.ErrInvalidKey},
		{"a key group twice", append(slices.Clone(good), good[4]), nil},
	} {
		h, err := c.PutTaskStateRefs(ctx, 2, st, tc.refs)
		if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) {
			t.Errorf("%s: PutTaskStateRefs = %v, %v; want a refusal wrapping %v", tc.name, h, err, tc.want)
		} else if !strings.Contains(err.Error(), "key group") {
			t.Errorf("%s: error %q names no key group", tc.name, err)
		}
	}
	mine := &messages.TaskState{Job: job, TaskId: "sum#0", CheckpointId: 2, KeyGroups: []*messages.KeyGroupState{groupState(5, 2)}}
	if _, err := c.PutTaskStateRefs(ctx, 2, mine, good); err == nil || !strings.Contains(err.Error(), "key group 5") {
		t.Errorf("a key group both stored and referenced: %v; want a refusal naming key group 5", err)
	}
	wantKeys(t, s, "", before...)
}

// testManifestRefsRefused: a checkpoint's manifest may reference only the
// states of earlier checkpoints of its job; one that references others is
// refused, and one in the store is corrupt.
func testManifestRefsRefused(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2}, "sum#1": {17}})
	entries := ch.entries[2]
	for name, key := range map[string]string{
		"its own checkpoint": snapshots.StateKey(job, 3, "sum#1"),
		"a later one":        snapshots.StateKey(job, 4, "sum#1"),
		"another job":        snapshots.StateKey("other", 1, "sum#1"),
		"a savepoint":        snapshots.SavepointStateKey(job, "v1", 1, "sum#1"),
	} {
		e := make([]*messages.TaskStateEntry, len(entries))
		for i := range entries {
			e[i] = proto.CloneOf(entries[i])
		}
		for _, sec := range e[2].GetState().GetKeyGroups() {
			if sec.GetKey() != "" {
				sec.Key = key
			}
		}
		m := manifestOf(3, e)
		if err := c.PutManifest(ctx, m); err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "sum#1") {
			t.Errorf("PutManifest referencing %s = %v; want a refusal naming the task and %s", name, err, key)
		}
		data, err := snapshots.EncodeObject(snapshots.KindManifest, m)
		if err != nil {
			t.Fatal(err)
		}
		mustPut(t, s, snapshots.ManifestKey(job, 3), data)
		fresh, _ := newCheckpoints(s)
		if _, err := fresh.ReadManifest(ctx, 3); !errors.Is(err, snapshots.ErrCorrupt) {
			t.Errorf("ReadManifest of one referencing %s = %v; want ErrCorrupt", name, err)
		}
		ch.want(loadLatest(t, c), 2)
	}
	wantLogged(t, logs, 3, snapshots.ManifestKey(job, 3))
}

// testSavepointRefsRefused: a savepoint is self-contained, so its manifest
// references no section in another object.
func testSavepointRefsRefused(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	complete(t, c, 1)
	entries := putSavepointStates(t, c, "v1", defaultTasks...)
	h := entries[1].GetState()
	if len(h.GetKeyGroups()) == 0 {
		t.Fatal("the savepoint's state indexes no key group")
	}
	h.KeyGroups[0].Key = snapshots.StateKey(job, 1, "sum#0")
	m := savepointManifest("v1", entries)
	err := c.PutSavepointManifest(ctx, m)
	if err == nil || !strings.Contains(err.Error(), "sum#0") || !strings.Contains(err.Error(), "self-contained") {
		t.Fatalf("PutSavepointManifest referencing a checkpoint's object = %v; want a refusal naming task sum#0", err)
	}
	if ok, _ := c.SavepointExists(ctx, "v1"); ok {
		t.Fatal("the refused savepoint manifest was written")
	}
	data, err := snapshots.EncodeObject(snapshots.KindManifest, m)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, snapshots.SavepointManifestKey(job, "v1"), data)
	wantLoadFails(t, c, "v1", snapshots.SavepointManifestKey(job, "v1"), snapshots.ErrCorrupt)
}
