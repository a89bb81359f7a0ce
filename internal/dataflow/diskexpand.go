package dataflow

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// ExpandDiskState reads the on-disk states of st, which d (its handle's
// DiskCheckpoint) stores as database files, into st's key groups, in the
// format the heap backend stores them in, and clears st.DiskStates: st
// can then be decoded (DecodeValueState, DecodeMapState) like any other.
// read reads one file's bytes, checked; the files are put in a new
// directory under tmp ("" for the system's), removed on return. Expired
// entries of a state with a time-to-live stay, with their write times.
func ExpandDiskState(ctx context.Context, st *messages.TaskState, d *messages.DiskCheckpoint, tmp string, read func(context.Context, *messages.StateFile) ([]byte, error)) error {
	if d == nil || len(st.GetDiskStates()) == 0 {
		return nil
	}
	task := orNone(st.GetTaskId())
	kinds := map[string]string{}
	for _, desc := range st.GetStateDescriptors() {
		kinds[desc.GetName()] = desc.GetKind()
	}
	type named struct {
		name         string
		isMap, timed bool
	}
	ids := map[uint16]named{}
	for _, id := range d.GetStates() {
		kind, ok := kinds[id.GetName()]
		if !ok || (kind != kindValue && kind != kindMap) || id.GetId() > 0xffff {
			return fmt.Errorf("topology: task %s: the on-disk state %q (id %d) has no value or map descriptor", task, id.GetName(), id.GetId())
		}
		ids[uint16(id.GetId())] = named{id.GetName(), kind == kindMap, id.GetTimed()}
	}
	dir, err := os.MkdirTemp(tmp, "snapflow-expand-")
	if err != nil {
		return fmt.Errorf("topology: task %s: %w", task, err)
	}
	defer os.RemoveAll(dir)
	for _, f := range d.GetFiles() {
		if filepath.Base(f.GetName()) != f.GetName() {
			return fmt.Errorf("topology: task %s: state file name %q", task, f.GetName())
		}
		data, err := read(ctx, f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, f.GetName()), data, 0o644); err != nil {
			return fmt.Errorf("topology: task %s: %w", task, err)
		}
	}
	r, err := diskstate.OpenReader(dir)
	if err != nil {
		return fmt.Errorf("topology: task %s: %w", task, err)
	}
	defer r.Close()
	groups := map[int]*messages.KeyGroupState{}
	for _, g := range st.GetKeyGroups() {
		groups[int(g.GetKeyGroup())] = g
	}
	states := map[[2]int]*messages.NamedState{} // by key group and state id
	err = r.Scan(nil, nil, func(key, value []byte) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		kg, sid, rest, ok := diskstate.Split(key)
		n, known := ids[sid]
		if !ok || !known {
			return fmt.Errorf("a stored key of %d bytes names state id %d, which the checkpoint does not list", len(key), sid)
		}
		e := &messages.StateEntry{}
		if n.timed {
			w, v, ok := splitWritten(value)
			if !ok {
				return fmt.Errorf("state %q: a stored value of %d bytes has no write time", n.name, len(value))
			}
			e.WrittenAt, value = w, v
		}
		e.Value = slices.Clone(value)
		if n.isMap {
			k, uk, ok := diskstate.SplitMap(rest)
			if !ok {
				return fmt.Errorf("state %q: a stored key of key group %d does not parse", n.name, kg)
			}
			e.Key, e.MapKey = slices.Clone(k), slices.Clone(uk)
		} else {
			e.Key = slices.Clone(rest)
		}
		ns := states[[2]int{kg, int(sid)}]
		if ns == nil {
			g := groups[kg]
			if g == nil {
				g = &messages.KeyGroupState{KeyGroup: uint32(kg)}
				groups[kg] = g
				st.KeyGroups = append(st.KeyGroups, g)
			}
			ns = &messages.NamedState{Name: n.name}
			g.States = append(g.States, ns)
			states[[2]int{kg, int(sid)}] = ns
		}
		ns.Entries = append(ns.Entries, e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("topology: task %s: read the on-disk state: %w", task, err)
	}
	slices.SortFunc(st.KeyGroups, func(a, b *messages.KeyGroupState) int { return int(a.GetKeyGroup()) - int(b.GetKeyGroup()) })
	st.DiskStates = nil
	return nil
}
