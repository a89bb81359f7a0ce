package dataflow

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// dirtyMaxP is not a multiple of 64, so the key-group bit sets have a
// partly used last word; the tests use task 1 of 2, which owns [50, 100):
// its bits are absolute, not relative to its range.
const dirtyMaxP = 100

// dirtyOp is one record of the dirty-tracking tests: what the process
// function does to the state of Key.
type dirtyOp struct {
	Key  string
	Kind int
	A    int64
	B    string
}

const (
	opSet       = iota // v.Set(A)
	opClear            // v.Clear()
	opPut              // m.Put(B, A)
	opDelete           // m.Delete(B)
	opHistGet          // hist: Get and change in place (Set when unset)
	opHistClear        // hist.Clear()
	opTagsGet          // tags: Get(B) and change in place (Put when absent)
	opTagsAll          // tags: All, changing every value in place
	opRead             // v.Get, m.Get, m.Len: no write
	opKinds
)

// dirtyStates are the states of one instance of the dirty graph.
type dirtyStates struct {
	v    *ValueState[string, int64]
	m    *MapState[string, string, int64]
	hist *ValueState[string, []int64]        // reaches a reference
	tags *MapState[string, string, []string] // reaches a reference
}

// dirtyGraph is a Process operator "p" of the given parallelism keyed by
// dirtyOp.Key, applying each op; every new instance's states go to *reg.
func dirtyGraph(parallelism int, reg *dirtyStates) *Graph {
	g := New("dirty", MaxParallelism(dirtyMaxP))
	k := KeyBy(FromSlice(g, "src", []dirtyOp{}), func(o dirtyOp) string { return o.Key })
	Sink(Process(k, "p", func(s *KeyedSetup[string]) ProcessFunc[string, dirtyOp, int64] {
		st := dirtyStates{
			v: Value[int64](s, "v"), m: MapOf[string, int64](s, "m"),
			hist: Value[[]int64](s, "hist"), tags: MapOf[string, []string](s, "tags"),
		}
		*reg = st
		return func(_ *Context[string], o dirtyOp, _ *Collector[int64]) error {
			applyDirtyOp(st, o)
			return nil
		}
	}, Parallelism(parallelism)), "sink", discard[int64])
	return g
}

func applyDirtyOp(st dirtyStates, o dirtyOp) {
	switch o.Kind {
	case opSet:
		st.v.Set(o.A)
	case opClear:
		st.v.Clear()
	case opPut:
		st.m.Put(o.B, o.A)
	case opDelete:
		st.m.Delete(o.B)
	case opHistGet:
		if h, ok := st.hist.Get(); ok && len(h) > 0 {
			h[0] += o.A // in place, no Set
		} else {
			st.hist.Set([]int64{o.A})
		}
	case opHistClear:
		st.hist.Clear()
	case opTagsGet:
		if t, ok := st.tags.Get(o.B); ok && len(t) > 0 {
			t[0] = fmt.Sprint(o.A) // in place, no Put
		} else {
			st.tags.Put(o.B, []string{fmt.Sprint(o.A)})
		}
	case opTagsAll:
		for _, t := range st.tags.All {
			if len(t) > 0 {
				t[0] += "+" // in place, no Put
			}
		}
	case opRead:
		st.v.Get()
		st.m.Get(o.B)
		st.m.Len()
	}
}

// keysOfRange returns n distinct string keys whose key groups (of
// dirtyMaxP) lie in [start, end).
func keysOfRange(n, start, end int) []string {
	var keys []string
	for i := 0; len(keys) < n; i++ {
		k := fmt.Sprintf("k%d", i)
		if kg := int(HashString(k) % dirtyMaxP); kg >= start && kg < end {
			keys = append(keys, k)
		}
	}
	return keys
}

// dirtyInstance returns task p#1 of 2 (key groups [50, 100)) of the dirty
// graph, with the instance's states.
func dirtyInstance(t testing.TB) (Instance, *dirtyStates, *Plan) {
	t.Helper()
	reg := &dirtyStates{}
	p := mustPlan(t, dirtyGraph(2, reg))
	inst := mustInstance(t, p, "p#1", 8, noopSender{})
	if task := mustTask(t, p, "p#1"); task.KeyGroupStart != 50 || task.KeyGroupEnd != 100 {
		t.Fatalf("p#1 owns [%d, %d), want [50, 100)", task.KeyGroupStart, task.KeyGroupEnd)
	}
	return inst, reg, p
}

// canonical is a snapshot's keyed entries by key group and state, each
// entry as "key|mapkey|value" in hex, sorted: equal states give equal
// canonical forms whatever the map iteration order.
func canonical(groups []*messages.KeyGroupState) map[uint32]map[string][]string {
	out := map[uint32]map[string][]string{}
	for _, g := range groups {
		for _, ns := range g.GetStates() {
			for _, e := range ns.GetEntries() {
				if out[g.KeyGroup] == nil {
					out[g.KeyGroup] = map[string][]string{}
				}
				out[g.KeyGroup][ns.Name] = append(out[g.KeyGroup][ns.Name], fmt.Sprintf("%x|%x|%x", e.Key, e.MapKey, e.Value))
			}
		}
	}
	for _, byName := range out {
		for _, es := range byName {
			slices.Sort(es)
		}
	}
	return out
}

func takeDirty(inst Instance) groupSet {
	dst := make(groupSet, KeyGroupWords(dirtyMaxP))
	inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(dst)
	return dst
}

func groupsOf(set groupSet) []int {
	var out []int
	for kg := range len(set) * 64 {
		if set.has(kg) {
			out = append(out, kg)
		}
	}
	return out
}

// checkpointModel is what a runtime doing incremental checkpoints holds:
// the key groups of the last full snapshot, each replaced by the later
// incremental snapshots that selected it.
type checkpointModel struct {
	groups map[uint32]*messages.KeyGroupState
	descs  []*messages.StateDescriptor
}

func (m *checkpointModel) full(st *messages.TaskState) {
	m.groups = map[uint32]*messages.KeyGroupState{}
	for _, g := range st.KeyGroups {
		m.groups[g.KeyGroup] = g
	}
	m.descs = st.StateDescriptors
}

// incremental applies a snapshot of the selected key groups: a selected
// group absent from st became empty.
func (m *checkpointModel) incremental(t *testing.T, st *messages.TaskState, selected groupSet) {
	t.Helper()
	for _, kg := range groupsOf(selected) {
		delete(m.groups, uint32(kg))
	}
	for _, g := range st.KeyGroups {
		if !selected.has(int(g.KeyGroup)) {
			t.Fatalf("incremental snapshot holds key group %d, which is not selected (%v)", g.KeyGroup, groupsOf(selected))
		}
		m.groups[g.KeyGroup] = g
	}
	if !reflect.DeepEqual(canonicalDescs(st.StateDescriptors), canonicalDescs(m.descs)) {
		t.Fatalf("incremental snapshot's descriptors %v differ from the full one's %v", st.StateDescriptors, m.descs)
	}
}

func (m *checkpointModel) state() []*messages.KeyGroupState {
	var out []*messages.KeyGroupState
	for _, g := range m.groups {
		out = append(out, g)
	}
	return out
}

func canonicalDescs(ds []*messages.StateDescriptor) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.String())
	}
	return out
}

// runIncrementalProperty applies random ops to a task and checkpoints it at
// random points, as the runtime does: a full snapshot now and then, else
// the key groups written since the last complete checkpoint, some of the
// checkpoints aborting (their key groups stay due). After every complete
// checkpoint the rebuilt state must equal a full snapshot. It returns the
// first mismatch, or "".
func runIncrementalProperty(t *testing.T, seed uint64, breakReads bool) string {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 13))
	inst, st, _ := dirtyInstance(t)
	if breakReads {
		st.hist.readMarks, st.tags.readMarks = false, false
	}
	keys := keysOfRange(40, 50, 100)
	ks := inst.(KeyGroupSnapshotter)
	var model checkpointModel
	model.full(snapshot(t, inst))
	due := make(groupSet, KeyGroupWords(dirtyMaxP)) // written since the last complete checkpoint
	for step := range 300 {
		batch := make([]dirtyOp, 1+r.IntN(8))
		for i := range batch {
			batch[i] = dirtyOp{Key: keys[r.IntN(len(keys))], Kind: r.IntN(opKinds), A: r.Int64N(100), B: fmt.Sprint(r.IntN(4))}
		}
		if err := inst.ProcessBatch(0, batch, nil); err != nil {
			t.Fatal(err)
		}
		if r.IntN(4) > 0 {
			continue
		}
		ks.TakeDirtyKeyGroups(due)
		switch n := r.IntN(10); {
		case n == 0: // a full checkpoint
			model.full(snapshot(t, inst))
			clear(due)
		default:
			var inc messages.TaskState
			if err := ks.SnapshotKeyGroups(&inc, slices.Clone(due)); err != nil {
				t.Fatal(err)
			}
			if n < 3 {
				continue // aborted: its key groups stay due
			}
			model.incremental(t, wireRoundTrip(t, &inc), due)
			clear(due)
		}
		want := canonical(snapshot(t, inst).KeyGroups)
		if got := canonical(model.state()); !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("step %d: rebuilt state\n%v\nwant\n%v", step, got, want)
		}
	}
	return ""
}

func TestIncrementalSnapshotsRebuildFullState(t *testing.T) {
	for seed := range uint64(8) {
		if msg := runIncrementalProperty(t, seed, false); msg != "" {
			t.Fatalf("seed %d: %s", seed, msg)
		}
	}
}

// TestIncrementalPropertyCatchesMissedReads shows the property test has
// teeth: with reads of reference values not marking their key groups, the
// rebuilt state goes wrong.
func TestIncrementalPropertyCatchesMissedReads(t *testing.T) {
	for seed := range uint64(20) {
		if runIncrementalProperty(t, seed, true) != "" {
			return
		}
	}
	t.Fatal("in-place changes after Get went unmarked, and no seed noticed")
}

// processOne runs one op through inst.
func processOne(t *testing.T, inst Instance, o dirtyOp) {
	t.Helper()
	if err := inst.ProcessBatch(0, []dirtyOp{o}, nil); err != nil {
		t.Fatal(err)
	}
}

func TestInPlaceChangeAfterGetIsDirty(t *testing.T) {
	inst, _, _ := dirtyInstance(t)
	key := keysOfRange(1, 50, 100)[0]
	kg := int(HashString(key) % dirtyMaxP)
	only := func(kg int) []int { return []int{kg} }

	processOne(t, inst, dirtyOp{Key: key, Kind: opHistGet, A: 1}) // Set: unset before
	if got := groupsOf(takeDirty(inst)); !slices.Equal(got, only(kg)) {
		t.Fatalf("after Set, dirty = %v, want %v", got, only(kg))
	}
	if got := groupsOf(takeDirty(inst)); got != nil {
		t.Fatalf("a second TakeDirtyKeyGroups = %v, want none", got)
	}
	processOne(t, inst, dirtyOp{Key: key, Kind: opHistGet, A: 41}) // Get, then h[0] += 41 in place
	dirty := takeDirty(inst)
	if got := groupsOf(dirty); !slices.Equal(got, only(kg)) {
		t.Fatalf("after Get and an in-place change, dirty = %v, want %v", got, only(kg))
	}
	var inc messages.TaskState
	if err := inst.(KeyGroupSnapshotter).SnapshotKeyGroups(&inc, dirty); err != nil {
		t.Fatal(err)
	}
	hist, err := DecodeValueState[string, []int64](&inc, "hist")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hist[key], []int64{42}) {
		t.Errorf("incremental snapshot holds hist[%s] = %v, want [42]", key, hist[key])
	}

	// Reads of values without references mark nothing; Len never does.
	processOne(t, inst, dirtyOp{Key: key, Kind: opSet, A: 1})
	processOne(t, inst, dirtyOp{Key: key, Kind: opPut, A: 1, B: "x"})
	takeDirty(inst)
	processOne(t, inst, dirtyOp{Key: key, Kind: opRead, B: "x"})
	if got := groupsOf(takeDirty(inst)); got != nil {
		t.Errorf("reads of int64 values marked %v", got)
	}
	// Map values reaching a reference: Get of a present user key and All
	// mark; Get of an absent one does not.
	processOne(t, inst, dirtyOp{Key: key, Kind: opTagsGet, A: 1, B: "x"})
	takeDirty(inst)
	for _, o := range []dirtyOp{{Key: key, Kind: opTagsGet, A: 2, B: "x"}, {Key: key, Kind: opTagsAll}} {
		processOne(t, inst, o)
		if got := groupsOf(takeDirty(inst)); !slices.Equal(got, only(kg)) {
			t.Errorf("op %d on a []string map value: dirty = %v, want %v", o.Kind, got, only(kg))
		}
	}
	_, st, _ := dirtyInstance(t)
	*st.tags.setup.cur = current[string]{key: key}
	st.tags.Get("absent")
	st.hist.Get()
	if got := groupsOf(takeDirtyOf(st.tags.setup)); got != nil {
		t.Errorf("Get of absent reference values marked %v", got)
	}
}

func takeDirtyOf(s *KeyedSetup[string]) groupSet {
	dst := make(groupSet, KeyGroupWords(dirtyMaxP))
	s.takeDirty(dst)
	return dst
}

func TestTakeDirtyKeyGroups(t *testing.T) {
	inst, _, _ := dirtyInstance(t)
	keys := keysOfRange(30, 50, 100)
	var want []int
	var batch []dirtyOp
	for i, k := range keys {
		batch = append(batch, dirtyOp{Key: k, Kind: []int{opSet, opClear, opPut, opHistGet, opTagsGet}[i%5], B: "b"})
		want = append(want, int(HashString(k)%dirtyMaxP))
	}
	slices.Sort(want)
	want = slices.Compact(want)
	if err := inst.ProcessBatch(0, batch, nil); err != nil {
		t.Fatal(err)
	}
	dst := make([]uint64, KeyGroupWords(dirtyMaxP))
	dst[0] = 1 << 3 // bits already set stay set
	inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(dst)
	if got := groupsOf(dst); !slices.Equal(got, append([]int{3}, want...)) {
		t.Errorf("TakeDirtyKeyGroups = %v, want 3 and %v", got, want)
	}
	if want[0] < 50 {
		t.Fatalf("test keys of key group %d, outside the task's range", want[0])
	}

	// Deleting from a key without a map changes nothing and marks nothing.
	processOne(t, inst, dirtyOp{Key: "nobody", Kind: opDelete, B: "b"})
	if got := groupsOf(takeDirty(inst)); got != nil {
		t.Errorf("Delete of an absent key marked %v", got)
	}

	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), `operator "p"`) {
			t.Errorf("TakeDirtyKeyGroups of a short slice: recovered %v, want a panic naming the operator", r)
		}
	}()
	inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(make([]uint64, 1))
}

// TestKeyGroupOfEveryKeyType checks that the key group markDirty computes
// is the key codec's, for every kind of key.
func TestKeyGroupOfEveryKeyType(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	checkKeyGroups(t, r, func(r *rand.Rand) string { return randString(r) })
	checkKeyGroups(t, r, func(r *rand.Rand) name { return name(randString(r)) })
	checkKeyGroups(t, r, func(r *rand.Rand) int { return int(r.Uint64()) })
	checkKeyGroups(t, r, func(r *rand.Rand) int8 { return int8(r.Uint32()) })
	checkKeyGroups(t, r, func(r *rand.Rand) int16 { return int16(r.Uint32()) })
	checkKeyGroups(t, r, func(r *rand.Rand) int32 { return int32(r.Uint32()) })
	checkKeyGroups(t, r, func(r *rand.Rand) int64 { return int64(r.Uint64()) })
	checkKeyGroups(t, r, func(r *rand.Rand) uint { return uint(r.Uint64()) })
	checkKeyGroups(t, r, func(r *rand.Rand) uint8 { return uint8(r.Uint32()) })
	checkKeyGroups(t, r, func(r *rand.Rand) uint16 { return uint16(r.Uint32()) })
	checkKeyGroups(t, r, func(r *rand.Rand) uint32 { return r.Uint32() })
	checkKeyGroups(t, r, func(r *rand.Rand) uint64 { return r.Uint64() })
	checkKeyGroups(t, r, func(r *rand.Rand) level { return level(r.Uint32()) })
}

func checkKeyGroups[K Key](t *testing.T, r *rand.Rand, gen func(*rand.Rand) K) {
	t.Helper()
	for _, maxP := range []int{1, 64, 100, 128, MaxParallelismLimit} {
		s := newKeyedSetup(&TaskPlan{ID: "t#0", Operator: "t", KeyGroupEnd: maxP, maxP: maxP}, newKeyCodec[K]())
		dst := make([]uint64, KeyGroupWords(maxP))
		for range 50 {
			k := gen(r)
			s.cur.key = k
			s.markDirty()
			s.markDirty() // a second write of the record
			clear(dst)
			s.takeDirty(dst)
			want := int(s.codec.hash(k) % uint64(maxP))
			if got := groupsOf(dst); !slices.Equal(got, []int{want}) {
				t.Fatalf("%T key %v, %d key groups: marked %v, want [%d]", k, k, maxP, got, want)
			}
		}
	}
}

func TestSnapshotKeyGroupsSelection(t *testing.T) {
	inst, _, _ := dirtyInstance(t)
	var batch []dirtyOp
	for i, k := range keysOfRange(30, 50, 100) {
		batch = append(batch, dirtyOp{Key: k, Kind: []int{opSet, opPut, opHistGet, opTagsGet}[i%4], A: int64(i), B: "b"})
	}
	if err := inst.ProcessBatch(0, batch, nil); err != nil {
		t.Fatal(err)
	}
	full := snapshot(t, inst)
	ks := inst.(KeyGroupSnapshotter)

	all := make([]uint64, KeyGroupWords(dirtyMaxP))
	for i := range all {
		all[i] = ^uint64(0)
	}
	for _, sel := range []struct {
		name   string
		groups []uint64
	}{{"all", all}, {"none", nil}, {"empty", make([]uint64, 2)}, {"short", []uint64{^uint64(0)}}, {"odd", []uint64{0, 0x5555555555555555}}} {
		var st messages.TaskState
		if err := ks.SnapshotKeyGroups(&st, sel.groups); err != nil {
			t.Fatal(err)
		}
		var want []*messages.KeyGroupState
		for _, g := range full.KeyGroups {
			if groupSet(sel.groups).has(int(g.KeyGroup)) {
				want = append(want, g)
			}
		}
		if got := canonical(st.KeyGroups); !reflect.DeepEqual(got, canonical(want)) {
			t.Errorf("%s: SnapshotKeyGroups holds\n%v\nwant\n%v", sel.name, got, canonical(want))
		}
		if !slices.IsSortedFunc(st.KeyGroups, func(a, b *messages.KeyGroupState) int { return int(a.KeyGroup) - int(b.KeyGroup) }) {
			t.Errorf("%s: key groups out of order", sel.name)
		}
		if !reflect.DeepEqual(canonicalDescs(st.StateDescriptors), canonicalDescs(full.StateDescriptors)) {
			t.Errorf("%s: descriptors %v, want %v", sel.name, st.StateDescriptors, full.StateDescriptors)
		}
	}
	if len(full.KeyGroups) < 10 {
		t.Fatalf("only %d key groups hold state", len(full.KeyGroups))
	}
}

// TestSnapshotKeyGroupsOutsideRange: a task that was handed keys of
// another task's range (nothing but KeyBy routing prevents it) snapshots
// them too, in key-group order.
func TestSnapshotKeyGroupsOutsideRange(t *testing.T) {
	inst, _, _ := dirtyInstance(t)
	in, below := keysOfRange(5, 50, 100), keysOfRange(5, 0, 50)
	var batch []dirtyOp
	for _, k := range append(in, below...) {
		batch = append(batch, dirtyOp{Key: k, Kind: opPut, B: k})
	}
	if err := inst.ProcessBatch(0, batch, nil); err != nil {
		t.Fatal(err)
	}
	dirty := takeDirty(inst)
	if want := groupsOf(dirty); want[0] >= 50 || want[len(want)-1] < 50 {
		t.Fatalf("written key groups %v, want some below 50 and some from 50", want)
	}
	// Few selected key groups, and all of them, are gathered differently.
	for _, sel := range []groupSet{dirty, nil} {
		var st messages.TaskState
		var err error
		if sel == nil {
			err = inst.Snapshot(&st)
		} else {
			err = inst.(KeyGroupSnapshotter).SnapshotKeyGroups(&st, sel)
		}
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, g := range st.KeyGroups {
			got = append(got, int(g.KeyGroup))
		}
		if want := groupsOf(dirty); !slices.Equal(got, want) {
			t.Errorf("snapshot (selection %v) of key groups %v, want %v", sel, got, want)
		}
	}
}

// restoredState returns the full snapshot of a fresh task p#1 restored by
// restore, and checks that the restore marked no key group.
func restoredState(t *testing.T, restore func(Instance) error) *messages.TaskState {
	t.Helper()
	inst, _, _ := dirtyInstance(t)
	if err := restore(inst); err != nil {
		t.Fatal(err)
	}
	if got := groupsOf(takeDirty(inst)); got != nil {
		t.Errorf("TakeDirtyKeyGroups after a restore = %v, want none", got)
	}
	return snapshot(t, inst)
}

func TestRestoreKeyGroupsByStream(t *testing.T) {
	// The checkpoint of a task owning every key group: half of its key
	// groups lie outside the range of p#1, which restores it.
	reg := &dirtyStates{}
	whole := mustInstance(t, mustPlan(t, dirtyGraph(1, reg)), "p#0", 8, noopSender{})
	r := rand.New(rand.NewPCG(3, 4))
	keys := keysOfRange(80, 0, 100)
	for range 50 {
		batch := make([]dirtyOp, 8)
		for i := range batch {
			batch[i] = dirtyOp{Key: keys[r.IntN(len(keys))], Kind: r.IntN(opKinds), A: r.Int64N(100), B: fmt.Sprint(r.IntN(4))}
		}
		if err := whole.ProcessBatch(0, batch, nil); err != nil {
			t.Fatal(err)
		}
	}
	st := snapshot(t, whole)

	want := restoredState(t, func(inst Instance) error { return inst.Restore(st) })
	if len(want.KeyGroups) == 0 {
		t.Fatal("nothing restored")
	}
	for _, g := range want.KeyGroups {
		if g.KeyGroup < 50 {
			t.Errorf("Restore loaded key group %d, outside the task's range [50, 100)", g.KeyGroup)
		}
	}
	for _, inHeader := range []int{0, 3, len(st.KeyGroups)} {
		got := restoredState(t, func(inst Instance) error {
			header := &messages.TaskState{StateDescriptors: st.StateDescriptors, KeyGroups: st.KeyGroups[:inHeader]}
			if err := inst.Restore(header); err != nil {
				return err
			}
			for _, g := range st.KeyGroups[inHeader:] {
				if err := inst.(KeyGroupRestorer).RestoreKeyGroup(g); err != nil {
					return err
				}
			}
			return nil
		})
		if g, w := canonical(got.KeyGroups), canonical(want.KeyGroups); !reflect.DeepEqual(g, w) {
			t.Errorf("%d key groups in the header: streamed restore gives\n%v\nwant\n%v", inHeader, g, w)
		}
	}
}

func TestRestoreKeyGroupErrors(t *testing.T) {
	inst, _, _ := dirtyInstance(t)
	kr := inst.(KeyGroupRestorer)
	g := &messages.KeyGroupState{KeyGroup: 60, States: []*messages.NamedState{{Name: "gone", Entries: []*messages.StateEntry{{Key: []byte("k")}}}}}
	err := kr.RestoreKeyGroup(g)
	if !errors.Is(err, ErrRestoreRefused) || !strings.Contains(fmt.Sprint(err), `operator "p"`) {
		t.Errorf("RestoreKeyGroup before Restore = %v, want ErrRestoreRefused naming the operator", err)
	}
	var empty messages.TaskState
	if err := inst.Snapshot(&empty); err != nil {
		t.Fatal(err)
	}
	if err := inst.Restore(&empty); err != nil {
		t.Fatal(err)
	}
	err = kr.RestoreKeyGroup(g)
	if !errors.Is(err, ErrIncompatibleState) || !strings.Contains(fmt.Sprint(err), `"gone"`) {
		t.Errorf("RestoreKeyGroup of an undeclared state = %v, want ErrIncompatibleState naming it", err)
	}
	g.KeyGroup = 10 // outside the task's range: skipped, as Restore skips it
	if err := kr.RestoreKeyGroup(g); err != nil {
		t.Errorf("RestoreKeyGroup outside the range = %v, want it skipped", err)
	}
	// A 1-byte value is no int64.
	err = kr.RestoreKeyGroup(&messages.KeyGroupState{KeyGroup: 60, States: []*messages.NamedState{{Name: "v", Entries: []*messages.StateEntry{{Key: []byte("k"), Value: []byte{1}}}}}})
	if err == nil || !strings.Contains(err.Error(), `state "v"`) || !strings.Contains(err.Error(), "key group 60") {
		t.Errorf("RestoreKeyGroup of a corrupt value = %v, want an error naming the state and key group", err)
	}
}

func TestReachesReference(t *testing.T) {
	type plain struct {
		A int
		S string
		F [2]float64
	}
	type nested struct {
		P plain
		M map[string]int
	}
	for typ, want := range map[reflect.Type]bool{
		reflect.TypeFor[int64]():            false,
		reflect.TypeFor[string]():           false,
		reflect.TypeFor[plain]():            false,
		reflect.TypeFor[[0]*int]():          false,
		reflect.TypeFor[[]byte]():           true,
		reflect.TypeFor[*int]():             true,
		reflect.TypeFor[map[int]int]():      true,
		reflect.TypeFor[any]():              true,
		reflect.TypeFor[func()]():           true,
		reflect.TypeFor[chan int]():         true,
		reflect.TypeFor[nested]():           true,
		reflect.TypeFor[[3]nested]():        true,
		reflect.TypeFor[profile]():          true,
		reflect.TypeFor[struct{ _ *int }](): true,
	} {
		if got := reachesReference(typ); got != want {
			t.Errorf("reachesReference(%v) = %t, want %t", typ, got, want)
		}
	}
}

// TestSkipDirtyKeyGroups: a task created with SkipDirtyKeyGroups keeps its
// state as any other, and reports every key group as written, before and
// after a restore.
func TestSkipDirtyKeyGroups(t *testing.T) {
	reg := &dirtyStates{}
	p := mustPlan(t, dirtyGraph(2, reg))
	newTask := func(skip bool) Instance {
		inst, err := p.NewInstance(mustTask(t, p, "p#1").Index, InstanceContext{BatchSize: 8, Sender: noopSender{}, SkipDirtyKeyGroups: skip})
		if err != nil {
			t.Fatal(err)
		}
		return inst
	}
	tracked, skipping := newTask(false), newTask(true)
	var batch []dirtyOp
	for i, k := range keysOfRange(20, 50, 100) {
		batch = append(batch, dirtyOp{Key: k, Kind: i % opKinds, A: int64(i), B: "b"})
	}
	for _, inst := range []Instance{tracked, skipping} {
		if err := inst.ProcessBatch(0, slices.Clone(batch), nil); err != nil {
			t.Fatal(err)
		}
	}
	if g, w := canonical(snapshot(t, skipping).KeyGroups), canonical(snapshot(t, tracked).KeyGroups); !reflect.DeepEqual(g, w) {
		t.Errorf("state with SkipDirtyKeyGroups\n%v\nwant\n%v", g, w)
	}
	every := make([]int, dirtyMaxP)
	for i := range every {
		every[i] = i
	}
	if got := groupsOf(takeDirty(skipping)); !slices.Equal(got, every) {
		t.Errorf("TakeDirtyKeyGroups with SkipDirtyKeyGroups = %v, want every key group", got)
	}
	restored := newTask(true)
	if err := restored.Restore(snapshot(t, skipping)); err != nil {
		t.Fatal(err)
	}
	if got := groupsOf(takeDirty(restored)); !slices.Equal(got, every) {
		t.Errorf("TakeDirtyKeyGroups after a restore with SkipDirtyKeyGroups = %v, want every key group", got)
	}
	if got := groupsOf(takeDirty(tracked)); len(got) == 0 || len(got) == dirtyMaxP {
		t.Errorf("the tracked task wrote %d key groups, want some", len(got))
	}
}
