package topology

import (
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// KeyedSetup is given to a Process operator's setup function once per task
// (and again after every restore) to declare keyed state with Value and
// MapOf. Its Subtask and TaskID methods name the task.
type KeyedSetup[K Key] = dataflow.KeyedSetup[K]

// ValueState holds one value per key. Get and Set act on the key of the
// record being processed. WithTTL, called where the state is declared,
// gives it a time-to-live (see docs/state-backends.md).
type ValueState[K Key, V any] = dataflow.ValueState[K, V]

// MapState holds a map from UK to V per key. Get, Put, Delete, All and Len
// act on the key of the record being processed.
type MapState[K Key, UK comparable, V any] = dataflow.MapState[K, UK, V]

// Value declares a value state called name, stored with codec (default
// DefaultCodec[V]).
//
// The default codec stores booleans, numbers and strings in binary, and
// other types as JSON. Value refuses, with an error wrapping
// ErrInvalidState that names the state and the field, a type that JSON
// cannot store exactly: unexported fields, interfaces, channels, functions,
// complex numbers, map keys it cannot restore, and the other cases listed
// in docs/state.md. Pass a codec to store such a type.
func Value[V any, K Key](s *KeyedSetup[K], name string, codec ...Codec[V]) *ValueState[K, V] {
	return dataflow.Value(s, name, codec...)
}

// MapOf declares a map state called name. Its codecs default to
// DefaultCodec and are checked as Value checks them; pass MapCodecs to
// choose others.
func MapOf[UK comparable, V any, K Key](s *KeyedSetup[K], name string, opts ...MapOption[UK, V]) *MapState[K, UK, V] {
	return dataflow.MapOf(s, name, opts...)
}

// MapOption configures a map state (see MapOf and DecodeMapState). Build it
// with MapCodecs.
type MapOption[UK comparable, V any] = dataflow.MapOption[UK, V]

// MapCodecs chooses the codecs of a map state's user keys and values. A nil
// codec means DefaultCodec; give the type arguments when one is nil:
// MapCodecs[string](nil, valueCodec).
func MapCodecs[UK comparable, V any](key Codec[UK], value Codec[V]) MapOption[UK, V] {
	return dataflow.MapCodecs(key, value)
}

// Codec encodes values of type T into snapshots and decodes them back. A
// codec's identity is recorded in the descriptor of every state that uses
// it, and a restore into a state whose codec changed is refused
// (ErrIncompatibleState). The identity of a user codec is its Go type name
// (package path and name), unless it implements IdentifiedCodec.
//
//	Append(dst []byte, v T) ([]byte, error) // appends v's encoding to dst
//	Decode(b []byte) (T, error)             // b is one value's encoding, as Append wrote it
type Codec[T any] = dataflow.Codec[T]

// IdentifiedCodec is implemented by codecs that name their encoding with a
// stable id, recorded in state descriptors instead of the codec's Go type
// name, so that old checkpoints stay restorable when the codec type is
// renamed or moved. Ids starting with "snapflow." are reserved for the
// built-in codecs.
//
//	CodecID() string // the encoding's stable id
type IdentifiedCodec = dataflow.IdentifiedCodec

// JSONCodec encodes values with encoding/json. It is the default for types
// without a built-in binary encoding; passed explicitly, it skips the check
// that JSON stores the type exactly. A value whose encoding would not decode
// to the same value is refused with an error wrapping ErrLossyValue.
type JSONCodec[T any] = dataflow.JSONCodec[T]

// DefaultCodec returns a binary codec for booleans, integers, floats and
// strings (and types defined on them), and JSONCodec for anything else.
// Integers are stored big-endian in their size; int, uint and uintptr in 8
// bytes on every platform.
func DefaultCodec[T any]() Codec[T] { return dataflow.DefaultCodec[T]() }

// DecodeValueState reads the value state called name out of a stored task
// state, for tools and tests that inspect checkpoints (see package
// snapshots). It returns the values by key: none if st holds no such state.
// A state stored with another kind, key type or value type than asked is
// refused with an error wrapping ErrIncompatibleState.
func DecodeValueState[K Key, V any](st *messages.TaskState, name string, codec ...Codec[V]) (map[K]V, error) {
	return dataflow.DecodeValueState[K](st, name, codec...)
}

// DecodeMapState reads the map state called name out of a stored task
// state, as DecodeValueState does for a value state.
func DecodeMapState[K Key, UK comparable, V any](st *messages.TaskState, name string, opts ...MapOption[UK, V]) (map[K]map[UK]V, error) {
	return dataflow.DecodeMapState[K](st, name, opts...)
}

// GeneratedRecords returns how many records the task of a built-in source
// (Generate, Sequence, FromSlice) whose stored state is st had produced.
// Summed over all the operator's tasks it is the operator's total, also
// after a restore at another parallelism.
func GeneratedRecords(st *messages.TaskState) (int64, error) { return dataflow.GeneratedRecords(st) }

// CheckDefaultCodec returns nil when DefaultCodec[T] stores every value of
// T exactly, and otherwise an error wrapping ErrInvalidState naming the
// field it cannot store: the check Value makes, for libraries that keep
// their users' values in a state of their own (package window does).
func CheckDefaultCodec[T any]() error { return dataflow.CheckDefaultCodec[T]() }
