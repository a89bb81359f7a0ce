package dataflow

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// propStruct gathers the shapes the default codec accepts.
type propStruct struct {
	CdInner
	*CdNamed
	Tagged    CdLabelled `json:"tagged"`
	Times     []time.Time
	When      time.Time
	Counts    map[string]int64
	ByKey     map[cdTextKey]string
	ByInt     map[int32]map[uint8]bool
	Arr       [3]float32
	Ptr       *int64
	List      *cdRecursive
	Dur       time.Duration
	Level     level
	Nm        name
	Small     uint8 `json:",string"`
	F64       float64
	U64       uint64
	I         int
	Bytes     []byte
	MapOfTime map[string]time.Time
}

// TestDefaultCodecPropertyRoundTrip stores random values of accepted types
// in value and map states, snapshots them through the wire format and
// restores them into a fresh instance: every value must come back equal.
func TestDefaultCodecPropertyRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 12))
	propRoundTrip[int](t, r)
	propRoundTrip[int8](t, r)
	propRoundTrip[uint](t, r)
	propRoundTrip[uintptr](t, r)
	propRoundTrip[float32](t, r)
	propRoundTrip[float64](t, r)
	propRoundTrip[bool](t, r)
	propRoundTrip[string](t, r)
	propRoundTrip[name](t, r)
	propRoundTrip[level](t, r)
	propRoundTrip[time.Duration](t, r)
	propRoundTrip[time.Time](t, r)
	propRoundTrip[[]string](t, r)
	propRoundTrip[map[string]int](t, r)
	propRoundTrip[map[int64][]byte](t, r)
	propRoundTrip[*int64](t, r)
	propRoundTrip[[3]int32](t, r)
	propRoundTrip[map[cdTextKey]string](t, r)
	propRoundTrip[point](t, r)
	propRoundTrip[cdRecursive](t, r)
	propRoundTrip[propStruct](t, r)
	propRoundTrip[[]propStruct](t, r)
}

func propRoundTrip[V comparableOrNot](t *testing.T, r *rand.Rand) {
	t.Helper()
	typ := reflect.TypeFor[V]()
	var values []*ValueState[string, V]
	var maps []*MapState[string, int16, V]
	g := declGraph(1, func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		values = append(values, Value[V](s, "v"))
		maps = append(maps, MapOf[int16, V](s, "m"))
		return echo
	})
	p := mustPlan(t, g)
	if _, err := p.DeclaredStates(); err != nil {
		t.Fatalf("%s refused: %v", typ, err)
	}
	inst := mustInstance(t, p, "p#0", 4, noopSender{})
	v, m := values[len(values)-1], maps[len(maps)-1]
	wantV, wantM := map[string]V{}, map[string]map[int16]V{}
	for i := range 40 {
		k := randString(r) + string(rune('a'+i%26))
		v.setup.cur.key = k // as processing a record of key k
		x := randValue(r, typ, 0).Interface().(V)
		v.Set(x)
		wantV[k] = x
		for range r.IntN(3) {
			uk, x := int16(r.Uint32()), randValue(r, typ, 0).Interface().(V)
			m.Put(uk, x)
			if wantM[k] == nil {
				wantM[k] = map[int16]V{}
			}
			wantM[k][uk] = x
		}
	}
	st := snapshot(t, inst)
	if err := mustInstance(t, p, "p#0", 4, noopSender{}).Restore(st); err != nil {
		t.Fatalf("%s: Restore: %v", typ, err)
	}
	if got := valuesOf(values[len(values)-1]); !reflect.DeepEqual(got, wantV) {
		t.Errorf("%s: value state restored as\n%v\nwant\n%v", typ, got, wantV)
	}
	if got := mapsOf(maps[len(maps)-1]); !reflect.DeepEqual(got, wantM) {
		t.Errorf("%s: map state restored as\n%v\nwant\n%v", typ, got, wantM)
	}
}

// comparableOrNot is any type: the name documents that V need not be
// comparable.
type comparableOrNot = any

var (
	timeType = reflect.TypeFor[time.Time]()
	textKey  = reflect.TypeFor[cdTextKey]()
)

// randString returns valid UTF-8 with characters JSON escapes or that look
// like its escapes.
func randString(r *rand.Rand) string {
	parts := []string{"a", "Z", "é", "世", "\ufffd", `\`, `"`, "<", "&", "\x00", "\n", "\\ufffd", "😀"}
	var b strings.Builder
	for range r.IntN(6) {
		b.WriteString(parts[r.IntN(len(parts))])
	}
	return b.String()
}

func finite(r *rand.Rand, bits int) float64 {
	for {
		var f float64
		if bits == 32 {
			f = float64(math.Float32frombits(r.Uint32()))
		} else {
			f = math.Float64frombits(r.Uint64())
		}
		if !math.IsNaN(f) && !math.IsInf(f, 0) {
			return f
		}
	}
}

// randValue returns a random value of t, an accepted type.
func randValue(r *rand.Rand, t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	switch t {
	case timeType:
		v.Set(reflect.ValueOf(time.Unix(r.Int64N(1<<35), r.Int64N(1e9)).UTC()))
		return v
	case textKey:
		v.Set(reflect.ValueOf(cdTextKey{A: r.IntN(4), B: r.IntN(4)}))
		return v
	}
	switch t.Kind() {
	case reflect.Bool:
		v.SetBool(r.IntN(2) == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(r.Uint64()) >> r.IntN(64))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		v.SetUint(r.Uint64() >> r.IntN(64))
	case reflect.Float32:
		v.SetFloat(finite(r, 32))
	case reflect.Float64:
		v.SetFloat(finite(r, 64))
	case reflect.String:
		v.SetString(randString(r))
	case reflect.Pointer:
		if depth < 3 && r.IntN(3) > 0 {
			v.Set(randValue(r, t.Elem(), depth+1).Addr())
		}
	case reflect.Slice:
		if depth < 3 && r.IntN(4) > 0 {
			n := r.IntN(3)
			v.Set(reflect.MakeSlice(t, n, n))
			for i := range n {
				v.Index(i).Set(randValue(r, t.Elem(), depth+1))
			}
		}
	case reflect.Array:
		for i := range t.Len() {
			v.Index(i).Set(randValue(r, t.Elem(), depth+1))
		}
	case reflect.Map:
		if depth < 3 && r.IntN(4) > 0 {
			v.Set(reflect.MakeMap(t))
			for range r.IntN(3) {
				v.SetMapIndex(randValue(r, t.Key(), depth+1), randValue(r, t.Elem(), depth+1))
			}
		}
	case reflect.Struct:
		for i := range t.NumField() {
			v.Field(i).Set(randValue(r, t.Field(i).Type, depth+1))
		}
	default:
		panic("randValue: unexpected kind " + t.Kind().String())
	}
	return v
}
