package dataflow

import (
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// Types the default codec must refuse: plain JSON would store them changed.
type (
	cdCounter   struct{ count, Last int64 }
	cdWithAny   struct{ V any }
	cdWithError struct{ Err error }
	cdWithDash  struct {
		A int
		B int `json:"-"`
	}
	cdHiddenInt              int
	cdWithUnexportedEmbedded struct {
		cdHiddenInt
		A int
	}
	cdWithChan     struct{ C chan int }
	cdWithFunc     struct{ F func() }
	cdWithComplex  struct{ C complex128 }
	cdWithUnsafe   struct{ P unsafe.Pointer }
	cdWithFloatKey struct{ M map[float64]int }
	cdWithPointKey struct{ M map[point]int }
	cdWithPtrPtr   struct{ P **int }
	CdNamed        struct{ Name string }
	CdLabelled     struct{ Name string }
	cdDupEmbedded  struct {
		CdNamed
		CdLabelled
	}
	cdShadowed struct {
		CdNamed
		Name string
	}
	cdOnlyMarshalJSON   struct{ N int }
	cdOnlyUnmarshalJSON struct{ N int }
	cdOnlyMarshalText   struct{ N int }
	cdEmbedsTime        struct {
		time.Time
		N int
	}
	cdOmitMap struct {
		M map[string]int `json:",omitempty"`
	}
	cdTextUnmarshalString string
	cdMarshalTextInt      int
	cdSelfLoose           struct {
		Next *cdSelfLoose
		v    int
	}
	cdInnerStruct    struct{ X int }
	cdEmbedsInnerPtr struct{ *cdInnerStruct }
	cdNested         struct {
		Items []cdCounter
	}
	cdInMap  struct{ ByName map[string]cdCounter }
	cdPtrKey struct{ M map[*int]bool }
)

func (cdOnlyMarshalJSON) MarshalJSON() ([]byte, error)      { return []byte(`1`), nil }
func (*cdOnlyUnmarshalJSON) UnmarshalJSON([]byte) error     { return nil }
func (cdOnlyMarshalText) MarshalText() ([]byte, error)      { return []byte(`1`), nil }
func (*cdTextUnmarshalString) UnmarshalText(b []byte) error { return nil }
func (cdMarshalTextInt) MarshalText() ([]byte, error)       { return []byte(`x`), nil }

// Types the default codec must accept.
type (
	cdTextKey struct{ A, B int }
	CdInner   struct {
		X int
		Y string `json:"y"`
	}
	cdRecursive struct {
		Next *cdRecursive
		V    int
	}
	cdAccepted struct {
		CdInner
		*CdNamed
		Tagged    CdLabelled `json:"tagged"`
		Times     []time.Time
		When      time.Time
		Big       *big.Int
		BigValue  big.Int
		Raw       json.RawMessage
		Bytes     []byte
		Tags      []string `json:"tags,omitempty"`
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
		Interval  [2]time.Time
		MapOfTime map[string]time.Time
	}
)

func (k cdTextKey) MarshalText() ([]byte, error) {
	return []byte(strings.Repeat("a", k.A) + "-" + strings.Repeat("b", k.B)), nil
}

func (k *cdTextKey) UnmarshalText(b []byte) error {
	a, b2, _ := strings.Cut(string(b), "-")
	k.A, k.B = len(a), len(b2)
	return nil
}

func problemOf[T any]() string {
	if p := checkDefaultCodec(reflect.TypeFor[T]()); p != nil {
		return p.message("pass a codec")
	}
	return ""
}

// tagClash checks struct{ A int `json:"x"`; B int `json:"x"` }, built at
// run time because vet refuses the repeated tag in source.
func tagClash() string {
	t := reflect.StructOf([]reflect.StructField{
		{Name: "A", Type: reflect.TypeFor[int](), Tag: `json:"x"`},
		{Name: "B", Type: reflect.TypeFor[int](), Tag: `json:"x"`},
	})
	if p := checkDefaultCodec(t); p != nil {
		return p.message("pass a codec")
	}
	return ""
}

func TestCheckDefaultCodecRefuses(t *testing.T) {
	for _, tt := range []struct {
		got, want string
	}{
		{problemOf[cdCounter](), "field count is unexported, and JSON skips it; export it or pass a codec"},
		{problemOf[cdWithAny](), "field V has interface type interface {}, whose dynamic type JSON cannot restore"},
		{problemOf[any](), "the value has interface type interface {}"},
		{problemOf[cdWithError](), "field Err has interface type error"},
		{problemOf[[]any](), "field [] has interface type"},
		{problemOf[map[string]any](), "field [] has interface type"},
		{problemOf[cdWithDash](), "field B is excluded from JSON by its `json:\"-\"` tag; remove the tag"},
		{problemOf[cdWithUnexportedEmbedded](), "field cdHiddenInt is an embedded field of the unexported type github.com/snapflow/snapflow/internal/dataflow.cdHiddenInt"},
		{problemOf[cdWithChan](), "field C has type chan int, which JSON cannot encode"},
		{problemOf[cdWithFunc](), "field F has type func(), which JSON cannot encode"},
		{problemOf[cdWithComplex](), "field C has type complex128, which JSON cannot encode"},
		{problemOf[complex64](), "the value has type complex64, which JSON cannot encode"},
		{problemOf[cdWithUnsafe](), "field P has type unsafe.Pointer, which JSON cannot encode"},
		{problemOf[cdWithFloatKey](), "field M has map key type float64: JSON object keys can only be strings, integers, or types implementing"},
		{problemOf[cdWithPointKey](), "field M has map key type github.com/snapflow/snapflow/internal/dataflow.point"},
		{problemOf[cdPtrKey](), "field M has map key type *int, which JSON cannot restore"},
		{problemOf[map[cdTextUnmarshalString]int](), "has map key type github.com/snapflow/snapflow/internal/dataflow.cdTextUnmarshalString, a string type with UnmarshalText"},
		{problemOf[map[cdMarshalTextInt]int](), "has only one of MarshalText (value receiver) and UnmarshalText"},
		{problemOf[cdWithPtrPtr](), "field P has type **int, a pointer to a pointer"},
		{problemOf[cdDupEmbedded](), `fields CdNamed.Name and CdLabelled.Name have the same JSON name "Name", and JSON keeps at most one of them`},
		{problemOf[cdShadowed](), `fields CdNamed.Name and Name have the same JSON name "Name"`},
		{tagClash(), `fields A and B have the same JSON name "x"`},
		{problemOf[cdOnlyMarshalJSON](), "implements MarshalJSON but not UnmarshalJSON, so JSON would not decode what it encodes"},
		{problemOf[cdOnlyUnmarshalJSON](), "implements UnmarshalJSON but not MarshalJSON, so JSON would not encode what it decodes"},
		{problemOf[cdOnlyMarshalText](), "implements MarshalText but not UnmarshalText"},
		{problemOf[cdEmbedsTime](), "which embeds time.Time: its MarshalJSON method encodes only the embedded value"},
		{problemOf[cdOmitMap](), "field M is a map tagged omitempty"},
		{problemOf[cdSelfLoose](), "field v is unexported"},
		{problemOf[cdEmbedsInnerPtr](), "field cdInnerStruct embeds a pointer to the unexported struct"},
		{problemOf[cdNested](), "field Items[].count is unexported"},
		{problemOf[cdInMap](), "field ByName[].count is unexported"},
		{problemOf[struct{ N json.Number }](), "field N has type encoding/json.Number, whose empty value JSON stores as 0"},
		{problemOf[map[string]big.Int](), "field [] has type math/big.Int, whose MarshalJSON method has a pointer receiver, which encoding/json does not call on map values; store a pointer"},
	} {
		if tt.got == "" || !strings.Contains(tt.got, tt.want) {
			t.Errorf("problem %q, want one containing %q", tt.got, tt.want)
		}
	}
}

func TestCheckDefaultCodecAccepts(t *testing.T) {
	for _, p := range []string{
		problemOf[cdAccepted](), problemOf[point](), problemOf[[]int](), problemOf[map[string]int](),
		problemOf[time.Time](), problemOf[*int64](), problemOf[cdRecursive](), problemOf[[]byte](),
		problemOf[map[cdTextKey]int](), problemOf[map[cdHiddenInt]string](), problemOf[[4]cdRecursive](),
		problemOf[struct{}](), problemOf[map[string]*big.Int](), problemOf[level](), problemOf[cdComplexFree](), problemOf[cdBlank](),
	} {
		if p != "" {
			t.Errorf("refused: %s", p)
		}
	}
}

// cdBlank has blank fields, which hold no data.
type cdBlank struct {
	_ [0]func()
	A int
	_ chan int
}

type cdComplexFree struct {
	CdNamed `json:"named"` // a tagged embedded struct is one field, not promoted
	Name    string
}

// TestRefusedTypesLoseData shows what the refusals prevent: plain JSON
// restores these values changed, without an error.
func TestRefusedTypesLoseData(t *testing.T) {
	c := JSONCodec[cdCounter]{}
	b, err := c.Append(nil, cdCounter{count: 7, Last: 3})
	if err != nil {
		t.Fatal(err)
	}
	if back, err := c.Decode(b); err != nil || back.count != 0 {
		t.Errorf("cdCounter round-trips to %+v, %v: the test no longer shows the loss", back, err)
	}
	a := JSONCodec[cdWithAny]{}
	b, err = a.Append(nil, cdWithAny{V: int64(2500)})
	if err != nil {
		t.Fatal(err)
	}
	if back, err := a.Decode(b); err != nil || reflect.TypeOf(back.V) != reflect.TypeFor[float64]() {
		t.Errorf("an int64 in an any field round-trips to %T, %v: the test no longer shows the loss", back.V, err)
	}
}

func TestJSONCodecInvalidUTF8(t *testing.T) {
	type doc struct {
		S string
		M map[string]int
	}
	c := DefaultCodec[doc]()
	for _, v := range []doc{
		{S: "a\xffb"},
		{M: map[string]int{"k\xc3": 1}},
	} {
		b, err := c.Append([]byte("keep"), v)
		if !errors.Is(err, ErrLossyValue) || !strings.Contains(err.Error(), "not valid UTF-8") {
			t.Errorf("Append(%+v) = %v, want an error wrapping ErrLossyValue", v, err)
		}
		if string(b) != "keep" {
			t.Errorf("a failed Append returned %q", b)
		}
	}
	// Strings that merely look like the replacement are stored exactly.
	for _, v := range []doc{{S: `\ufffd`}, {S: "\ufffd"}, {S: `x\\ufffd`, M: map[string]int{`\ufffd`: 2, "\uFFFD": 3}}} {
		b, err := c.Append(nil, v)
		if err != nil {
			t.Errorf("Append(%+v): %v", v, err)
			continue
		}
		if back, err := c.Decode(b); err != nil || !reflect.DeepEqual(back, v) {
			t.Errorf("%+v round-trips to %+v, %v", v, back, err)
		}
	}
}

// cdRawMarshaler writes raw bytes that are not valid UTF-8 from MarshalJSON,
// which encoding/json passes through and Unmarshal changes.
type cdRawMarshaler struct{ S string }

func (r cdRawMarshaler) MarshalJSON() ([]byte, error) { return []byte(`"` + r.S + `"`), nil }
func (r *cdRawMarshaler) UnmarshalJSON(b []byte) error {
	return json.Unmarshal(b, &r.S)
}

func TestJSONCodecInvalidUTF8FromMarshaler(t *testing.T) {
	if _, err := DefaultCodec[cdRawMarshaler]().Append(nil, cdRawMarshaler{S: "\xfe"}); !errors.Is(err, ErrLossyValue) {
		t.Errorf("Append of raw invalid UTF-8 from MarshalJSON: %v, want ErrLossyValue", err)
	}
	if _, err := DefaultCodec[cdRawMarshaler]().Append(nil, cdRawMarshaler{S: "ok"}); err != nil {
		t.Errorf("Append of valid output: %v", err)
	}
}

// FuzzJSONCodecExact checks that the JSON codec either stores a value that
// decodes to itself or refuses it with ErrLossyValue.
func FuzzJSONCodecExact(f *testing.F) {
	for _, s := range []string{"", "a", "\xff", `\ufffd`, "\ufffd", "é\xc3", "<&>", "\x00\x1f"} {
		f.Add(s, int64(1))
	}
	type doc struct {
		S    string
		M    map[string]int64
		List []string
	}
	c := DefaultCodec[doc]()
	f.Fuzz(func(t *testing.T, s string, n int64) {
		v := doc{S: s, M: map[string]int64{s: n}, List: []string{s, s + s}}
		b, err := c.Append(nil, v)
		if err != nil {
			if !errors.Is(err, ErrLossyValue) {
				t.Fatalf("Append(%q): %v", s, err)
			}
			return
		}
		back, err := c.Decode(b)
		if err != nil || !reflect.DeepEqual(back, v) {
			t.Fatalf("%+v round-trips to %+v, %v", v, back, err)
		}
	})
}
