package dataflow

import (
	"fmt"
	"reflect"

	"github.com/snapflow/snapflow/messages"
)

// DecodeValueState reads the value state called name out of a stored task
// state, for inspecting checkpoints. It returns the values by key: none if
// st holds no such state. The codec defaults to DefaultCodec[V]. When st
// records the state's descriptor, a state stored with another kind, key
// type or value type than asked is refused with an error wrapping
// ErrIncompatibleState. The codec is not compared: pass the one the state
// was written with, or another of the same encoding.
func DecodeValueState[K Key, V any](st *messages.TaskState, name string, codec ...Codec[V]) (map[K]V, error) {
	kc := newKeyCodec[K]()
	vc := DefaultCodec[V]()
	if len(codec) > 0 && codec[0] != nil {
		vc = codec[0]
	}
	want := &messages.StateDescriptor{
		Name: name, Kind: kindValue, KeyType: typeName(reflect.TypeFor[K]()),
		ValueType: typeName(reflect.TypeFor[V]()), ValueCodec: codecID(vc),
	}
	if err := checkDecoding(st, want); err != nil {
		return nil, err
	}
	out := map[K]V{}
	for e := range entries(st, name) {
		k, err := kc.decode(e.Key)
		if err != nil {
			return nil, decodeError(st, name, err)
		}
		v, err := vc.Decode(e.Value)
		if err != nil {
			return nil, decodeError(st, name, err)
		}
		out[k] = v
	}
	return out, nil
}

// DecodeMapState reads the map state called name out of a stored task
// state, for inspecting checkpoints. It returns each key's map: none if st
// holds no such state. The codecs default to DefaultCodec, as in MapOf;
// pass MapCodecs to choose others.
// When st records the state's descriptor, a state stored with another kind,
// key type, map key type or value type than asked is refused with an error
// wrapping ErrIncompatibleState. The codecs are not compared.
func DecodeMapState[K Key, UK comparable, V any](st *messages.TaskState, name string, opts ...MapOption[UK, V]) (map[K]map[UK]V, error) {
	kc := newKeyCodec[K]()
	ukc, vc, _, _ := resolveMapCodecs(opts)
	if err := checkDecoding(st, mapDescriptor(name, typeName(reflect.TypeFor[K]()), ukc, vc)); err != nil {
		return nil, err
	}
	out := map[K]map[UK]V{}
	for e := range entries(st, name) {
		k, err := kc.decode(e.Key)
		if err != nil {
			return nil, decodeError(st, name, err)
		}
		uk, err := ukc.Decode(e.MapKey)
		if err != nil {
			return nil, decodeError(st, name, err)
		}
		v, err := vc.Decode(e.Value)
		if err != nil {
			return nil, decodeError(st, name, err)
		}
		inner := out[k]
		if inner == nil {
			inner = map[UK]V{}
			out[k] = inner
		}
		inner[uk] = v
	}
	return out, nil
}

// entries iterates over the entries of state name in every key group of st.
func entries(st *messages.TaskState, name string) func(yield func(*messages.StateEntry) bool) {
	return func(yield func(*messages.StateEntry) bool) {
		for _, g := range st.GetKeyGroups() {
			for _, ns := range g.GetStates() {
				if ns.GetName() != name {
					continue
				}
				for _, e := range ns.GetEntries() {
					if !yield(e) {
						return
					}
				}
			}
		}
	}
}

func decodeError(st *messages.TaskState, name string, err error) error {
	return fmt.Errorf("topology: task %s: state %q: %w", orNone(st.GetTaskId()), name, err)
}
