package dataflow

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// Codec encodes values of type T into snapshots and decodes them back.
//
// A codec's identity is recorded in the descriptor of every state that uses
// it, and a restore into a state whose codec changed is refused
// (ErrIncompatibleState). The identity of a user codec is its Go type name
// (package path and name), unless it implements IdentifiedCodec.
type Codec[T any] interface {
	Append(dst []byte, v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// IdentifiedCodec is implemented by codecs that name their encoding with a
// stable id, recorded in state descriptors instead of the codec's Go type
// name. Implement it to keep old checkpoints restorable when the codec type
// is renamed or moved, or to let two codec types that share one encoding
// read each other's state. Ids starting with "snapflow." are reserved for
// the built-in codecs: "snapflow.fixed1", "snapflow.fixed2",
// "snapflow.fixed4" and "snapflow.fixed8" (big-endian numbers and bools),
// "snapflow.string" and "snapflow.json".
type IdentifiedCodec interface {
	CodecID() string
}

// ErrLossyValue is wrapped by the errors of the built-in codecs when a value
// would not decode to what was encoded: the snapshot fails rather than store
// a changed value.
var ErrLossyValue = errors.New("topology: value cannot be encoded exactly")

// JSONCodec encodes values with encoding/json. It is the default for types
// that have no built-in binary encoding; as a default it is checked when the
// state is declared (see Value). Passing it explicitly skips that check.
//
// A value whose encoding would not decode to the same value is refused with
// an error wrapping ErrLossyValue: a string that is not valid UTF-8 (JSON
// would store U+FFFD instead). encoding/json also refuses NaN and infinite
// floats.
type JSONCodec[T any] struct{}

// replacementEscape is how encoding/json writes each byte of invalid UTF-8.
var replacementEscape = []byte(`\ufffd`)

// Append implements Codec.
func (JSONCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	// A pointer makes v addressable, so that MarshalJSON and MarshalText
	// methods with pointer receivers are used, as Decode uses UnmarshalJSON.
	b, err := json.Marshal(&v)
	if err != nil {
		return dst, fmt.Errorf("topology: encode %T: %w", v, err)
	}
	// encoding/json replaces invalid UTF-8 with \ufffd, and passes the raw
	// output of MarshalJSON methods through, which Unmarshal then changes.
	// Both are rare: check the round trip only when the output shows a sign
	// of them.
	if bytes.Contains(b, replacementEscape) || !utf8.Valid(b) {
		if err := sameAfterRoundTrip[T](b); err != nil {
			return dst, fmt.Errorf("topology: encode %T: %w", v, err)
		}
	}
	return append(dst, b...), nil
}

// sameAfterRoundTrip checks that decoding b and encoding the result again
// gives b back.
func sameAfterRoundTrip[T any](b []byte) error {
	var back T
	if err := json.Unmarshal(b, &back); err != nil {
		return &stateError{msg: fmt.Sprintf("its JSON does not decode: %v", err), sentinel: ErrLossyValue, cause: err}
	}
	again, err := json.Marshal(&back)
	if err != nil || !bytes.Equal(again, b) {
		return &stateError{msg: "it holds a string that is not valid UTF-8, which JSON would store changed (as U+FFFD); " +
			"store bytes in a []byte, or pass a codec that keeps them", sentinel: ErrLossyValue}
	}
	return nil
}

// Decode implements Codec.
func (JSONCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("topology: decode %T: %w", v, err)
	}
	return v, nil
}

// fixedCodec encodes fixed-size numbers and bools as big-endian bytes. int,
// uint and uintptr are stored in 8 bytes on every platform.
type fixedCodec[T any] struct {
	size   int  // bytes stored
	mem    int  // bytes in memory: size, or 4 for int, uint and uintptr on 32-bit platforms
	signed bool // sign-extends from mem to size
	isBool bool // only the bytes 0 and 1 decode to a bool
}

func newFixedCodec[T any](t reflect.Type) fixedCodec[T] {
	c := fixedCodec[T]{size: int(t.Size()), mem: int(t.Size()), isBool: t.Kind() == reflect.Bool}
	switch t.Kind() {
	case reflect.Int, reflect.Uint, reflect.Uintptr:
		c.size = 8
		c.signed = t.Kind() == reflect.Int
	}
	return c
}

func (c fixedCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	p := unsafe.Pointer(&v)
	switch c.mem {
	case 1:
		return append(dst, *(*uint8)(p)), nil
	case 2:
		return binary.BigEndian.AppendUint16(dst, *(*uint16)(p)), nil
	case 4:
		if c.size == 8 { // a platform-sized integer on a 32-bit platform
			if c.signed {
				return binary.BigEndian.AppendUint64(dst, uint64(int64(*(*int32)(p)))), nil
			}
			return binary.BigEndian.AppendUint64(dst, uint64(*(*uint32)(p))), nil
		}
		return binary.BigEndian.AppendUint32(dst, *(*uint32)(p)), nil
	}
	return binary.BigEndian.AppendUint64(dst, *(*uint64)(p)), nil
}

func (c fixedCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if len(b) != c.size {
		return v, fmt.Errorf("topology: decode %T: %d bytes, want %d", v, len(b), c.size)
	}
	if c.isBool && b[0] > 1 {
		return v, fmt.Errorf("topology: decode %T: byte %d is not a bool", v, b[0])
	}
	p := unsafe.Pointer(&v)
	switch c.mem {
	case 1:
		*(*uint8)(p) = b[0]
	case 2:
		*(*uint16)(p) = binary.BigEndian.Uint16(b)
	case 4:
		if c.size == 8 {
			return c.decodeNarrow(b)
		}
		*(*uint32)(p) = binary.BigEndian.Uint32(b)
	default:
		*(*uint64)(p) = binary.BigEndian.Uint64(b)
	}
	return v, nil
}

// decodeNarrow decodes 8 stored bytes into a 4-byte platform integer,
// refusing a value that does not fit.
func (c fixedCodec[T]) decodeNarrow(b []byte) (T, error) {
	var v T
	u := binary.BigEndian.Uint64(b)
	fits := u <= math.MaxUint32
	if c.signed {
		fits = int64(u) >= math.MinInt32 && int64(u) <= math.MaxInt32
	}
	if !fits {
		if c.signed {
			return v, fmt.Errorf("topology: decode %T: %d does not fit in 32 bits", v, int64(u))
		}
		return v, fmt.Errorf("topology: decode %T: %d does not fit in 32 bits", v, u)
	}
	*(*uint32)(unsafe.Pointer(&v)) = uint32(u)
	return v, nil
}

// aliaser is implemented by codecs of immutable values, whose encoding can
// share the value's memory: a snapshot then references the value instead of
// copying it. The bytes returned must never be written to.
type aliaser[T any] interface {
	alias(v T) []byte
}

// stringCodec stores the bytes of a string type.
type stringCodec[T any] struct{}

func (stringCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	return append(dst, *(*string)(unsafe.Pointer(&v))...), nil
}

// alias returns the string's own bytes: strings are immutable, so the
// snapshot may reference them without a copy.
func (stringCodec[T]) alias(v T) []byte {
	s := *(*string)(unsafe.Pointer(&v))
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

func (stringCodec[T]) Decode(b []byte) (T, error) {
	var v T
	*(*string)(unsafe.Pointer(&v)) = string(b)
	return v, nil
}

// DefaultCodec returns a binary codec for booleans, integers, floats and
// strings (and types defined on them), and JSONCodec for anything else.
// Integers are stored big-endian in their size; int, uint and uintptr in 8
// bytes on every platform. Strings are stored as their bytes.
//
// Value and MapOf check, when a state is declared, that JSON can store the
// type exactly, and refuse it otherwise (see Value).
func DefaultCodec[T any]() Codec[T] {
	t := reflect.TypeFor[T]()
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return newFixedCodec[T](t)
	case reflect.String:
		return stringCodec[T]{}
	}
	return JSONCodec[T]{}
}

// codecID is the id of c recorded in state descriptors: a stable name for
// the built-in codecs, CodecID for an IdentifiedCodec, else c's type name.
// Only the exact built-in types get built-in ids: a type embedding one has
// its own identity.
func codecID[T any](c Codec[T]) string {
	switch c := c.(type) {
	case fixedCodec[T]:
		return "snapflow.fixed" + strconv.Itoa(c.size)
	case stringCodec[T]:
		return "snapflow.string"
	case JSONCodec[T], *JSONCodec[T]:
		return "snapflow.json"
	case IdentifiedCodec:
		return c.CodecID()
	}
	return typeName(reflect.TypeOf(c))
}
