package dataflow

import (
	"bytes"
	"encoding/binary"
	"math"
	"reflect"
	"strings"
	"testing"
)

type name string
type level int16
type point struct {
	X, Y int
	Tag  string `json:"tag"`
}

// roundTrip checks that DefaultCodec[T] decodes what it encodes, appending
// after existing bytes, and that it has the expected encoded size.
func roundTrip[T any](t *testing.T, size int, vs ...T) {
	t.Helper()
	c := DefaultCodec[T]()
	for _, v := range vs {
		prefix := []byte("pre")
		b, err := c.Append(prefix, v)
		if err != nil {
			t.Fatalf("Append(%v): %v", v, err)
		}
		if !bytes.HasPrefix(b, []byte("pre")) {
			t.Fatalf("Append(%v) lost the bytes before it: %q", v, b)
		}
		enc := b[len(prefix):]
		if size >= 0 && len(enc) != size {
			t.Errorf("%T %v encodes to %d bytes, want %d", v, v, len(enc), size)
		}
		got, err := c.Decode(enc)
		if err != nil {
			t.Fatalf("Decode(%x) of %T: %v", enc, v, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Errorf("%T %v round-trips to %v", v, v, got)
		}
	}
}

func TestDefaultCodecRoundTrip(t *testing.T) {
	roundTrip(t, 1, int8(math.MinInt8), -1, 0, 1, math.MaxInt8)
	roundTrip(t, 2, int16(math.MinInt16), -1, 0, 1, math.MaxInt16)
	roundTrip(t, 4, int32(math.MinInt32), -1, 0, 1, math.MaxInt32)
	roundTrip(t, 8, int64(math.MinInt64), -1, 0, 1, math.MaxInt64)
	roundTrip(t, 8, math.MinInt, -1, 0, 1, math.MaxInt)
	roundTrip(t, 1, uint8(0), 1, math.MaxUint8)
	roundTrip(t, 2, uint16(0), 1, math.MaxUint16)
	roundTrip(t, 4, uint32(0), 1, math.MaxUint32)
	roundTrip(t, 8, uint64(0), 1, math.MaxUint64)
	roundTrip(t, 8, uint(0), 1, math.MaxUint)
	roundTrip(t, 8, uintptr(0), 12345)
	roundTrip(t, 4, float32(0), -1.5, math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Inf(-1)))
	roundTrip(t, 8, 0.0, -1.5, math.MaxFloat64, math.SmallestNonzeroFloat64, math.Inf(1), math.Copysign(0, -1))
	roundTrip(t, 1, false, true)
	roundTrip(t, 2, level(-3), 7)
	roundTrip(t, -1, "", "a", "héllo, 世界", strings.Repeat("x", 1000))
	roundTrip(t, -1, name(""), name("bob"))
	roundTrip(t, -1, point{}, point{X: -1, Y: 2, Tag: "t"})
	roundTrip(t, -1, []int{1, 2}, nil)
	roundTrip(t, -1, map[string]int{"a": 1})
	roundTrip[any](t, -1, "s", 1.5, nil)

	// NaN is not equal to itself: compare bits.
	c := DefaultCodec[float64]()
	b, _ := c.Append(nil, math.NaN())
	if got, err := c.Decode(b); err != nil || !math.IsNaN(got) {
		t.Errorf("NaN round-trips to %v, %v", got, err)
	}
}

func TestDefaultCodecKinds(t *testing.T) {
	for _, tt := range []struct {
		codec any
		want  string
	}{
		{DefaultCodec[int64](), "dataflow.fixedCodec[int64]"},
		{DefaultCodec[bool](), "dataflow.fixedCodec[bool]"},
		{DefaultCodec[level](), "dataflow.fixedCodec[github.com/snapflow/snapflow/internal/dataflow.level]"},
		{DefaultCodec[name](), "dataflow.stringCodec[github.com/snapflow/snapflow/internal/dataflow.name]"},
		{DefaultCodec[point](), "dataflow.JSONCodec[github.com/snapflow/snapflow/internal/dataflow.point]"},
		{DefaultCodec[complex128](), "dataflow.JSONCodec[complex128]"},
		{DefaultCodec[any](), "dataflow.JSONCodec[interface {}]"},
	} {
		if got := reflect.TypeOf(tt.codec).String(); got != tt.want {
			t.Errorf("codec %s, want %s", got, tt.want)
		}
	}
}

// TestDefaultCodecFormat pins the encoding: checkpoints written by one
// version must be read by the next.
func TestDefaultCodecFormat(t *testing.T) {
	enc := func(b []byte, err error) []byte {
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct {
		got, want []byte
	}{
		{enc(DefaultCodec[int32]().Append(nil, -2)), []byte{0xff, 0xff, 0xff, 0xfe}},
		{enc(DefaultCodec[uint16]().Append(nil, 0x0102)), []byte{1, 2}},
		{enc(DefaultCodec[int64]().Append(nil, 258)), []byte{0, 0, 0, 0, 0, 0, 1, 2}},
		{enc(DefaultCodec[float64]().Append(nil, 1)), []byte{0x3f, 0xf0, 0, 0, 0, 0, 0, 0}},
		{enc(DefaultCodec[bool]().Append(nil, true)), []byte{1}},
		{enc(DefaultCodec[string]().Append(nil, "hi")), []byte("hi")},
		{enc(DefaultCodec[point]().Append(nil, point{X: 1, Tag: "a"})), []byte(`{"X":1,"Y":0,"tag":"a"}`)},
	} {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("encoded %x, want %x", tt.got, tt.want)
		}
	}
}

func TestDefaultCodecDecodeErrors(t *testing.T) {
	check := func(err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Decode error %v, want one containing %q", err, want)
		}
	}
	for _, n := range []int{0, 2} {
		_, err := DefaultCodec[int8]().Decode(make([]byte, n))
		check(err, "want 1")
	}
	for _, n := range []int{0, 1, 4} {
		_, err := DefaultCodec[uint16]().Decode(make([]byte, n))
		check(err, "want 2")
	}
	for _, n := range []int{0, 3, 8} {
		_, err := DefaultCodec[int32]().Decode(make([]byte, n))
		check(err, "want 4")
		_, err = DefaultCodec[float32]().Decode(make([]byte, n))
		check(err, "want 4")
	}
	for _, n := range []int{0, 4, 7, 9} {
		_, err := DefaultCodec[uint64]().Decode(make([]byte, n))
		check(err, "want 8")
		_, err = DefaultCodec[float64]().Decode(make([]byte, n))
		check(err, "want 8")
		_, err = DefaultCodec[int64]().Decode(make([]byte, n))
		check(err, "topology: decode int64: ")
	}
	_, err := DefaultCodec[bool]().Decode(nil)
	check(err, "want 1")
	_, err = DefaultCodec[bool]().Decode([]byte{2})
	check(err, "byte 2 is not a bool")
	_, err = DefaultCodec[point]().Decode([]byte("{"))
	check(err, "topology: decode dataflow.point")
	_, err = DefaultCodec[point]().Decode(nil)
	check(err, "topology: decode dataflow.point")
}

func TestJSONCodecEncodeError(t *testing.T) {
	b, err := DefaultCodec[complex64]().Append([]byte("keep"), 1i)
	if err == nil || !strings.Contains(err.Error(), "topology: encode complex64") {
		t.Errorf("Append of a complex number: %v", err)
	}
	if string(b) != "keep" {
		t.Errorf("a failed Append returned %q, want the bytes given", b)
	}
	_, err = JSONCodec[chan int]{}.Append(nil, nil)
	if err == nil {
		t.Error("Append of a channel succeeded")
	}
}

// TestPlatformIntsStoredIn8Bytes: int, uint and uintptr are stored in 8
// bytes on every platform, as 64-bit platforms always stored them.
func TestPlatformIntsStoredIn8Bytes(t *testing.T) {
	enc := func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tt := range []struct{ got, want []byte }{
		{enc(DefaultCodec[int]().Append(nil, -2)), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}},
		{enc(DefaultCodec[uint]().Append(nil, 258)), []byte{0, 0, 0, 0, 0, 0, 1, 2}},
		{enc(DefaultCodec[uintptr]().Append(nil, 1)), []byte{0, 0, 0, 0, 0, 0, 0, 1}},
	} {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("encoded %x, want %x", tt.got, tt.want)
		}
	}
	if v, err := DefaultCodec[int]().Decode([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe}); err != nil || v != -2 {
		t.Errorf("decode of a 64-bit snapshot's int = %d, %v", v, err)
	}
	if _, err := DefaultCodec[int]().Decode([]byte{0, 0, 0, 1}); err == nil || !strings.Contains(err.Error(), "4 bytes, want 8") {
		t.Errorf("decode of 4 bytes as int: %v", err)
	}
}

// TestPlatformIntsOn32Bit runs the codec of int and uint as a 32-bit
// platform builds it: 4 bytes in memory, 8 stored.
func TestPlatformIntsOn32Bit(t *testing.T) {
	i32 := fixedCodec[int32]{size: 8, mem: 4, signed: true}
	for _, v := range []int32{math.MinInt32, -2, 0, 1, math.MaxInt32} {
		b, err := i32.Append(nil, v)
		if err != nil || len(b) != 8 || int64(binary.BigEndian.Uint64(b)) != int64(v) {
			t.Errorf("Append(%d) = %x, %v", v, b, err)
		}
		if got, err := i32.Decode(b); err != nil || got != v {
			t.Errorf("%d round-trips to %d, %v", v, got, err)
		}
	}
	for _, v := range []int64{math.MaxInt32 + 1, math.MinInt32 - 1, math.MaxInt64} {
		if got, err := i32.Decode(binary.BigEndian.AppendUint64(nil, uint64(v))); err == nil || !strings.Contains(err.Error(), "does not fit in 32 bits") {
			t.Errorf("Decode of %d on a 32-bit platform = %d, %v; want an error", v, got, err)
		}
	}
	u32 := fixedCodec[uint32]{size: 8, mem: 4}
	b, err := u32.Append(nil, math.MaxUint32)
	if err != nil || !bytes.Equal(b, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}) {
		t.Errorf("Append(MaxUint32) = %x, %v", b, err)
	}
	if got, err := u32.Decode(b); err != nil || got != math.MaxUint32 {
		t.Errorf("MaxUint32 round-trips to %d, %v", got, err)
	}
	if _, err := u32.Decode(binary.BigEndian.AppendUint64(nil, 1<<32)); err == nil {
		t.Error("2^32 decoded into 32 bits")
	}
	if c := newFixedCodec[int](reflect.TypeFor[int]()); c.size != 8 || !c.signed {
		t.Errorf("codec of int: %+v", c)
	}
	if c := newFixedCodec[uintptr](reflect.TypeFor[uintptr]()); c.size != 8 || c.signed {
		t.Errorf("codec of uintptr: %+v", c)
	}
}
