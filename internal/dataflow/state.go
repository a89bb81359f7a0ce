package dataflow

import (
	"fmt"
	"reflect"

	"github.com/snapflow/snapflow/messages"
)

// KeyedSetup is given to a Process operator's setup function once per task
// (and again after every restore) to declare keyed state.
type KeyedSetup[K Key] struct {
	task    *TaskPlan
	cur     *current[K]
	codec   keyCodec[K]
	keyType string // typeName of K, recorded in state descriptors
	maxP    uint64
	keyHash keyHash
	states  []keyedState
	err     error
	// dirty is the set of key groups written since the last
	// TakeDirtyKeyGroups (see markDirty), by absolute key-group number.
	dirty groupSet
	// untracked: the runtime never asks for dirty key groups
	// (InstanceContext.SkipDirtyKeyGroups); nothing is hashed, and
	// takeDirty reports every key group.
	untracked bool
	// byName is the declared states by name, set once Restore has checked
	// a checkpoint's descriptors: key groups may be restored from then on.
	byName map[string]keyedState
	// onTimer is the TimerFunc[K, O] declared by OnTimer, and timers the
	// pending timers; both nil when the operator declared none.
	onTimer any
	timers  *timerState[K]
	// disk is the on-disk backend; nil: the state is on the heap.
	disk *diskKeyed
	// sealed is set once setup has returned: WithTTL may no longer be
	// called. ttl says that some state has a time-to-live; now is then the
	// processing time its expiries are judged at, read from clock once
	// per batch, timer run, snapshot and restore (see tick).
	sealed bool
	ttl    bool
	now    int64
	clock  func() int64
	// ttlStates are the states with a time-to-live, for the incremental
	// clean-up.
	ttlStates []ttlState
	// storedTTL is, during a restore, the time-to-live each state had in
	// the checkpoint, by name (absent: none; see ttl_restore.go).
	storedTTL map[string]int64
}

func newKeyedSetup[K Key](task *TaskPlan, codec keyCodec[K]) *KeyedSetup[K] {
	maxP := max(1, task.maxParallelism())
	return &KeyedSetup[K]{
		task: task, codec: codec, keyType: typeName(reflect.TypeFor[K]()), maxP: uint64(maxP), keyHash: keyHashOf[K](codec),
		cur: isolated[current[K]](), dirty: isolatedSlice[uint64](KeyGroupWords(maxP)), // written per record
	}
}

// TaskID is the id of the task being set up, e.g. "sum#1".
func (s *KeyedSetup[K]) TaskID() string { return s.task.ID }

// Subtask is the index of the task among its operator's tasks.
func (s *KeyedSetup[K]) Subtask() int { return s.task.Subtask }

// fail records a declaration problem; the setup fails with all of them,
// in one error.
func (s *KeyedSetup[K]) fail(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if s.err != nil {
		msg = s.err.Error() + "; " + msg
	}
	s.err = &stateError{msg: msg, sentinel: ErrInvalidState}
}

// checkDefault refuses, for state name, a type that the default codec
// cannot round-trip; subject names the type's role ("type", "value type").
func (s *KeyedSetup[K]) checkDefault(name, subject string, t reflect.Type, orCodec string) {
	if p := checkDefaultCodec(t); p != nil {
		s.fail("state %q: %s %s: %s", name, subject, typeName(t), p.message(orCodec))
	}
}

func (s *KeyedSetup[K]) register(st keyedState) {
	name := st.descriptor().GetName()
	for _, o := range s.states {
		if o.descriptor().GetName() == name {
			s.fail("state %q declared twice", name)
		}
	}
	if name == "" {
		s.fail("state with an empty name")
	}
	if _, runtime := st.(*timerState[K]); reservedName(name) && !runtime {
		s.fail("state %q: names that start with %q are the runtime's", name, reservedPrefix)
	}
	s.states = append(s.states, st)
}

// descriptors returns the descriptors of the declared states, in order.
func (s *KeyedSetup[K]) descriptors() []*messages.StateDescriptor {
	out := make([]*messages.StateDescriptor, len(s.states))
	for i, ks := range s.states {
		out[i] = copyDescriptor(ks.descriptor())
	}
	return out
}

func (s *KeyedSetup[K]) keyGroup(k K) int { return int(s.codec.hash(k) % s.maxP) }

// keyedState is the type-erased view of one declared state.
type keyedState interface {
	descriptor() *messages.StateDescriptor
	// appendEntries adds the state's entries of the key groups b selects
	// to b.
	appendEntries(b *snapshotBuilder) error
	// restoreEntry loads one entry of key group kg, without marking its
	// key group dirty.
	restoreEntry(kg int, e *messages.StateEntry) error
}

// snapshotKeyed serialises every declared state into st, by key group (all
// of them, or those of only when only is not nil), and the descriptor of
// every declared state, in declaration order.
func (s *KeyedSetup[K]) snapshotKeyed(st *messages.TaskState, only groupSet) error {
	finish, err := s.snapshotKeyedAsync(st, only)
	if err != nil {
		return err
	}
	return finish()
}

// snapshotKeyedAsync is snapshotKeyed in two parts: it copies the heap
// states and takes a snapshot of the on-disk ones, and finish (called
// once, from any goroutine) adds the on-disk states' entries and completes
// st. The task may go on writing state in between.
func (s *KeyedSetup[K]) snapshotKeyedAsync(st *messages.TaskState, only groupSet) (finish func() error, err error) {
	b, err := s.snapshotHeap(only)
	if err != nil {
		return nil, err
	}
	descs := s.descriptors()
	done := func() error {
		b.appendTo(st)
		st.StateDescriptors = append(st.StateDescriptors, descs...)
		return nil
	}
	if s.disk == nil || s.disk.db == nil {
		return done, nil
	}
	d, maxP, op := s.disk, int(s.maxP), s.task.Operator
	snap, err := d.db.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("topology: operator %q: %w", op, err)
	}
	return func() error {
		defer snap.Close()
		if err := d.snapshotDisk(b, snap, maxP); err != nil {
			return fmt.Errorf("topology: operator %q: %w", op, err)
		}
		return done()
	}, nil
}

// snapshotHeap writes the pending entries of the on-disk states to their
// database and returns a builder holding the entries of the heap states
// (every state, on the heap backend) of the key groups only selects.
func (s *KeyedSetup[K]) snapshotHeap(only groupSet) (*snapshotBuilder, error) {
	s.tick()
	if err := s.flushState(); err != nil {
		return nil, err
	}
	b := newSnapshotBuilder(s.task, only)
	b.now = s.now
	for _, ks := range s.states {
		if _, onDisk := ks.(diskState); onDisk && s.disk != nil {
			continue
		}
		if err := ks.appendEntries(b); err != nil {
			return nil, fmt.Errorf("topology: operator %q: %w", s.task.Operator, err)
		}
	}
	return b, nil
}

// restoreKeyed checks st's state descriptors against the declared states,
// then loads the entries of the task's key groups from st. It forgets the
// key groups written so far (none, on a new instance): the state is now
// the checkpoint's.
func (s *KeyedSetup[K]) restoreKeyed(st *messages.TaskState) error {
	byName := make(map[string]keyedState, len(s.states))
	declared := make([]*messages.StateDescriptor, len(s.states))
	for i, ks := range s.states {
		byName[ks.descriptor().GetName()] = ks
		declared[i] = ks.descriptor()
	}
	if err := CompareStateDescriptors(s.task.Operator, st.GetStateDescriptors(), declared); err != nil {
		return err
	}
	s.rememberStoredTTLs(st.GetStateDescriptors())
	s.tickRestore()
	s.byName = byName
	clear(s.dirty)
	for _, g := range st.GetKeyGroups() {
		if err := s.restoreGroup(g); err != nil {
			return err
		}
	}
	return s.applyRestored()
}

// applyRestored writes what a restore gave the on-disk states.
func (s *KeyedSetup[K]) applyRestored() error {
	if s.disk == nil || s.disk.db == nil {
		return nil
	}
	if err := s.disk.db.Apply(s.disk.batch); err != nil {
		return fmt.Errorf("topology: operator %q: restore: %w", s.task.Operator, err)
	}
	return nil
}

// restoreKeyGroup loads one more key group after restoreKeyed.
func (s *KeyedSetup[K]) restoreKeyGroup(g *messages.KeyGroupState) error {
	if s.byName == nil {
		return &stateError{
			msg: fmt.Sprintf("topology: operator %q: key group %d given before Restore checked the checkpoint's state descriptors",
				s.task.Operator, g.GetKeyGroup()),
			sentinel: ErrRestoreRefused,
		}
	}
	s.tickRestore()
	if err := s.restoreGroup(g); err != nil {
		return err
	}
	return s.applyRestored()
}

// restoreGroup loads the entries of g when g is in the task's range.
func (s *KeyedSetup[K]) restoreGroup(g *messages.KeyGroupState) error {
	if int(g.GetKeyGroup()) < s.task.KeyGroupStart || int(g.GetKeyGroup()) >= s.task.KeyGroupEnd {
		return nil
	}
	for _, ns := range g.GetStates() {
		ks := s.byName[ns.GetName()]
		if ks == nil {
			return &stateError{
				msg: fmt.Sprintf("topology: operator %q: the checkpoint holds state %q, which the operator does not declare (its entries would be lost)",
					s.task.Operator, ns.GetName()),
				sentinel: ErrIncompatibleState,
			}
		}
		if err := s.restoreNamed(ks, int(g.GetKeyGroup()), ns); err != nil {
			return fmt.Errorf("topology: operator %q: state %q: key group %d: %w", s.task.Operator, ns.GetName(), g.GetKeyGroup(), err)
		}
	}
	return nil
}

// ValueState holds one value per key. Get and Set act on the key of the record
// being processed.
type ValueState[K Key, V any] struct {
	name  string
	setup *KeyedSetup[K]
	cur   *current[K]     // setup.cur: the key of the record being processed
	m     *keyTable[K, V] // on the heap; nil on disk
	codec Codec[V]
	desc  *messages.StateDescriptor
	// readMarks: V reaches a reference, so Get marks the key group dirty.
	readMarks bool
	// d is the state's on-disk part (nil: the state is on the heap).
	d *diskValue[K, V]
	// ttl is the time-to-live in nanoseconds (0: none), and written the
	// time each key was last written, on the heap.
	ttl     int64
	written map[K]int64
}

// Value declares a value state called name. The codec defaults to
// DefaultCodec[V].
//
// The default codec stores booleans, numbers and strings in binary, and
// other types as JSON. Value refuses (the setup fails with an error wrapping
// ErrInvalidState, naming the state and the field) a type that JSON cannot
// store exactly: unexported fields and fields tagged `json:"-"`, interface
// types (JSON would restore numbers as float64), channels, functions,
// complex numbers, pointers to pointers, map keys that are not strings,
// integers or TextMarshaler and TextUnmarshaler, maps tagged omitempty,
// fields hidden by other fields of the same JSON name, json.Number (its
// empty value comes back as 0), types with only one side of
// MarshalJSON/UnmarshalJSON or MarshalText/UnmarshalText, and structs that
// embed a type with such methods next to other fields (the promoted method
// would encode only the embedded value). Types with both methods of a pair,
// such as time.Time, are trusted. An empty slice tagged omitempty comes back
// nil. Pass a codec (JSONCodec[V]{} to keep JSON anyway) to store a refused
// type. At snapshot time the JSON codec also refuses strings that are not
// valid UTF-8, and NaN or infinite floats, failing the checkpoint rather than
// storing a changed value.
//
// The state's descriptor (name, types and codec id; see IdentifiedCodec) is
// recorded in every snapshot, and a restore into a different declaration is
// refused with ErrIncompatibleState.
//
// Incremental checkpoints store only the key groups written since the
// last checkpoint: Set and Clear mark the current key's key group written.
// A value of a type that reaches a reference (a pointer, slice, map,
// interface, function or channel, at any depth of its structs and arrays;
// strings do not count) can be changed in place after Get without Set, so
// for such a V, Get of a set value marks the key group too, as a write.
// Prefer V without references for states read far more often than
// written: their reads cost nothing in checkpoints. A value must not be
// changed through a reference kept from an earlier record (a slice passed
// to Set and kept in a variable): only what a record does through the
// state is seen, and a checkpoint would miss the change.
func Value[V any, K Key](s *KeyedSetup[K], name string, codec ...Codec[V]) *ValueState[K, V] {
	// Read per record: on cache lines of its own (see isolated).
	v := isolated[ValueState[K, V]]()
	*v = ValueState[K, V]{name: name, setup: s, cur: s.cur, m: newKeyTable[K, V](s.codec), readMarks: reachesReference(reflect.TypeFor[V]())}
	switch {
	case len(codec) > 1:
		s.fail("state %q: %d codecs given to Value, want at most one", name, len(codec))
		v.codec = codec[0]
	case len(codec) == 1 && codec[0] != nil:
		v.codec = codec[0]
	default:
		v.codec = DefaultCodec[V]()
		s.checkDefault(name, "type", reflect.TypeFor[V](), "pass a codec to Value")
	}
	v.desc = &messages.StateDescriptor{
		Name: name, Kind: kindValue, KeyType: s.keyType,
		ValueType: typeName(reflect.TypeFor[V]()), ValueCodec: codecID(v.codec),
	}
	s.register(v)
	if s.disk != nil {
		v.m = nil
		v.d = newDiskValue[K, V](decodeCopies(v.codec), !v.readMarks)
		v.d.sid = s.addDiskState(v)
		if !v.readMarks {
			s.disk.keepers = append(s.disk.keepers, v.d)
		}
	}
	return v
}

// Get returns the current key's value and whether it was set. When V
// reaches a reference (see Value), Get of a set value counts as a write.
func (v *ValueState[K, V]) Get() (V, bool) {
	if v.d != nil {
		return v.diskGet()
	}
	k := v.cur.key
	p, i, ok := v.m.find(k)
	if !ok || (v.ttl > 0 && v.expire(k)) {
		var zero V
		return zero, false
	}
	if v.readMarks {
		v.setup.markDirty()
	}
	return p.slots[i].v, true
}

// Set stores the current key's value.
func (v *ValueState[K, V]) Set(x V) {
	// A Set of the key the record's Get just found writes its slot
	// without another lookup (see keyTable).
	if t := v.m; t != nil && v.ttl == 0 && t.lastGen == t.gen && t.lastFound && t.lastKey == v.cur.key {
		t.lastPart.slots[t.lastSlot].v = x
		v.cur.wrote = true // markDirty
		return
	}
	v.set(x)
}

func (v *ValueState[K, V]) set(x V) {
	if v.d != nil {
		v.diskSet(x, false)
		return
	}
	k := v.cur.key
	v.m.set(k, x)
	if v.ttl > 0 {
		v.written[k] = v.setup.now
	}
	v.cur.wrote = true // markDirty
}

// Clear removes the current key's value.
func (v *ValueState[K, V]) Clear() {
	if v.d != nil {
		var zero V
		v.diskSet(zero, true)
		return
	}
	v.m.remove(v.setup.cur.key)
	if v.ttl > 0 {
		delete(v.written, v.setup.cur.key)
	}
	v.setup.markDirty()
}

// Len is the number of keys with a value in this task. On the on-disk
// state backend it reads the whole state.
func (v *ValueState[K, V]) Len() int {
	if v.d != nil {
		return v.diskLen()
	}
	if v.ttl > 0 {
		return v.liveLen()
	}
	return v.m.len()
}

func (v *ValueState[K, V]) descriptor() *messages.StateDescriptor { return v.desc }

func (v *ValueState[K, V]) appendEntries(b *snapshotBuilder) error {
	// A few allocations for all entries and one arena for all encoded keys
	// and values, rather than three allocations per entry. Values whose
	// codec can alias them (immutable strings) are not copied at all. The
	// keys of unselected key groups are hashed, not encoded.
	al, _ := v.codec.(aliaser[V])
	n := b.estimate(v.m.len())
	slab := newEntrySlab(n)
	keys := make([]byte, 0, 8*n)
	var vals []byte
	var expired []K
	defer func() { // the table must not change while it is walked
		for _, k := range expired {
			v.m.remove(k)
		}
	}()
	for k, x := range v.m.all() {
		kg := v.setup.keyGroup(k)
		if !b.selected(kg) {
			continue
		}
		var written int64
		if v.ttl > 0 {
			if written = v.written[k]; b.now-written >= v.ttl {
				expired = append(expired, k) // cleaned up, and not stored
				delete(v.written, k)
				continue
			}
		}
		e := slab.take()
		e.WrittenAt = written
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
		ns := b.named(kg, v.name)
		ns.Entries = append(ns.Entries, e)
	}
	return nil
}

func (v *ValueState[K, V]) restoreEntry(kg int, e *messages.StateEntry) error {
	if v.d != nil {
		return v.restoreDisk(kg, e)
	}
	k, err := v.setup.codec.decode(e.Key)
	if err != nil {
		return err
	}
	x, err := v.codec.Decode(e.Value)
	if err != nil {
		return err
	}
	if v.ttl > 0 {
		written, live := v.setup.restoredWrite(v.ttl, e)
		if !live {
			return nil
		}
		v.written[k] = written
	}
	v.m.set(k, x)
	return nil
}

// MapState holds a map from UK to V per key.
type MapState[K Key, UK comparable, V any] struct {
	name     string
	setup    *KeyedSetup[K]
	m        map[K]map[UK]V
	keyCodec Codec[UK]
	codec    Codec[V]
	desc     *messages.StateDescriptor
	// readMarks: UK or V reaches a reference, so Get and All mark the key
	// group dirty.
	readMarks bool
	// d is the state's on-disk part (nil: the state is on the heap).
	d *diskMap[K, UK, V]
	// ttl is the time-to-live in nanoseconds (0: none), and written the
	// time each user key was last written, by key, on the heap.
	ttl     int64
	written map[K]map[UK]int64
}

// MapOption configures a map state (see MapOf and DecodeMapState). Build it
// with MapCodecs.
type MapOption[UK comparable, V any] struct {
	key   Codec[UK]
	value Codec[V]
}

// MapCodecs chooses the codecs of a map state's user keys and values. A nil
// codec means DefaultCodec, checked as Value checks it; the type arguments
// are inferred from the codecs, e.g. MapCodecs(keyCodec, valueCodec), or
// given when one is nil: MapCodecs[string](nil, valueCodec).
func MapCodecs[UK comparable, V any](key Codec[UK], value Codec[V]) MapOption[UK, V] {
	return MapOption[UK, V]{key: key, value: value}
}

// resolveMapCodecs returns the codecs to use, each the default unless
// given, and whether each was given.
func resolveMapCodecs[UK comparable, V any](opts []MapOption[UK, V]) (kc Codec[UK], vc Codec[V], kGiven, vGiven bool) {
	kc, vc = DefaultCodec[UK](), DefaultCodec[V]()
	for _, o := range opts {
		if o.key != nil {
			kc, kGiven = o.key, true
		}
		if o.value != nil {
			vc, vGiven = o.value, true
		}
	}
	return kc, vc, kGiven, vGiven
}

// MapOf declares a map state called name. Its codecs default to DefaultCodec
// and are checked as Value checks them; pass MapCodecs to choose others,
// for example
//
//	last := topology.MapOf(s, "last", topology.MapCodecs[string](nil, lastCodec))
//
// The state's descriptor (name, types and codec ids) is recorded in every
// snapshot, and a restore into a different declaration is refused with
// ErrIncompatibleState.
//
// For incremental checkpoints, Put and Delete mark the current key's key
// group written. When UK or V reaches a reference (see Value), the user
// keys and values Get and All hand out can be changed in place, so Get of
// a present user key, and All over a non-empty map, mark the key group too,
// as writes. Len never does.
func MapOf[UK comparable, V any, K Key](s *KeyedSetup[K], name string, opts ...MapOption[UK, V]) *MapState[K, UK, V] {
	kc, vc, kGiven, vGiven := resolveMapCodecs(opts)
	if len(opts) > 1 {
		s.fail("state %q: %d MapOptions given to MapOf, want at most one", name, len(opts))
	}
	if !kGiven {
		s.checkDefault(name, "map key type", reflect.TypeFor[UK](), "pass a key codec to MapOf (MapCodecs)")
	}
	if !vGiven {
		s.checkDefault(name, "value type", reflect.TypeFor[V](), "pass a value codec to MapOf (MapCodecs)")
	}
	ms := &MapState[K, UK, V]{name: name, setup: s, m: map[K]map[UK]V{}, keyCodec: kc, codec: vc,
		readMarks: reachesReference(reflect.TypeFor[UK]()) || reachesReference(reflect.TypeFor[V]())}
	ms.desc = mapDescriptor(name, s.keyType, kc, vc)
	s.register(ms)
	if s.disk != nil {
		ms.m = nil
		ms.d = &diskMap[K, UK, V]{copies: decodeCopies(vc), keyCopies: decodeCopies(kc), pend: map[K]*pendMap[K, UK, V]{}}
		ms.d.sid = s.addDiskState(ms)
	}
	return ms
}

func mapDescriptor[UK comparable, V any](name, keyType string, kc Codec[UK], vc Codec[V]) *messages.StateDescriptor {
	return &messages.StateDescriptor{
		Name: name, Kind: kindMap, KeyType: keyType,
		MapKeyType: typeName(reflect.TypeFor[UK]()), MapKeyCodec: codecID(kc),
		ValueType: typeName(reflect.TypeFor[V]()), ValueCodec: codecID(vc),
	}
}

// Get returns the current key's value for uk. When UK or V reaches a
// reference (see MapOf), Get of a present user key counts as a write.
func (ms *MapState[K, UK, V]) Get(uk UK) (V, bool) {
	if ms.d != nil {
		return ms.diskGet(uk)
	}
	x, ok := ms.m[ms.setup.cur.key][uk]
	if ok && ms.ttl > 0 && ms.expire(ms.setup.cur.key, uk) {
		var zero V
		return zero, false
	}
	if ok && ms.readMarks {
		ms.setup.markDirty()
	}
	return x, ok
}

// Put stores the current key's value for uk.
func (ms *MapState[K, UK, V]) Put(uk UK, x V) {
	if ms.d != nil {
		ms.diskPut(uk, x, false)
		return
	}
	ms.put(ms.setup.cur.key, uk, x)
	if ms.ttl > 0 {
		ms.setWritten(ms.setup.cur.key, uk, ms.setup.now)
	}
	ms.setup.markDirty()
}

// put stores k's value for uk.
func (ms *MapState[K, UK, V]) put(k K, uk UK, x V) {
	inner := ms.m[k]
	if inner == nil {
		inner = map[UK]V{}
		ms.m[k] = inner
	}
	inner[uk] = x
}

// Delete removes uk from the current key's map.
func (ms *MapState[K, UK, V]) Delete(uk UK) {
	if ms.d != nil {
		var zero V
		ms.diskPut(uk, zero, true)
		return
	}
	k := ms.setup.cur.key
	inner := ms.m[k]
	if inner == nil {
		return // nothing changes
	}
	delete(inner, uk)
	if len(inner) == 0 {
		delete(ms.m, k)
	}
	if ms.ttl > 0 {
		ms.dropWritten(k, uk)
	}
	ms.setup.markDirty()
}

// Len is the size of the current key's map. On the on-disk state backend
// it reads the key's map.
func (ms *MapState[K, UK, V]) Len() int {
	if ms.d != nil {
		return ms.diskLen()
	}
	if ms.ttl > 0 {
		return ms.liveLen()
	}
	return len(ms.m[ms.setup.cur.key])
}

// All iterates over the current key's map: on the heap in Go's map order,
// on the on-disk state backend in the order of the user keys' encoded
// bytes. As with a Go map, the function may Put and Delete during the
// iteration; an entry deleted before it is reached is not produced. When
// UK or V reaches a reference (see MapOf), All over a non-empty map counts
// as a write.
func (ms *MapState[K, UK, V]) All(yield func(UK, V) bool) {
	if ms.d != nil {
		ms.diskAll(yield)
		return
	}
	inner := ms.m[ms.setup.cur.key]
	if len(inner) > 0 && ms.readMarks {
		ms.setup.markDirty()
	}
	for uk, x := range inner {
		if ms.ttl > 0 && ms.expire(ms.setup.cur.key, uk) {
			continue
		}
		if !yield(uk, x) {
			return
		}
	}
}

func (ms *MapState[K, UK, V]) descriptor() *messages.StateDescriptor { return ms.desc }

func (ms *MapState[K, UK, V]) appendEntries(b *snapshotBuilder) error {
	// Entries come from a slab and their bytes from one arena, as in
	// ValueState; the keys of unselected key groups are hashed, not encoded.
	slab := newEntrySlab(b.estimate(len(ms.m)))
	var arena []byte
	for k, inner := range ms.m {
		kg := ms.setup.keyGroup(k)
		if !b.selected(kg) {
			continue
		}
		ns := b.named(kg, ms.name)
		start := len(arena)
		arena = ms.setup.codec.append(arena, k)
		kb := arena[start:len(arena):len(arena)]
		for uk, x := range inner {
			var written int64
			if ms.ttl > 0 {
				if written = ms.written[k][uk]; b.now-written >= ms.ttl {
					delete(inner, uk) // expired: cleaned up, and not stored
					ms.dropWritten(k, uk)
					continue
				}
			}
			var err error
			start = len(arena)
			if arena, err = ms.keyCodec.Append(arena, uk); err != nil {
				return fmt.Errorf("state %q: %w", ms.name, err)
			}
			ukb := arena[start:len(arena):len(arena)]
			start = len(arena)
			if arena, err = ms.codec.Append(arena, x); err != nil {
				return fmt.Errorf("state %q: %w", ms.name, err)
			}
			e := slab.take()
			e.Key, e.MapKey, e.Value, e.WrittenAt = kb, ukb, arena[start:len(arena):len(arena)], written
			ns.Entries = append(ns.Entries, e)
		}
		if len(inner) == 0 { // every entry expired
			delete(ms.m, k)
		}
	}
	return nil
}

func (ms *MapState[K, UK, V]) restoreEntry(kg int, e *messages.StateEntry) error {
	if ms.d != nil {
		return ms.restoreDisk(kg, e)
	}
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
	if ms.ttl > 0 {
		written, live := ms.setup.restoredWrite(ms.ttl, e)
		if !live {
			return nil
		}
		ms.setWritten(k, uk, written)
	}
	ms.put(k, uk, x)
	return nil
}
