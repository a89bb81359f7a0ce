package topology

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"unsafe"
)

// Codec encodes values of type T into snapshots and decodes them back.
type Codec[T any] interface {
	Append(dst []byte, v T) ([]byte, error)
	Decode(b []byte) (T, error)
}

// JSONCodec encodes values with encoding/json. It is the default for types
// that have no built-in binary encoding.
type JSONCodec[T any] struct{}

// Append implements Codec.
func (JSONCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("topology: encode %T: %w", v, err)
	}
	return append(dst, b...), nil
}

// Decode implements Codec.
func (JSONCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("topology: decode %T: %w", v, err)
	}
	return v, nil
}

// fixedCodec encodes fixed-size numbers and bools as big-endian bytes.
type fixedCodec[T any] struct {
	size   int
	isBool bool // only the bytes 0 and 1 decode to a bool
}

func (c fixedCodec[T]) Append(dst []byte, v T) ([]byte, error) {
	p := unsafe.Pointer(&v)
	switch c.size {
	case 1:
		return append(dst, *(*uint8)(p)), nil
	case 2:
		return binary.BigEndian.AppendUint16(dst, *(*uint16)(p)), nil
	case 4:
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
	switch c.size {
	case 1:
		*(*uint8)(p) = b[0]
	case 2:
		*(*uint16)(p) = binary.BigEndian.Uint16(b)
	case 4:
		*(*uint32)(p) = binary.BigEndian.Uint32(b)
	default:
		*(*uint64)(p) = binary.BigEndian.Uint64(b)
	}
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
func DefaultCodec[T any]() Codec[T] {
	var zero T
	t := reflect.TypeOf(zero)
	if t == nil {
		return JSONCodec[T]{}
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64:
		return fixedCodec[T]{size: int(t.Size()), isBool: t.Kind() == reflect.Bool}
	case reflect.String:
		return stringCodec[T]{}
	}
	return JSONCodec[T]{}
}
