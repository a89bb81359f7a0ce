package dataflow

import (
	"reflect"
	"strings"
	"testing"
	"unsafe"
)

// sizeOf estimates the bytes of v with the sizer of its type.
func sizeOf[T any](v T) int {
	return sizerOf(reflect.TypeFor[T]()).recordSize(unsafe.Pointer(&v))
}

type withString struct {
	ID      int64
	Payload string
}

type nested struct {
	Name  string
	Tags  []string
	Inner *withString
	Vals  [2]withString
	N     int32
}

type listNode struct {
	Next *listNode
	Pad  [100]byte
}

type hasMap struct {
	M map[string]string
}

type stringer interface{ String() string }

type named string

func (n named) String() string { return string(n) }

type bigNamed [4096]byte

func (bigNamed) String() string { return "" }

func TestSizerEstimates(t *testing.T) {
	const mib = 1 << 20
	big := strings.Repeat("x", mib)
	inner := &withString{Payload: "0123456789"}
	a, b := &listNode{}, &listNode{}
	a.Next, b.Next = b, a
	node := int(unsafe.Sizeof(listNode{}))
	for _, tt := range []struct {
		name     string
		got      int
		min, max int
	}{
		{"int64", sizeOf(int64(1)), 8, 8},
		{"static struct", sizeOf(struct{ A, B int64 }{}), 16, 16},
		{"static array", sizeOf([1000]int32{}), 4000, 4000},
		{"empty string", sizeOf(""), 16, 16},
		{"string of 1 MiB", sizeOf(big), 16 + mib, 16 + mib},
		{"nil slice", sizeOf([]byte(nil)), 24, 24},
		{"[]byte counted to its capacity", sizeOf(make([]byte, 10, mib)), 24 + mib, 24 + mib},
		{"struct with a string", sizeOf(withString{Payload: big}), 24 + mib, 24 + mib},
		{"struct with a string after an int", sizeOf(struct {
			N int64
			S string
		}{7, "abcde"}), 24 + 5, 24 + 5},
		{"pointer to a struct with a string", sizeOf(&withString{Payload: big}), 8 + 24 + mib, 8 + 24 + mib},
		{"nil pointer", sizeOf((*withString)(nil)), 8, 8},
		{"[]string", sizeOf([]string{"ab", big}), 24 + 2*16 + 2 + mib, 24 + 2*16 + 2 + mib},
		{
			"nested",
			sizeOf(nested{Name: "abc", Tags: []string{"t1", "t2"}, Inner: inner, Vals: [2]withString{{Payload: "p"}, {Payload: big}}}),
			int(unsafe.Sizeof(nested{})) + 3 + 2*16 + 4 + 24 + 10 + 1 + mib,
			int(unsafe.Sizeof(nested{})) + 3 + 2*16 + 4 + 24 + 10 + 1 + mib,
		},
		// Maps are estimated: at least their keys and values, not wildly more.
		{"nil map", sizeOf(hasMap{}), 8, 8},
		{"map of strings", sizeOf(map[string]string{"k": big, "k2": "v"}), 8 + 2*32 + 3 + 1 + mib, 8 + 1000 + mib},
		{"map of ints", sizeOf(map[int64]int64{1: 1, 2: 2, 3: 3, 4: 4}), 8 + 4*16, 8 + 400},
		{"nil interface", sizeOf[any](nil), 16, 16},
		{"interface holding an int", sizeOf[any](int64(3)), 16 + 8, 16 + 8},
		{"interface holding a string", sizeOf[any](big), 16 + 16 + mib, 16 + 16 + mib},
		{"interface holding a pointer", sizeOf[any](&withString{Payload: big}), 16 + 24 + mib, 16 + 24 + mib},
		{"interface holding a map", sizeOf[any](map[string]int64{big: 1}), 16 + 24 + mib, 16 + 1000 + mib},
		{"non-empty interface", sizeOf[stringer](named(big)), 16 + 16 + mib, 16 + 16 + mib},
		{"non-empty interface, large value", sizeOf[stringer](bigNamed{}), 16 + 4096, 16 + 4096},
		{"[]any", sizeOf([]any{"ab", int64(1), nil}), 24 + 3*16 + 16 + 2 + 8, 24 + 3*16 + 16 + 2 + 8},
		// A cycle is cut by the depth bound: the work and the estimate are bounded.
		{"cycle", sizeOf(a), 8 + node, 8 + (sizeDepth+1)*node},
	} {
		if tt.got < tt.min || tt.got > tt.max {
			t.Errorf("%s: estimated %d bytes, want %d..%d", tt.name, tt.got, tt.min, tt.max)
		}
	}
}

// TestHoldsPointers checks which record types a pooled batch is cleared for.
func TestHoldsPointers(t *testing.T) {
	for _, tt := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[int64](), false},
		{reflect.TypeFor[uintptr](), false},
		{reflect.TypeFor[struct{ A, B uint64 }](), false},
		{reflect.TypeFor[[4]float64](), false},
		{reflect.TypeFor[[0]*int](), false},
		{reflect.TypeFor[struct{}](), false},
		{reflect.TypeFor[string](), true},
		{reflect.TypeFor[[]byte](), true},
		{reflect.TypeFor[*int](), true},
		{reflect.TypeFor[any](), true},
		{reflect.TypeFor[map[int]int](), true},
		{reflect.TypeFor[chan int](), true},
		{reflect.TypeFor[func()](), true},
		{reflect.TypeFor[unsafe.Pointer](), true},
		{reflect.TypeFor[struct {
			N int64
			S string
		}](), true},
		{reflect.TypeFor[[2]struct{ P *int }](), true},
	} {
		if got := holdsPointers(tt.t); got != tt.want {
			t.Errorf("holdsPointers(%v) = %v, want %v", tt.t, got, tt.want)
		}
	}
}

// TestPointerShaped checks the runtime's answer for types that interfaces
// do and do not hold in their data word.
func TestPointerShaped(t *testing.T) {
	for _, tt := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[*int](), true},
		{reflect.TypeFor[map[string]int](), true},
		{reflect.TypeFor[chan int](), true},
		{reflect.TypeFor[func()](), true},
		{reflect.TypeFor[unsafe.Pointer](), true},
		{reflect.TypeFor[struct{ P *int }](), true},
		{reflect.TypeFor[[1]*int](), true},
		{reflect.TypeFor[int](), false},
		{reflect.TypeFor[uintptr](), false},
		{reflect.TypeFor[float64](), false},
		{reflect.TypeFor[string](), false},
		{reflect.TypeFor[[]byte](), false},
		{reflect.TypeFor[struct{ P, Q *int }](), false},
		{reflect.TypeFor[[2]*int](), false},
		{reflect.TypeFor[any](), false},
	} {
		if got := pointerShaped(tt.t); got != tt.want {
			t.Errorf("pointerShaped(%v) = %v, want %v", tt.t, got, tt.want)
		}
	}
}

func TestByteLimits(t *testing.T) {
	const mib = 1 << 20
	check := func(name string, limit int, size func(unsafe.Pointer) int, wantLimit int, wantSized bool) {
		t.Helper()
		if limit != wantLimit || (size != nil) != wantSized {
			t.Errorf("%s: limit %d, sized per record %v; want %d, %v", name, limit, size != nil, wantLimit, wantSized)
		}
	}
	l, s := byteLimits[int64](256, mib)
	check("int64", l, s, 256, false)
	l, s = byteLimits[[4096]byte](1024, mib)
	check("[4096]byte", l, s, 256, false)
	l, s = byteLimits[[2 * mib]byte](256, mib)
	check("[2 MiB]byte", l, s, 1, false)
	l, s = byteLimits[struct{}](256, mib)
	check("struct{}", l, s, 256, false)
	l, s = byteLimits[[4096]byte](256, 0)
	check("no byte bound", l, s, 256, false)
	l, s = byteLimits[[4096]byte](0, 0)
	check("batch size 0", l, s, 1, false)
	l, s = byteLimits[string](256, mib)
	check("string", l, s, 256, true)
	l, s = byteLimits[withString](256, mib)
	check("struct with a string", l, s, 256, true)
	l, s = byteLimits[string](256, 0)
	check("string, no byte bound", l, s, 256, false)
}

// TestSizerAllocs checks that sizing a record allocates nothing.
func TestSizerAllocs(t *testing.T) {
	v := []nested{{Name: "abc", Tags: []string{"t1", "t2"}, Inner: &withString{Payload: "p"}}}
	var any1 = []any{withString{Payload: "x"}}
	ns := sizerOf(reflect.TypeFor[nested]())
	as := sizerOf(reflect.TypeFor[any]())
	n := 0
	if a := testing.AllocsPerRun(100, func() {
		n += ns.recordSize(unsafe.Pointer(&v[0]))
		n += as.recordSize(unsafe.Pointer(&any1[0]))
	}); a != 0 {
		t.Errorf("sizing a record allocates %.1f times, want 0", a)
	}
	if n == 0 {
		t.Error("sized nothing")
	}
}

// TestSizerRecursiveTypes checks that building the sizer of a type that
// refers to itself terminates, and that the sizer follows it.
func TestSizerRecursiveTypes(t *testing.T) {
	type tree struct {
		Label    string
		Children []*tree
		Parent   *tree
	}
	root := &tree{Label: "root"}
	for range 3 {
		root.Children = append(root.Children, &tree{Label: strings.Repeat("c", 1000), Parent: root})
	}
	if got := sizeOf(root); got < 3*1000 {
		t.Errorf("tree of three 1000-byte labels estimated at %d bytes", got)
	}
}
