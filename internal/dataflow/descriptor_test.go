package dataflow

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/snapflow/snapflow/messages"
)

// declGraph is job "job" with one keyed operator "p" of the given setup and
// parallelism, keyed by the string records themselves.
func declGraph(parallelism int, setup func(*KeyedSetup[string]) ProcessFunc[string, string, string]) *Graph {
	g := New("job")
	k := KeyBy(FromSlice(g, "src", []string{"a"}), func(s string) string { return s })
	Sink(Process(k, "p", setup, Parallelism(parallelism)), "sink", discard[string])
	return g
}

// setEach is a setup that declares one state with decl and sets it, for
// every record, with set.
func setEach[S any](decl func(*KeyedSetup[string]) S, set func(S)) func(*KeyedSetup[string]) ProcessFunc[string, string, string] {
	return func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		st := decl(s)
		return func(*Context[string], string, *Collector[string]) error {
			set(st)
			return nil
		}
	}
}

// snapshotOf runs records through a fresh instance of p#0 and returns its
// snapshot after the wire format.
func snapshotOf(t *testing.T, g *Graph, records ...string) *messages.TaskState {
	t.Helper()
	inst := mustInstance(t, mustPlan(t, g), "p#0", 4, noopSender{})
	if err := inst.ProcessBatch(0, records, nil); err != nil {
		t.Fatal(err)
	}
	return snapshot(t, inst)
}

func restoreInto(t *testing.T, g *Graph, st *messages.TaskState) error {
	t.Helper()
	return mustInstance(t, mustPlan(t, g), "p#0", 4, noopSender{}).Restore(st)
}

func TestSnapshotWritesStateDescriptors(t *testing.T) {
	st := snapshotOf(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		Value[int64](s, "n")
		MapOf[int32, CdInner](s, "m")
		Value[cdCounter](s, "c", cdCounterCodec{})
		MapOf(s, "custom", MapCodecs[string, []byte](cdPlainCodec{}, nil))
		return echo
	}))
	want := []*messages.StateDescriptor{
		{Name: "n", Kind: "value", KeyType: "string", ValueType: "int64", ValueCodec: "snapflow.fixed8"},
		{Name: "m", Kind: "map", KeyType: "string", MapKeyType: "int32", MapKeyCodec: "snapflow.fixed4",
			ValueType: "github.com/snapflow/snapflow/internal/dataflow.CdInner", ValueCodec: "snapflow.json"},
		{Name: "c", Kind: "value", KeyType: "string", ValueType: "github.com/snapflow/snapflow/internal/dataflow.cdCounter", ValueCodec: "test.counter/v1"},
		{Name: "custom", Kind: "map", KeyType: "string", MapKeyType: "string",
			MapKeyCodec: "github.com/snapflow/snapflow/internal/dataflow.cdPlainCodec", ValueType: "[]uint8", ValueCodec: "snapflow.json"},
	}
	if len(st.StateDescriptors) != len(want) {
		t.Fatalf("%d descriptors, want %d: %v", len(st.StateDescriptors), len(want), st.StateDescriptors)
	}
	for i, d := range st.StateDescriptors {
		if !proto.Equal(d, want[i]) {
			t.Errorf("descriptor %d = %v, want %v", i, d, want[i])
		}
	}
	if len(st.KeyGroups) != 0 {
		t.Errorf("no record processed, yet the snapshot holds key groups %v", st.KeyGroups)
	}
}

// cdCounterCodec stores a cdCounter, unexported field included, in 16 bytes.
type cdCounterCodec struct{}

func (cdCounterCodec) CodecID() string { return "test.counter/v1" }
func (cdCounterCodec) Append(dst []byte, c cdCounter) ([]byte, error) {
	return fmt.Appendf(dst, "%016x%016x", uint64(c.count), uint64(c.Last)), nil
}
func (cdCounterCodec) Decode(b []byte) (cdCounter, error) {
	var c cdCounter
	_, err := fmt.Sscanf(string(b), "%016x%016x", &c.count, &c.Last)
	return c, err
}

// cdPlainCodec stores strings as they are; it has no CodecID.
type cdPlainCodec struct{}

func (cdPlainCodec) Append(dst []byte, s string) ([]byte, error) { return append(dst, s...), nil }
func (cdPlainCodec) Decode(b []byte) (string, error)             { return string(b), nil }

// TestRestoreRefusesChangedValueType reproduces a job that checkpointed a
// Value[int64] and was redeployed with Value[float64]: 2500 was read back as
// 1.2e-320. The restore must be refused.
func TestRestoreRefusesChangedValueType(t *testing.T) {
	st := snapshotOf(t, declGraph(1, setEach(
		func(s *KeyedSetup[string]) *ValueState[string, int64] { return Value[int64](s, "total") },
		func(v *ValueState[string, int64]) { v.Set(2500) })), "a")
	var restored *ValueState[string, float64]
	err := restoreInto(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		restored = Value[float64](s, "total")
		return echo
	}), st)
	if !errors.Is(err, ErrIncompatibleState) {
		t.Fatalf("Restore of int64 state into Value[float64] = %v, want ErrIncompatibleState", err)
	}
	want := `topology: operator "p": the checkpoint's keyed state does not match the declared state: ` +
		`state "total": value type changed from int64 to float64`
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("error %q, want it to start with %q", err, want)
	}
	if restored.Len() != 0 {
		t.Errorf("a refused restore loaded %v", valuesOf(restored))
	}
}

func TestRestoreRefusesChangedDeclarations(t *testing.T) {
	old := snapshotOf(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		v := Value[int64](s, "v")
		m := MapOf[string, int64](s, "m")
		Value[string](s, "gone")
		Value[cdCounter](s, "c", cdCounterCodec{})
		return func(*Context[string], string, *Collector[string]) error {
			v.Set(1)
			m.Put("x", 2)
			return nil
		}
	}), "a")
	for _, tt := range []struct {
		name  string
		setup func(*KeyedSetup[string]) ProcessFunc[string, string, string]
		want  []string
	}{
		{"value becomes map", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			MapOf[string, int64](s, "v")
			MapOf[string, int64](s, "m")
			Value[string](s, "gone")
			Value[cdCounter](s, "c", cdCounterCodec{})
			return echo
		}, []string{`state "v": kind changed from value to map, map key type changed from none to string, map key codec changed from none to snapflow.string`}},
		{"map key and codec", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			Value[int64](s, "v")
			MapOf(s, "m", MapCodecs[int32](nil, cdInt64Codec{}))
			Value[string](s, "gone")
			Value[cdCounter](s, "c", cdCounterCodec{})
			return echo
		}, []string{`state "m": map key type changed from string to int32, map key codec changed from snapflow.string to snapflow.fixed4, value codec changed from snapflow.fixed8 to github.com/snapflow/snapflow/internal/dataflow.cdInt64Codec`}},
		{"state removed and codec changed", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			Value[int64](s, "v")
			MapOf[string, int64](s, "m")
			Value[cdCounter](s, "c", JSONCodec[cdCounter]{})
			return echo
		}, []string{
			`state "gone" (value string (snapflow.string)) is in the checkpoint but no longer declared, and its entries would be lost`,
			`state "c": value codec changed from test.counter/v1 to snapflow.json`,
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := restoreInto(t, declGraph(1, tt.setup), old)
			if !errors.Is(err, ErrIncompatibleState) {
				t.Fatalf("Restore = %v, want ErrIncompatibleState", err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nwant it to contain %q", err, w)
				}
			}
		})
	}
}

// cdInt64Codec stores int64 in decimal.
type cdInt64Codec struct{}

func (cdInt64Codec) Append(dst []byte, v int64) ([]byte, error) { return fmt.Append(dst, v), nil }
func (cdInt64Codec) Decode(b []byte) (int64, error) {
	var v int64
	_, err := fmt.Sscan(string(b), &v)
	return v, err
}

// TestRestoreRefusesUndeclaredEntries covers a snapshot with entries of a
// state the operator no longer declares, whether or not it has descriptors.
func TestRestoreRefusesUndeclaredEntries(t *testing.T) {
	st := snapshotOf(t, declGraph(1, setEach(
		func(s *KeyedSetup[string]) *ValueState[string, int64] { return Value[int64](s, "old") },
		func(v *ValueState[string, int64]) { v.Set(1) })), "a")
	renamed := declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		Value[int64](s, "new")
		return echo
	})
	if err := restoreInto(t, renamed, st); !errors.Is(err, ErrIncompatibleState) || !strings.Contains(err.Error(), `state "old"`) {
		t.Errorf("Restore with descriptors = %v, want ErrIncompatibleState naming state \"old\"", err)
	}
	st.StateDescriptors = nil // as written before descriptors existed
	err := restoreInto(t, renamed, st)
	if !errors.Is(err, ErrIncompatibleState) || !strings.Contains(err.Error(), `the checkpoint holds state "old", which the operator does not declare`) {
		t.Errorf("Restore without descriptors = %v, want ErrIncompatibleState naming state \"old\"", err)
	}
}

func TestRestoreAcceptsNewStateAndOldSnapshots(t *testing.T) {
	st := snapshotOf(t, declGraph(1, setEach(
		func(s *KeyedSetup[string]) *ValueState[string, int64] { return Value[int64](s, "n") },
		func(v *ValueState[string, int64]) { v.Set(7) })), "a", "b")
	var n *ValueState[string, int64]
	var added *MapState[string, string, bool]
	grown := declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		added = MapOf[string, bool](s, "added")
		n = Value[int64](s, "n")
		return echo
	})
	if err := restoreInto(t, grown, st); err != nil {
		t.Fatalf("Restore with a newly declared state: %v", err)
	}
	if !maps.Equal(valuesOf(n), map[string]int64{"a": 7, "b": 7}) || len(mapsOf(added)) != 0 {
		t.Errorf("restored n = %v, added = %v", valuesOf(n), mapsOf(added))
	}
	st.StateDescriptors = nil // as written before descriptors existed
	if err := restoreInto(t, grown, st); err != nil {
		t.Fatalf("Restore of a snapshot without descriptors: %v", err)
	}
	if !maps.Equal(valuesOf(n), map[string]int64{"a": 7, "b": 7}) {
		t.Errorf("restored n = %v", valuesOf(n))
	}
}

func TestCompareStateDescriptors(t *testing.T) {
	v := func(name, typ, codec string) *messages.StateDescriptor {
		return &messages.StateDescriptor{Name: name, Kind: "value", KeyType: "string", ValueType: typ, ValueCodec: codec}
	}
	stored := []*messages.StateDescriptor{v("a", "int64", "snapflow.fixed8"), v("b", "string", "snapflow.string"), v("c", "int64", "snapflow.fixed8")}
	if err := CompareStateDescriptors("op", stored, stored); err != nil {
		t.Errorf("identical descriptors: %v", err)
	}
	if err := CompareStateDescriptors("op", nil, stored); err != nil {
		t.Errorf("no stored descriptors: %v", err)
	}
	declared := []*messages.StateDescriptor{v("new", "int64", "x"), v("c", "int64", "snapflow.fixed8"), v("a", "float64", "snapflow.fixed8")}
	err := CompareStateDescriptors("op", stored, declared)
	want := `topology: operator "op": the checkpoint's keyed state does not match the declared state: ` +
		`state "a": value type changed from int64 to float64; ` +
		`state "b" (value string (snapflow.string)) is in the checkpoint but no longer declared, and its entries would be lost; ` +
		`restore with the old declaration, or give a changed state a new name (it then starts empty)`
	if !errors.Is(err, ErrIncompatibleState) || err.Error() != want {
		t.Errorf("CompareStateDescriptors = %v\nwant %s", err, want)
	}
	stored[2].KeyType = "int"
	if err := CompareStateDescriptors("op", stored[2:], declared); err == nil || !strings.Contains(err.Error(), `state "c": key type changed from int to string`) {
		t.Errorf("changed key type: %v", err)
	}
}

func TestDeclaredStates(t *testing.T) {
	g := New("job")
	k := KeyBy(FromSlice(g, "src", []int64{1}), func(v int64) int64 { return v })
	var subtasks []int
	a := Process(k, "a", func(s *KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
		subtasks = append(subtasks, s.Subtask())
		Value[string](s, "s")
		MapOf[uint, float32](s, "m")
		return func(*Context[int64], int64, *Collector[int64]) error { return nil }
	}, Parallelism(3))
	b := Process(KeyBy(a, func(v int64) int64 { return v }), "b", func(s *KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
		return func(*Context[int64], int64, *Collector[int64]) error { return nil }
	})
	Sink(Map(b, "stateless", func(v int64) int64 { return v }), "sink", discard[int64])
	got, err := mustPlan(t, g).DeclaredStates()
	if err != nil {
		t.Fatal(err)
	}
	if !slicesEqual(subtasks, []int{0}) {
		t.Errorf("setup ran for subtasks %v, want [0]", subtasks)
	}
	want := map[string][]*messages.StateDescriptor{
		"a": {
			{Name: "s", Kind: "value", KeyType: "int64", ValueType: "string", ValueCodec: "snapflow.string"},
			{Name: "m", Kind: "map", KeyType: "int64", MapKeyType: "uint", MapKeyCodec: "snapflow.fixed8", ValueType: "float32", ValueCodec: "snapflow.fixed4"},
		},
		"b": {},
	}
	if len(got) != len(want) {
		t.Fatalf("DeclaredStates = %v, want %v", got, want)
	}
	for op, ds := range want {
		if len(got[op]) != len(ds) {
			t.Errorf("%s: %v, want %v", op, got[op], ds)
			continue
		}
		for i := range ds {
			if !proto.Equal(got[op][i], ds[i]) {
				t.Errorf("%s: descriptor %d = %v, want %v", op, i, got[op][i], ds[i])
			}
		}
	}
}

func slicesEqual[T comparable](a, b []T) bool { return reflect.DeepEqual(a, b) }

func TestDeclaredStatesErrors(t *testing.T) {
	boom := errors.New("boom")
	g := New("job")
	k := KeyBy(FromSlice(g, "src", []string{"a"}), func(s string) string { return s })
	for _, op := range []struct {
		name  string
		setup func(*KeyedSetup[string]) ProcessFunc[string, string, string]
	}{
		{"ok", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] { Value[int](s, "n"); return echo }},
		{"count", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] { Value[cdCounter](s, "n"); return echo }},
		{"iface", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			MapOf[string, cdWithAny](s, "m")
			MapOf[any, int](s, "f")
			return echo
		}},
		{"twice", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
			Value[int](s, "x")
			Value[int](s, "x")
			return echo
		}},
		{"nil", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] { return nil }},
		{"panics", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] { panic(boom) }},
	} {
		Sink(Process(k, op.name, op.setup), op.name+"-sink", discard[string])
	}
	got, err := mustPlan(t, g).DeclaredStates()
	if got != nil || !errors.Is(err, ErrInvalidState) || !errors.Is(err, boom) {
		t.Fatalf("DeclaredStates = %v, %v; want an error wrapping ErrInvalidState and the panic", got, err)
	}
	want := []string{
		`topology: operator "count": state "n": type github.com/snapflow/snapflow/internal/dataflow.cdCounter: field count is unexported, and JSON skips it; export it or pass a codec to Value`,
		`topology: operator "iface": state "m": value type github.com/snapflow/snapflow/internal/dataflow.cdWithAny: field V has interface type interface {}, ` +
			`whose dynamic type JSON cannot restore (numbers come back as float64, objects as maps); use a concrete type or pass a value codec to MapOf (MapCodecs); ` +
			`state "f": map key type interface {}: the value has interface type interface {}`,
		`topology: operator "twice": state "x" declared twice`,
		`topology: operator "nil": setup returned a nil process function`,
		`topology: operator "panics": setup panicked: boom`,
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("error has %d lines, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("line %d: %s\nwant it to start with %s", i, lines[i], w)
		}
	}
}

// TestDeclarationRefusedAtInstance: the tasks of an operator whose state the
// default codec cannot store fail to start, and an explicit codec is taken.
func TestDeclarationRefusedAtInstance(t *testing.T) {
	p := mustPlan(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		Value[cdCounter](s, "n")
		return echo
	}))
	_, err := p.NewInstance(mustTask(t, p, "p#0").Index, InstanceContext{Sender: noopSender{}})
	want := `topology: task p#0: state "n": type github.com/snapflow/snapflow/internal/dataflow.cdCounter: field count is unexported, and JSON skips it; export it or pass a codec to Value`
	if !errors.Is(err, ErrInvalidState) || err == nil || err.Error() != want {
		t.Errorf("NewInstance = %v\nwant %s", err, want)
	}
	for _, decl := range []func(*KeyedSetup[string]){
		func(s *KeyedSetup[string]) { Value(s, "n", Codec[cdCounter](cdCounterCodec{})) },
		func(s *KeyedSetup[string]) { Value[cdWithAny](s, "n", JSONCodec[cdWithAny]{}) },
		func(s *KeyedSetup[string]) {
			MapOf(s, "n", MapCodecs(DefaultCodec[float64](), cdCounterCodec{}))
		},
		func(s *KeyedSetup[string]) { MapOf(s, "n", MapCodecs[cdCounter, int](JSONCodec[cdCounter]{}, nil)) },
	} {
		p := mustPlan(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] { decl(s); return echo }))
		if _, err := p.DeclaredStates(); err != nil {
			t.Errorf("explicit codec refused: %v", err)
		}
	}
	p = mustPlan(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		MapOf(s, "n", MapCodecs[cdCounter](nil, cdIntCodec{}), MapCodecs[cdCounter, int](nil, nil))
		return echo
	}))
	if _, err := p.DeclaredStates(); !errors.Is(err, ErrInvalidState) ||
		!strings.Contains(err.Error(), `state "n": map key type github.com/snapflow/snapflow/internal/dataflow.cdCounter: field count is unexported, and JSON skips it; export it or pass a key codec to MapOf (MapCodecs)`) ||
		!strings.Contains(err.Error(), "2 MapOptions given to MapOf, want at most one") {
		t.Errorf("DeclaredStates = %v", err)
	}
}

type cdIntCodec struct{}

func (cdIntCodec) Append(dst []byte, v int) ([]byte, error) { return fmt.Append(dst, v), nil }
func (cdIntCodec) Decode(b []byte) (int, error) {
	var v int
	_, err := fmt.Sscan(string(b), &v)
	return v, err
}

// TestMapOfCodecsSnapshotRestore round-trips a map state with explicit
// codecs for its user keys and values, a type the default codec refuses.
func TestMapOfCodecsSnapshotRestore(t *testing.T) {
	var states []*MapState[string, string, cdCounter]
	g := declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		m := MapOf(s, "m", MapCodecs(cdPlainCodec{}, cdCounterCodec{}))
		states = append(states, m)
		return func(ctx *Context[string], in string, _ *Collector[string]) error {
			c, _ := m.Get(in + "!")
			c.count++
			c.Last = int64(len(in))
			m.Put(in+"!", c)
			return nil
		}
	})
	st := snapshotOf(t, g, "a", "bb", "a")
	want := map[string]map[string]cdCounter{"a": {"a!": {2, 1}}, "bb": {"bb!": {1, 2}}}
	if err := restoreInto(t, g, st); err != nil {
		t.Fatal(err)
	}
	if got := mapsOf(states[len(states)-1]); !reflect.DeepEqual(got, want) {
		t.Errorf("restored %v, want %v", got, want)
	}
	decoded, err := DecodeMapState[string](st, "m", MapCodecs(cdPlainCodec{}, cdCounterCodec{}))
	if err != nil || !reflect.DeepEqual(map[string]map[string]cdCounter(decoded), want) {
		t.Errorf("DecodeMapState = %v, %v, want %v", decoded, err, want)
	}
	// The codecs are the caller's: another codec of the same encoding reads
	// the state.
	decoded, err = DecodeMapState[string](st, "m", MapCodecs[string](nil, cdCounterCodec{}))
	if err != nil || !reflect.DeepEqual(map[string]map[string]cdCounter(decoded), want) {
		t.Errorf("DecodeMapState with the default key codec = %v, %v, want %v", decoded, err, want)
	}
}

func TestDecodeStateRefusesOtherDeclarations(t *testing.T) {
	st := snapshotOf(t, declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		v := Value[int64](s, "v")
		m := MapOf[int32, string](s, "m")
		return func(ctx *Context[string], in string, _ *Collector[string]) error {
			v.Set(2500)
			m.Put(int32(len(in)), in)
			return nil
		}
	}), "a", "bc")
	if got, err := DecodeValueState[string, int64](st, "v"); err != nil || !maps.Equal(got, map[string]int64{"a": 2500, "bc": 2500}) {
		t.Errorf("DecodeValueState = %v, %v", got, err)
	}
	got, err := DecodeMapState[string, int32, string](st, "m")
	if err != nil || !reflect.DeepEqual(got, map[string]map[int32]string{"a": {1: "a"}, "bc": {2: "bc"}}) {
		t.Errorf("DecodeMapState = %v, %v", got, err)
	}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{second(DecodeValueState[string, float64](st, "v")), `state "v" cannot be decoded as asked: its value type is int64, not float64`},
		{second(DecodeValueState[int64, int64](st, "v")), `its key type is string, not int64`},
		{second(DecodeValueState[string, string](st, "m")), `its kind is map, not value, map key type is int32, not none`},
		{second(DecodeMapState[string, int32, int64](st, "v")), `its kind is value, not map`},
		{second(DecodeMapState[string, int64, string](st, "m")), `its map key type is int32, not int64`},
	} {
		if !errors.Is(tt.err, ErrIncompatibleState) || !strings.Contains(tt.err.Error(), tt.want) {
			t.Errorf("decode error %v, want ErrIncompatibleState containing %q", tt.err, tt.want)
		}
	}
	// Without descriptors, a snapshot decodes as asked, as before.
	st.StateDescriptors = nil
	if got, err := DecodeMapState[string, int32, string](st, "m"); err != nil || len(got) != 2 {
		t.Errorf("DecodeMapState without descriptors = %v, %v", got, err)
	}
	if got, err := DecodeMapState[string, int32, string](st, "absent"); err != nil || len(got) != 0 {
		t.Errorf("DecodeMapState of an absent state = %v, %v", got, err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestDecodeMapStateErrors(t *testing.T) {
	st := &messages.TaskState{TaskId: "p#0", KeyGroups: []*messages.KeyGroupState{{
		States: []*messages.NamedState{{Name: "m", Entries: []*messages.StateEntry{{Key: []byte{1}, MapKey: make([]byte, 4), Value: make([]byte, 8)}}}},
	}}}
	if _, err := DecodeMapState[int64, int32, int64](st, "m"); err == nil || !strings.Contains(err.Error(), `topology: task p#0: state "m": topology: integer key of 1 bytes`) {
		t.Errorf("a 1-byte integer key decoded: %v", err)
	}
	st.KeyGroups[0].States[0].Entries[0].Key = make([]byte, 8)
	if _, err := DecodeMapState[int64, int64, int64](st, "m"); err == nil {
		t.Error("a 4-byte map key decoded as int64")
	}
	if _, err := DecodeMapState[int64, int32, int32](st, "m"); err == nil {
		t.Error("an 8-byte value decoded as int32")
	}
	if m, err := DecodeMapState[int64, int32, int64](nil, "m"); err != nil || len(m) != 0 {
		t.Errorf("DecodeMapState(nil) = %v, %v", m, err)
	}
}

func TestCodecIDsAndTypeNames(t *testing.T) {
	for _, tt := range []struct{ got, want string }{
		{codecID(DefaultCodec[int]()), "snapflow.fixed8"},
		{codecID(DefaultCodec[uintptr]()), "snapflow.fixed8"},
		{codecID(DefaultCodec[int16]()), "snapflow.fixed2"},
		{codecID(DefaultCodec[bool]()), "snapflow.fixed1"},
		{codecID(DefaultCodec[name]()), "snapflow.string"},
		{codecID(DefaultCodec[point]()), "snapflow.json"},
		{codecID(Codec[point](&JSONCodec[point]{})), "snapflow.json"},
		{codecID(Codec[cdCounter](cdCounterCodec{})), "test.counter/v1"},
		{codecID(Codec[string](cdPlainCodec{})), "github.com/snapflow/snapflow/internal/dataflow.cdPlainCodec"},
		{codecID(Codec[string](&cdPlainCodec{})), "*github.com/snapflow/snapflow/internal/dataflow.cdPlainCodec"},
		{codecID(Codec[point](embedsJSON{})), "github.com/snapflow/snapflow/internal/dataflow.embedsJSON"},
		{typeName(reflect.TypeFor[int64]()), "int64"},
		{typeName(reflect.TypeFor[any]()), "interface {}"},
		{typeName(reflect.TypeFor[error]()), "error"},
		{typeName(reflect.TypeFor[map[name][]*point]()), "map[github.com/snapflow/snapflow/internal/dataflow.name][]*github.com/snapflow/snapflow/internal/dataflow.point"},
		{typeName(reflect.TypeFor[[2]level]()), "[2]github.com/snapflow/snapflow/internal/dataflow.level"},
		{typeName(reflect.TypeFor[MapOption[name, int]]()), "github.com/snapflow/snapflow/internal/dataflow.MapOption[github.com/snapflow/snapflow/internal/dataflow.name,int]"},
		{typeName(reflect.TypeFor[struct{ A int }]()), "struct { A int }"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %s, want %s", tt.got, tt.want)
		}
	}
}

// embedsJSON changes JSONCodec's encoding: it must not claim its id.
type embedsJSON struct{ JSONCodec[point] }

func (embedsJSON) Append(dst []byte, p point) ([]byte, error) { return append(dst, '!'), nil }
