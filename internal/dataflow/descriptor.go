package dataflow

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// ErrIncompatibleState is wrapped by the errors that refuse to restore or
// decode stored keyed state into a declaration it does not match: another
// kind, key type, value type or codec, or a state no longer declared.
var ErrIncompatibleState = errors.New("topology: incompatible state")

// ErrDiskStateNotExpanded is wrapped by the errors of decoding a state
// that a checkpoint holds as the files of an on-disk database (see
// ExpandDiskState).
var ErrDiskStateNotExpanded = errors.New("topology: on-disk state not read from its files")

// ErrInvalidState is wrapped by the errors of a keyed operator's setup
// function: a state declared twice or without a name, a type the default
// codec cannot store exactly, a nil process function, or a panic.
var ErrInvalidState = errors.New("topology: invalid state declaration")

// stateError is an error with its own message that matches a sentinel (and
// optionally a cause) with errors.Is, without repeating their text.
type stateError struct {
	msg      string
	sentinel error
	cause    error
}

func (e *stateError) Error() string { return e.msg }

// Unwrap returns the sentinel and the cause.
func (e *stateError) Unwrap() []error {
	if e.cause == nil {
		return []error{e.sentinel}
	}
	return []error{e.sentinel, e.cause}
}

// State kinds recorded in StateDescriptor.Kind.
const (
	kindValue = "value"
	kindMap   = "map"
)

// typeName names t in state descriptors: the package path and name of a
// named type ("main.counter", "github.com/x/y.T", "int64"), composed for
// pointers, slices, arrays and maps of them ("[]github.com/x/y.T"), and
// reflect's String otherwise. Stored descriptors are compared with these
// names, so the naming is part of the checkpoint format.
func typeName(t reflect.Type) string {
	if t == nil {
		return "nil"
	}
	if t.Name() != "" {
		if t.PkgPath() != "" {
			return t.PkgPath() + "." + t.Name()
		}
		return t.Name()
	}
	switch t.Kind() {
	case reflect.Pointer:
		return "*" + typeName(t.Elem())
	case reflect.Slice:
		return "[]" + typeName(t.Elem())
	case reflect.Array:
		return fmt.Sprintf("[%d]%s", t.Len(), typeName(t.Elem()))
	case reflect.Map:
		return "map[" + typeName(t.Key()) + "]" + typeName(t.Elem())
	}
	return t.String()
}

// copyDescriptor returns a copy of d, so that every snapshot owns its
// descriptors. The time-to-live is copied too: a restore judges the
// entries it loads by the one they were checkpointed under (see
// ttl_restore.go).
func copyDescriptor(d *messages.StateDescriptor) *messages.StateDescriptor {
	return &messages.StateDescriptor{
		Name: d.GetName(), Kind: d.GetKind(), KeyType: d.GetKeyType(),
		MapKeyType: d.GetMapKeyType(), MapKeyCodec: d.GetMapKeyCodec(),
		ValueType: d.GetValueType(), ValueCodec: d.GetValueCodec(),
		TtlNanos: d.GetTtlNanos(),
	}
}

// CompareStateDescriptors checks the state descriptors stored in a
// checkpoint for operator against the ones its setup declares now (see
// Plan.DeclaredStates). It returns nil, or an error wrapping
// ErrIncompatibleState that lists every stored state whose kind, key type,
// map key type or codec, or value type or codec changed, and every stored
// state that is no longer declared. A declared state that the checkpoint
// lacks is compatible: it starts empty. A checkpoint without descriptors
// (taken before they were recorded) is accepted.
func CompareStateDescriptors(operator string, stored, declared []*messages.StateDescriptor) error {
	if len(stored) == 0 {
		return nil
	}
	byName := make(map[string]*messages.StateDescriptor, len(declared))
	for _, d := range declared {
		byName[d.GetName()] = d
	}
	var diffs []string
	for _, old := range stored {
		cur, ok := byName[old.GetName()]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("state %q (%s) is in the checkpoint but no longer declared, and its entries would be lost",
				old.GetName(), summarize(old)))
			continue
		}
		if d := descriptorDiff(old, cur, changedFrom); d != "" {
			diffs = append(diffs, fmt.Sprintf("state %q: %s", old.GetName(), d))
		}
	}
	if len(diffs) == 0 {
		return nil
	}
	return &stateError{
		msg: fmt.Sprintf("topology: operator %q: the checkpoint's keyed state does not match the declared state: %s; "+
			"restore with the old declaration, or give a changed state a new name (it then starts empty)",
			operator, strings.Join(diffs, "; ")),
		sentinel: ErrIncompatibleState,
	}
}

// summarize summarises a descriptor, e.g. "value int64 (snapflow.fixed8)".
func summarize(d *messages.StateDescriptor) string {
	if d.GetKind() == kindMap {
		return fmt.Sprintf("map %s (%s) -> %s (%s)", d.GetMapKeyType(), d.GetMapKeyCodec(), d.GetValueType(), d.GetValueCodec())
	}
	return fmt.Sprintf("%s %s (%s)", d.GetKind(), d.GetValueType(), d.GetValueCodec())
}

// Formats of descriptorDiff: what, the stored and the other value.
const (
	changedFrom = "%s changed from %s to %s"
	storedNot   = "%s is %s, not %s"
)

// descriptorDiff says, in format, what differs from old to cur, or "".
func descriptorDiff(old, cur *messages.StateDescriptor, format string) string {
	var out []string
	change := func(what, was, is string) {
		if was != is {
			out = append(out, fmt.Sprintf(format, what, orNone(was), orNone(is)))
		}
	}
	change("kind", old.GetKind(), cur.GetKind())
	change("key type", old.GetKeyType(), cur.GetKeyType())
	change("map key type", old.GetMapKeyType(), cur.GetMapKeyType())
	change("map key codec", old.GetMapKeyCodec(), cur.GetMapKeyCodec())
	change("value type", old.GetValueType(), cur.GetValueType())
	change("value codec", old.GetValueCodec(), cur.GetValueCodec())
	return strings.Join(out, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// checkDecoding refuses to decode state want.Name of st as want when st's
// descriptor of that state records another kind or type. The codecs are
// the caller's choice and are not compared: a tool may read a state with
// another codec of the same encoding.
func checkDecoding(st *messages.TaskState, want *messages.StateDescriptor) error {
	if slices.Contains(st.GetDiskStates(), want.GetName()) {
		return &stateError{
			msg: fmt.Sprintf("topology: task %s: state %q is stored as the files of an on-disk database, not in the task's state: "+
				"read them into it first (topology.ExpandDiskState)", orNone(st.GetTaskId()), want.GetName()),
			sentinel: ErrDiskStateNotExpanded,
		}
	}
	for _, d := range st.GetStateDescriptors() {
		if d.GetName() != want.GetName() {
			continue
		}
		want = copyDescriptor(want)
		want.MapKeyCodec, want.ValueCodec = d.GetMapKeyCodec(), d.GetValueCodec()
		if diff := descriptorDiff(d, want, storedNot); diff != "" {
			return &stateError{
				msg: fmt.Sprintf("topology: task %s: state %q cannot be decoded as asked: its %s",
					orNone(st.GetTaskId()), d.GetName(), diff),
				sentinel: ErrIncompatibleState,
			}
		}
		return nil
	}
	return nil
}
