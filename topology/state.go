package topology

import (
	"fmt"
	"sort"

	"github.com/snapflow/snapflow/messages"
)

// KeyedSetup is given to a Process operator's setup function once per task
// (and again after every restore) to declare keyed state.
type KeyedSetup[K Key] struct {
	task   *TaskPlan
	cur    *K
	codec  keyCodec[K]
	maxP   uint64
	states []keyedState
	err    error
}

// TaskID is the id of the task being set up, e.g. "sum#1".
func (s *KeyedSetup[K]) TaskID() string { return s.task.ID }

// Subtask is the index of the task among its operator's tasks.
func (s *KeyedSetup[K]) Subtask() int { return s.task.Subtask }

func (s *KeyedSetup[K]) register(st keyedState) {
	for _, o := range s.states {
		if o.stateName() == st.stateName() {
			s.err = fmt.Errorf("state %q declared twice", st.stateName())
		}
	}
	if st.stateName() == "" {
		s.err = fmt.Errorf("state with an empty name")
	}
	s.states = append(s.states, st)
}

func (s *KeyedSetup[K]) keyGroup(k K) int { return int(s.codec.hash(k) % s.maxP) }

// keyedState is the type-erased view of one declared state.
type keyedState interface {
	stateName() string
	// appendEntries adds the state's entries to the per-key-group map.
	appendEntries(groups map[int]*messages.KeyGroupState) error
	restoreEntry(e *messages.StateEntry) error
}

// namedState returns the NamedState of name in g, creating it.
func namedState(g *messages.KeyGroupState, name string) *messages.NamedState {
	for _, ns := range g.States {
		if ns.Name == name {
			return ns
		}
	}
	ns := &messages.NamedState{Name: name}
	g.States = append(g.States, ns)
	return ns
}

func groupOf(groups map[int]*messages.KeyGroupState, kg int) *messages.KeyGroupState {
	g := groups[kg]
	if g == nil {
		g = &messages.KeyGroupState{KeyGroup: uint32(kg)}
		groups[kg] = g
	}
	return g
}

// snapshotKeyed serialises every declared state into st, by key group.
func (s *KeyedSetup[K]) snapshotKeyed(st *messages.TaskState) error {
	groups := map[int]*messages.KeyGroupState{}
	for _, ks := range s.states {
		if err := ks.appendEntries(groups); err != nil {
			return err
		}
	}
	kgs := make([]int, 0, len(groups))
	for kg := range groups {
		kgs = append(kgs, kg)
	}
	sort.Ints(kgs)
	for _, kg := range kgs {
		st.KeyGroups = append(st.KeyGroups, groups[kg])
	}
	return nil
}

// restoreKeyed loads the entries of the task's key groups from st.
func (s *KeyedSetup[K]) restoreKeyed(st *messages.TaskState) error {
	byName := make(map[string]keyedState, len(s.states))
	for _, ks := range s.states {
		byName[ks.stateName()] = ks
	}
	for _, g := range st.KeyGroups {
		if int(g.KeyGroup) < s.task.KeyGroupStart || int(g.KeyGroup) >= s.task.KeyGroupEnd {
			continue
		}
		for _, ns := range g.States {
			ks := byName[ns.Name]
			if ks == nil {
				return fmt.Errorf("snapshot holds state %q, which the operator does not declare", ns.Name)
			}
			for _, e := range ns.Entries {
				if err := ks.restoreEntry(e); err != nil {
					return fmt.Errorf("state %q: %w", ns.Name, err)
				}
			}
		}
	}
	return nil
}

// ValueState holds one value per key. Get and Set act on the key of the record
// being processed.
type ValueState[K Key, V any] struct {
	name  string
	setup *KeyedSetup[K]
	m     map[K]V
	codec Codec[V]
}

// Value declares a value state called name. The codec defaults to
// DefaultCodec[V].
func Value[V any, K Key](s *KeyedSetup[K], name string, codec ...Codec[V]) *ValueState[K, V] {
	v := &ValueState[K, V]{name: name, setup: s, m: map[K]V{}, codec: DefaultCodec[V]()}
	if len(codec) > 0 && codec[0] != nil {
		v.codec = codec[0]
	}
	s.register(v)
	return v
}

// Get returns the current key's value and whether it was set.
func (v *ValueState[K, V]) Get() (V, bool) {
	x, ok := v.m[*v.setup.cur]
	return x, ok
}

// Set stores the current key's value.
func (v *ValueState[K, V]) Set(x V) { v.m[*v.setup.cur] = x }

// Clear removes the current key's value.
func (v *ValueState[K, V]) Clear() { delete(v.m, *v.setup.cur) }

// Len is the number of keys with a value in this task.
func (v *ValueState[K, V]) Len() int { return len(v.m) }

func (v *ValueState[K, V]) stateName() string { return v.name }

func (v *ValueState[K, V]) appendEntries(groups map[int]*messages.KeyGroupState) error {
	// One allocation for all entries and one arena for all encoded keys and
	// values, rather than three allocations per entry. Values whose codec can
	// alias them (immutable strings) are not copied at all.
	al, _ := v.codec.(aliaser[V])
	slab := make([]messages.StateEntry, len(v.m))
	keys := make([]byte, 0, 8*len(v.m))
	var vals []byte
	i := 0
	for k, x := range v.m {
		e := &slab[i]
		i++
		start := len(keys)
		keys = v.setup.codec.append(keys, k)
		e.Key = keys[start:len(keys):len(keys)]
		if al != nil {
			e.Value = al.alias(x)
		} else {
			start = len(vals)
			var err error
			if vals, err = v.codec.Append(vals, x); err != nil {
				return fmt.Errorf("state %q: %w", v.name, err)
			}
			e.Value = vals[start:len(vals):len(vals)]
		}
		ns := namedState(groupOf(groups, v.setup.keyGroup(k)), v.name)
		ns.Entries = append(ns.Entries, e)
	}
	return nil
}

func (v *ValueState[K, V]) restoreEntry(e *messages.StateEntry) error {
	k, err := v.setup.codec.decode(e.Key)
	if err != nil {
		return err
	}
	x, err := v.codec.Decode(e.Value)
	if err != nil {
		return err
	}
	v.m[k] = x
	return nil
}

// MapState holds a map from UK to V per key.
type MapState[K Key, UK comparable, V any] struct {
	name     string
	setup    *KeyedSetup[K]
	m        map[K]map[UK]V
	keyCodec Codec[UK]
	codec    Codec[V]
}

// MapOf declares a map state called name; codecs default to DefaultCodec.
func MapOf[UK comparable, V any, K Key](s *KeyedSetup[K], name string) *MapState[K, UK, V] {
	ms := &MapState[K, UK, V]{name: name, setup: s, m: map[K]map[UK]V{}, keyCodec: DefaultCodec[UK](), codec: DefaultCodec[V]()}
	s.register(ms)
	return ms
}

// Get returns the current key's value for uk.
func (ms *MapState[K, UK, V]) Get(uk UK) (V, bool) {
	x, ok := ms.m[*ms.setup.cur][uk]
	return x, ok
}

// Put stores the current key's value for uk.
func (ms *MapState[K, UK, V]) Put(uk UK, x V) {
	k := *ms.setup.cur
	inner := ms.m[k]
	if inner == nil {
		inner = map[UK]V{}
		ms.m[k] = inner
	}
	inner[uk] = x
}

// Delete removes uk from the current key's map.
func (ms *MapState[K, UK, V]) Delete(uk UK) {
	k := *ms.setup.cur
	delete(ms.m[k], uk)
	if len(ms.m[k]) == 0 {
		delete(ms.m, k)
	}
}

// Len is the size of the current key's map.
func (ms *MapState[K, UK, V]) Len() int { return len(ms.m[*ms.setup.cur]) }

// All iterates over the current key's map.
func (ms *MapState[K, UK, V]) All(yield func(UK, V) bool) {
	for uk, x := range ms.m[*ms.setup.cur] {
		if !yield(uk, x) {
			return
		}
	}
}

func (ms *MapState[K, UK, V]) stateName() string { return ms.name }

func (ms *MapState[K, UK, V]) appendEntries(groups map[int]*messages.KeyGroupState) error {
	for k, inner := range ms.m {
		ns := namedState(groupOf(groups, ms.setup.keyGroup(k)), ms.name)
		kb := ms.setup.codec.append(nil, k)
		for uk, x := range inner {
			ukb, err := ms.keyCodec.Append(nil, uk)
			if err != nil {
				return fmt.Errorf("state %q: %w", ms.name, err)
			}
			val, err := ms.codec.Append(nil, x)
			if err != nil {
				return fmt.Errorf("state %q: %w", ms.name, err)
			}
			ns.Entries = append(ns.Entries, &messages.StateEntry{Key: kb, MapKey: ukb, Value: val})
		}
	}
	return nil
}

func (ms *MapState[K, UK, V]) restoreEntry(e *messages.StateEntry) error {
	k, err := ms.setup.codec.decode(e.Key)
	if err != nil {
		return err
	}
	uk, err := ms.keyCodec.Decode(e.MapKey)
	if err != nil {
		return err
	}
	x, err := ms.codec.Decode(e.Value)
	if err != nil {
		return err
	}
	cur := ms.setup.cur
	saved := *cur
	*cur = k
	ms.Put(uk, x)
	*cur = saved
	return nil
}

// DecodeValueState reads the value state called name out of a stored task
// state, for inspecting checkpoints. It returns the values by key.
func DecodeValueState[K Key, V any](st *messages.TaskState, name string, codec ...Codec[V]) (map[K]V, error) {
	kc := newKeyCodec[K]()
	vc := DefaultCodec[V]()
	if len(codec) > 0 && codec[0] != nil {
		vc = codec[0]
	}
	out := map[K]V{}
	for _, g := range st.GetKeyGroups() {
		for _, ns := range g.States {
			if ns.Name != name {
				continue
			}
			for _, e := range ns.Entries {
				k, err := kc.decode(e.Key)
				if err != nil {
					return nil, err
				}
				v, err := vc.Decode(e.Value)
				if err != nil {
					return nil, err
				}
				out[k] = v
			}
		}
	}
	return out, nil
}
