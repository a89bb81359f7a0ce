package dataflow

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/snapflow/snapflow/messages"
)

type event struct {
	User string
	N    int64
}

type profile struct {
	Name  string
	Tags  []string
	Score float64
}

// aggStates are the states of one task of the "agg" operator.
type aggStates struct {
	sum     *ValueState[string, int64]
	parity  *MapState[string, string, int64] // "even"/"odd" -> count
	profile *ValueState[string, profile]
}

const aggMaxP = 16

// aggGraph keys events by user and keeps, per user, the sum of N, the count
// of even and odd N and a JSON-encoded profile. Every new instance of a task
// stores its states in reg under the task id.
func aggGraph(parallelism int, reg map[string]*aggStates) *Graph {
	g := New("agg", MaxParallelism(aggMaxP))
	src := FromSlice(g, "src", []event{})
	byUser := KeyBy(src, func(e event) string { return e.User })
	out := Process(byUser, "agg", func(s *KeyedSetup[string]) ProcessFunc[string, event, event] {
		st := &aggStates{
			sum:     Value[int64](s, "sum"),
			parity:  MapOf[string, int64](s, "parity"),
			profile: Value[profile](s, "profile", JSONCodec[profile]{}),
		}
		reg[s.TaskID()] = st
		return func(ctx *Context[string], e event, out *Collector[event]) error {
			if ctx.Key() != e.User {
				return fmt.Errorf("ctx.Key() = %q for an event of %q", ctx.Key(), e.User)
			}
			sum, _ := st.sum.Get()
			sum += e.N
			st.sum.Set(sum)
			p := map[bool]string{true: "even", false: "odd"}[e.N%2 == 0]
			c, _ := st.parity.Get(p)
			st.parity.Put(p, c+1)
			st.profile.Set(profile{Name: strings.ToUpper(e.User), Tags: []string{ctx.TaskID()}, Score: float64(sum) / 2})
			out.Emit(event{User: e.User, N: sum})
			return nil
		}
	}, Parallelism(parallelism))
	Sink(out, "sink", discard[event])
	return g
}

func userEvents(n int) []event {
	var es []event
	for i := range n {
		es = append(es, event{User: fmt.Sprintf("user-%d", i%23), N: int64(i)})
	}
	return es
}

// routeEvents feeds events, in batches of up to 7, to the agg task owning each key.
func routeEvents(t *testing.T, p *Plan, insts map[string]Instance, es []event) {
	t.Helper()
	byTask := map[string][]event{}
	for _, e := range es {
		kg := int(HashString(e.User) % uint64(p.MaxParallelism))
		id := fmt.Sprintf("agg#%d", TaskForKeyGroup(p.MaxParallelism, mustTask(t, p, "agg#0").Parallelism, kg))
		byTask[id] = append(byTask[id], e)
	}
	for _, id := range slices.Sorted(maps.Keys(byTask)) {
		for b := range slices.Chunk(byTask[id], 7) {
			if err := insts[id].ProcessBatch(0, b, nil); err != nil {
				t.Fatalf("%s: ProcessBatch: %v", id, err)
			}
		}
	}
}

func snapshot(t *testing.T, inst Instance) *messages.TaskState {
	t.Helper()
	var st messages.TaskState
	if err := inst.Snapshot(&st); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return wireRoundTrip(t, &st)
}

// wireRoundTrip sends st through the wire format, as a checkpoint does.
func wireRoundTrip(t *testing.T, st *messages.TaskState) *messages.TaskState {
	t.Helper()
	b, err := proto.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back messages.TaskState
	if err := proto.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	return &back
}

func TestKeyedStateSnapshotRestore(t *testing.T) {
	reg := map[string]*aggStates{}
	p := mustPlan(t, aggGraph(2, reg))
	ids := []string{"agg#0", "agg#1"}
	insts := map[string]Instance{}
	senders := map[string]*fakeSender{}
	for _, id := range ids {
		senders[id] = &fakeSender{}
		insts[id] = mustInstance(t, p, id, 4, senders[id])
	}
	es := userEvents(200)
	routeEvents(t, p, insts, es)

	wantSum := map[string]int64{}
	for _, e := range es {
		wantSum[e.User] += e.N
	}
	gotSum := map[string]int64{}
	for _, id := range ids {
		task := mustTask(t, p, id)
		old := reg[id]
		st := snapshot(t, insts[id])

		// Key groups: ascending, owned by the task, holding only keys that hash to them.
		var kgs []uint32
		for _, g := range st.KeyGroups {
			kgs = append(kgs, g.KeyGroup)
			if int(g.KeyGroup) < task.KeyGroupStart || int(g.KeyGroup) >= task.KeyGroupEnd {
				t.Errorf("%s: snapshot holds key group %d outside [%d,%d)", id, g.KeyGroup, task.KeyGroupStart, task.KeyGroupEnd)
			}
			for _, ns := range g.States {
				for _, e := range ns.Entries {
					if kg := HashString(string(e.Key)) % aggMaxP; kg != uint64(g.KeyGroup) {
						t.Errorf("%s: key %q of state %q in key group %d, its hash gives %d", id, e.Key, ns.Name, g.KeyGroup, kg)
					}
				}
			}
		}
		if !slices.IsSorted(kgs) || len(slices.Compact(slices.Clone(kgs))) != len(kgs) {
			t.Errorf("%s: key groups %v are not ascending and unique", id, kgs)
		}

		sums, err := DecodeValueState[string, int64](st, "sum")
		if err != nil {
			t.Fatalf("DecodeValueState: %v", err)
		}
		if !maps.Equal(sums, valuesOf(old.sum)) {
			t.Errorf("%s: decoded sums %v, state holds %v", id, sums, valuesOf(old.sum))
		}
		maps.Copy(gotSum, sums)
		profiles, err := DecodeValueState[string, profile](st, "profile", JSONCodec[profile]{})
		if err != nil {
			t.Fatalf("DecodeValueState: %v", err)
		}
		if !reflect.DeepEqual(profiles, valuesOf(old.profile)) {
			t.Errorf("%s: decoded profiles %v, state holds %v", id, profiles, valuesOf(old.profile))
		}

		senders[id] = &fakeSender{}
		fresh := mustInstance(t, p, id, 4, senders[id])
		if reg[id] == old {
			t.Fatal("a new instance did not run setup again")
		}
		if err := fresh.Restore(st); err != nil {
			t.Fatalf("%s: Restore: %v", id, err)
		}
		restored := reg[id]
		if !maps.Equal(valuesOf(restored.sum), valuesOf(old.sum)) {
			t.Errorf("%s: restored sums %v, want %v", id, valuesOf(restored.sum), valuesOf(old.sum))
		}
		if !reflect.DeepEqual(mapsOf(restored.parity), mapsOf(old.parity)) {
			t.Errorf("%s: restored parity counts %v, want %v", id, mapsOf(restored.parity), mapsOf(old.parity))
		}
		if !reflect.DeepEqual(valuesOf(restored.profile), valuesOf(old.profile)) {
			t.Errorf("%s: restored profiles %v, want %v", id, valuesOf(restored.profile), valuesOf(old.profile))
		}
		if again := snapshot(t, fresh); !sameState(again, st) {
			t.Errorf("%s: snapshot after restore differs from the snapshot restored", id)
		}
		insts[id] = fresh
	}
	if !maps.Equal(gotSum, wantSum) {
		t.Errorf("sums over all tasks %v, want %v", gotSum, wantSum)
	}

	// Processing goes on from the restored state.
	routeEvents(t, p, insts, []event{{User: "user-3", N: 1000}})
	owner := taskOf(t, p, "user-3")
	insts[owner].Flush()
	want := event{User: "user-3", N: wantSum["user-3"] + 1000}
	if got := records[event](t, senders[owner]); !slices.Equal(got, []event{want}) {
		t.Errorf("%s emitted %v after restore and one more event, want %v", owner, got, want)
	}
}

func taskOf(t *testing.T, p *Plan, user string) string {
	t.Helper()
	kg := int(HashString(user) % uint64(p.MaxParallelism))
	return fmt.Sprintf("agg#%d", TaskForKeyGroup(p.MaxParallelism, mustTask(t, p, "agg#0").Parallelism, kg))
}

// sameState compares two keyed snapshots regardless of the order of entries,
// which follows map iteration.
func sameState(a, b *messages.TaskState) bool {
	flat := func(st *messages.TaskState) []string {
		var out []string
		for _, g := range st.KeyGroups {
			for _, ns := range g.States {
				for _, e := range ns.Entries {
					out = append(out, fmt.Sprintf("%d/%s/%x/%x/%x", g.KeyGroup, ns.Name, e.Key, e.MapKey, e.Value))
				}
			}
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(flat(a), flat(b))
}

// TestKeyedStateRescale restores the snapshot of one task into two: each
// keeps exactly the keys of its key groups.
func TestKeyedStateRescale(t *testing.T) {
	reg1 := map[string]*aggStates{}
	p1 := mustPlan(t, aggGraph(1, reg1))
	inst := mustInstance(t, p1, "agg#0", 8, noopSender{})
	routeEvents(t, p1, map[string]Instance{"agg#0": inst}, userEvents(100))
	st := snapshot(t, inst)
	all := valuesOf(reg1["agg#0"].sum)

	reg2 := map[string]*aggStates{}
	p2 := mustPlan(t, aggGraph(2, reg2))
	union := map[string]int64{}
	for _, id := range []string{"agg#0", "agg#1"} {
		if err := mustInstance(t, p2, id, 8, noopSender{}).Restore(st); err != nil {
			t.Fatalf("%s: Restore: %v", id, err)
		}
		for k, v := range valuesOf(reg2[id].sum) {
			if owner := taskOf(t, p2, k); owner != id {
				t.Errorf("%s restored key %q, owned by %s", id, k, owner)
			}
			union[k] = v
		}
	}
	if !maps.Equal(union, all) {
		t.Errorf("rescaled state %v, want %v", union, all)
	}
}

// countGraph keys numbers by an int key (negative ones too) and counts them.
func countGraph(parallelism int, reg map[string]*ValueState[int, int64], seen map[string]*MapState[int, int64, bool]) *Graph {
	g := New("count")
	key := func(v int64) int { return int(v % 7) }
	out := Process(KeyBy(Sequence(g, "src", -50, 50), key), "count", func(s *KeyedSetup[int]) ProcessFunc[int, int64, int64] {
		n := Value[int64](s, "n")
		sn := MapOf[int64, bool](s, "seen")
		reg[s.TaskID()], seen[s.TaskID()] = n, sn
		return func(_ *Context[int], v int64, _ *Collector[int64]) error {
			c, _ := n.Get()
			n.Set(c + 1)
			sn.Put(v, v > 0)
			return nil
		}
	}, Parallelism(parallelism))
	Sink(out, "sink", discard[int64])
	return g
}

func TestKeyedStateIntKeys(t *testing.T) {
	reg := map[string]*ValueState[int, int64]{}
	seen := map[string]*MapState[int, int64, bool]{}
	p := mustPlan(t, countGraph(3, reg, seen))
	insts := map[string]Instance{}
	byTask := map[string][]int64{}
	for v := int64(-50); v <= 50; v++ {
		kg := int(HashUint64(uint64(v%7)) % uint64(p.MaxParallelism))
		id := fmt.Sprintf("count#%d", TaskForKeyGroup(p.MaxParallelism, 3, kg))
		byTask[id] = append(byTask[id], v)
	}
	want := map[int]int64{}
	for v := int64(-50); v <= 50; v++ {
		want[int(v%7)]++
	}
	got := map[int]int64{}
	for i := range 3 {
		id := fmt.Sprintf("count#%d", i)
		insts[id] = mustInstance(t, p, id, 4, noopSender{})
		if err := insts[id].ProcessBatch(0, byTask[id], nil); err != nil {
			t.Fatal(err)
		}
		st := snapshot(t, insts[id])
		counts, err := DecodeValueState[int, int64](st, "n")
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(got, counts)
		oldSeen := mapsOf(seen[id])
		if err := mustInstance(t, p, id, 4, noopSender{}).Restore(st); err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(valuesOf(reg[id]), counts) {
			t.Errorf("%s: restored %v, want %v", id, valuesOf(reg[id]), counts)
		}
		if !reflect.DeepEqual(mapsOf(seen[id]), oldSeen) {
			t.Errorf("%s: restored map state %v, want %v", id, mapsOf(seen[id]), oldSeen)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	if got[-6] == 0 || got[6] == 0 {
		t.Errorf("negative and positive keys not both present: %v", got)
	}
}

// oneStateGraph is a keyed operator whose setup is given.
func oneStateGraph(setup func(*KeyedSetup[string]) ProcessFunc[string, string, string]) *Graph {
	g := New("job")
	k := KeyBy(FromSlice(g, "src", []string{"a"}), func(s string) string { return s })
	Sink(Process(k, "p", setup, Parallelism(2)), "sink", discard[string])
	return g
}

func echo(*Context[string], string, *Collector[string]) error { return nil }

func TestKeyedStateRestoreUndeclared(t *testing.T) {
	p := mustPlan(t, oneStateGraph(func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		Value[int64](s, "known")
		return echo
	}))
	task := mustTask(t, p, "p#1")
	st := &messages.TaskState{KeyGroups: []*messages.KeyGroupState{{
		KeyGroup: uint32(task.KeyGroupStart),
		States:   []*messages.NamedState{{Name: "ghost", Entries: []*messages.StateEntry{{Key: []byte("a"), Value: []byte{1}}}}},
	}}}
	err := mustInstance(t, p, "p#1", 1, noopSender{}).Restore(st)
	if err == nil || !strings.Contains(err.Error(), `state "ghost"`) || !strings.Contains(err.Error(), "does not declare") {
		t.Errorf("Restore of an undeclared state: %v", err)
	}
	// A key group that another task owns is skipped, whatever it holds.
	other := mustTask(t, p, "p#0")
	st.KeyGroups[0].KeyGroup = uint32(other.KeyGroupStart)
	if err := mustInstance(t, p, "p#1", 1, noopSender{}).Restore(st); err != nil {
		t.Errorf("Restore of another task's key group: %v", err)
	}
}

func TestKeyedStateRestoreCorrupt(t *testing.T) {
	p := mustPlan(t, oneStateGraph(func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		Value[int64](s, "v")
		MapOf[int32, int64](s, "m")
		return echo
	}))
	task := mustTask(t, p, "p#0")
	for _, tt := range []struct {
		state string
		entry *messages.StateEntry
	}{
		{"v", &messages.StateEntry{Key: []byte("a"), Value: []byte{1, 2, 3}}},
		{"m", &messages.StateEntry{Key: []byte("a"), MapKey: []byte{1}, Value: make([]byte, 8)}},
		{"m", &messages.StateEntry{Key: []byte("a"), MapKey: make([]byte, 4), Value: []byte{1}}},
	} {
		st := &messages.TaskState{KeyGroups: []*messages.KeyGroupState{{
			KeyGroup: uint32(task.KeyGroupStart),
			States:   []*messages.NamedState{{Name: tt.state, Entries: []*messages.StateEntry{tt.entry}}},
		}}}
		err := mustInstance(t, p, "p#0", 1, noopSender{}).Restore(st)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("state %q", tt.state)) {
			t.Errorf("Restore of %v into %q: %v, want an error naming the state", tt.entry, tt.state, err)
		}
	}
}

func TestKeyedStateDeclarationErrors(t *testing.T) {
	for _, tt := range []struct {
		name  string
		setup func(*KeyedSetup[string]) ProcessFunc[string, string, string]
		want  string
	}{
		{"twice", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			Value[int64](s, "x")
			MapOf[string, int64](s, "x")
			return echo
		}, `topology: task p#0: state "x" declared twice`},
		{"empty name", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			Value[int64](s, "")
			return echo
		}, `topology: task p#0: state with an empty name`},
		{"nil process function", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			return nil
		}, `topology: task p#0: setup returned a nil process function`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, oneStateGraph(tt.setup))
			_, err := p.NewInstance(0+mustTask(t, p, "p#0").Index, InstanceContext{Sender: noopSender{}})
			if err == nil || err.Error() != tt.want {
				t.Errorf("NewInstance: %v, want %s", err, tt.want)
			}
		})
	}
}

func TestKeyedSetupAndContext(t *testing.T) {
	var setupIDs []string
	var seen []string
	p := mustPlan(t, oneStateGraph(func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		setupIDs = append(setupIDs, fmt.Sprintf("%s/%d", s.TaskID(), s.Subtask()))
		return func(ctx *Context[string], in string, out *Collector[string]) error {
			seen = append(seen, ctx.TaskID()+":"+ctx.Key())
			out.Emit(in + "!")
			return nil
		}
	}))
	f := &fakeSender{}
	inst := mustInstance(t, p, "p#1", 10, f)
	if err := inst.ProcessBatch(0, []string{"x", "y"}, nil); err != nil {
		t.Fatal(err)
	}
	inst.Flush()
	if err := errors.Join(inst.EndOfInput(), inst.Close()); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(setupIDs) != "[p#1/1]" || fmt.Sprint(seen) != "[p#1:x p#1:y]" {
		t.Errorf("setup saw %v, process saw %v", setupIDs, seen)
	}
	if got := records[string](t, f); !slices.Equal(got, []string{"x!", "y!"}) {
		t.Errorf("emitted %v", got)
	}
}

func TestProcessError(t *testing.T) {
	boom := errors.New("boom")
	p := mustPlan(t, oneStateGraph(func(*KeyedSetup[string]) ProcessFunc[string, string, string] {
		return func(*Context[string], string, *Collector[string]) error { return boom }
	}))
	if err := mustInstance(t, p, "p#0", 1, noopSender{}).ProcessBatch(0, []string{"a"}, nil); !errors.Is(err, boom) {
		t.Errorf("ProcessBatch = %v, want %v", err, boom)
	}
}

func TestValueAndMapStateOperations(t *testing.T) {
	s := &KeyedSetup[string]{task: &TaskPlan{ID: "t#0", KeyGroupEnd: 4}, cur: new(current[string]), dirty: make(groupSet, 1), codec: newKeyCodec[string](), maxP: 4}
	v := Value[int64](s, "v")
	m := MapOf[string, int64](s, "m")
	s.cur.key = "a"
	if _, ok := v.Get(); ok {
		t.Error("Get of an unset value reports ok")
	}
	v.Set(1)
	m.Put("x", 1)
	m.Put("y", 2)
	s.cur.key = "b"
	v.Set(2)
	m.Put("z", 3)
	if v.Len() != 2 || m.Len() != 1 {
		t.Errorf("Len = %d, %d, want 2, 1", v.Len(), m.Len())
	}
	s.cur.key = "a"
	if x, ok := v.Get(); !ok || x != 1 {
		t.Errorf("Get = %d, %t, want 1, true", x, ok)
	}
	got := map[string]int64{}
	for k, x := range m.All {
		got[k] = x
	}
	if !maps.Equal(got, map[string]int64{"x": 1, "y": 2}) {
		t.Errorf("All = %v", got)
	}
	for range m.All {
		break // stopping early must not panic
	}
	m.Delete("x")
	m.Delete("y")
	if _, ok := mapsOf(m)["a"]; ok || m.Len() != 0 {
		t.Error("deleting a key's last map entry leaves the key")
	}
	v.Clear()
	if _, ok := v.Get(); ok || v.Len() != 1 {
		t.Errorf("after Clear, Get reports a value or Len = %d, want 1", v.Len())
	}
	if x, ok := m.Get("nope"); ok || x != 0 {
		t.Error("Get of a missing map key")
	}
}

func TestDecodeValueStateErrors(t *testing.T) {
	st := &messages.TaskState{KeyGroups: []*messages.KeyGroupState{{
		States: []*messages.NamedState{{Name: "v", Entries: []*messages.StateEntry{{Key: []byte{1, 2}, Value: make([]byte, 8)}}}},
	}}}
	if _, err := DecodeValueState[int64, int64](st, "v"); err == nil {
		t.Error("a 2-byte integer key decoded")
	}
	st.KeyGroups[0].States[0].Entries[0].Key = make([]byte, 8)
	if _, err := DecodeValueState[int64, int32](st, "v"); err == nil {
		t.Error("an 8-byte value decoded as int32")
	}
	if m, err := DecodeValueState[int64, int64](st, "other"); err != nil || len(m) != 0 {
		t.Errorf("DecodeValueState of an absent state = %v, %v", m, err)
	}
	if m, err := DecodeValueState[int64, int64](nil, "v"); err != nil || len(m) != 0 {
		t.Errorf("DecodeValueState(nil) = %v, %v", m, err)
	}
}
