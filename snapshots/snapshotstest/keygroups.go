package snapshotstest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

var keyGroupTests = []test{
	{"RangeReads", testRangeReads},
	{"ReadKeyGroups", testReadKeyGroups},
	{"ReadKeyGroupsCorrupt", testReadKeyGroupsCorrupt},
}

// testRangeReads: a store that reads ranges returns exactly the bytes asked
// for, ErrNotFound for a missing object and ErrCorrupt past its end.
func testRangeReads(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	r, ok := s.(snapshots.RangeReader)
	if !ok {
		t.Skipf("%s reads whole objects only (Checkpoints slices them)", s)
	}
	ctx := context.Background()
	data := []byte("0123456789abcdef")
	if err := s.Put(ctx, "job/obj", data); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][2]int64{{0, 16}, {3, 4}, {15, 1}, {16, 0}, {0, 0}} {
		got, err := r.GetRange(ctx, "job/obj", c[0], c[1])
		if err != nil || string(got) != string(data[c[0]:c[0]+c[1]]) {
			t.Errorf("GetRange(%d, %d) = %q, %v", c[0], c[1], got, err)
		}
	}
	for _, c := range [][2]int64{{10, 7}, {16, 1}, {40, 5}} {
		if _, err := r.GetRange(ctx, "job/obj", c[0], c[1]); !errors.Is(err, snapshots.ErrCorrupt) {
			t.Errorf("GetRange(%d, %d) past the end of 16 bytes: %v, want ErrCorrupt", c[0], c[1], err)
		}
	}
	if _, err := r.GetRange(ctx, "job/none", 0, 1); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("GetRange of a missing object: %v, want ErrNotFound", err)
	}
}

// keyedState is a task state with entries in key groups 0, 3, 4, ..., 60.
func keyedState(task string) *messages.TaskState {
	st := &messages.TaskState{Job: "job", TaskId: task, OperatorState: []byte("before"), SourceOffset: []byte("after"), HasSourceOffset: true}
	for _, kg := range []uint32{0, 3, 4, 5, 17, 30, 31, 60} {
		g := &messages.KeyGroupState{KeyGroup: kg}
		for e := range 3 + int(kg)%5 {
			ns := &messages.NamedState{Name: "n"}
			ns.Entries = append(ns.Entries, &messages.StateEntry{Key: fmt.Appendf(nil, "k%d-%d", kg, e), Value: []byte(strings.Repeat("v", int(kg)+e))})
			g.States = append(g.States, ns)
		}
		st.KeyGroups = append(st.KeyGroups, g)
	}
	return st
}

// testReadKeyGroups: the handle of a stored state indexes its key groups,
// and ReadKeyGroups returns exactly those of a range, reading only their
// bytes; a handle without an index is read whole.
func testReadKeyGroups(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	c := snapshots.NewCheckpoints(newStore(t), "job", nil)
	st := keyedState("sum#0")
	h, err := c.PutTaskState(ctx, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	if !h.GetIndexed() || len(h.GetKeyGroups()) != len(st.KeyGroups) {
		t.Fatalf("handle indexes %d key groups (indexed %t), want %d", len(h.GetKeyGroups()), h.GetIndexed(), len(st.KeyGroups))
	}
	for _, r := range [][2]int{{0, 64}, {0, 1}, {1, 3}, {3, 6}, {4, 31}, {31, 61}, {61, 128}, {5, 5}} {
		for _, handle := range []*messages.StateHandle{h, {Key: h.Key, Size: h.Size, Crc32C: h.Crc32C}} {
			got, read, err := c.ReadKeyGroups(ctx, handle, r[0], r[1])
			if err != nil {
				t.Fatalf("ReadKeyGroups [%d,%d) indexed=%t: %v", r[0], r[1], handle.Indexed, err)
			}
			var want []*messages.KeyGroupState
			var bytes int64
			for i, g := range st.KeyGroups {
				if int(g.KeyGroup) >= r[0] && int(g.KeyGroup) < r[1] {
					want = append(want, g)
					bytes += int64(h.KeyGroups[i].Length)
				}
			}
			if len(got) != len(want) {
				t.Fatalf("[%d,%d) indexed=%t: %d key groups, want %d", r[0], r[1], handle.Indexed, len(got), len(want))
			}
			for i := range got {
				if !proto.Equal(got[i], want[i]) {
					t.Errorf("[%d,%d): key group %d differs", r[0], r[1], want[i].KeyGroup)
				}
			}
			if handle.Indexed && read > bytes+int64(len(want))*8 {
				t.Errorf("[%d,%d): read %d bytes for key groups of %d", r[0], r[1], read, bytes)
			}
		}
	}
}

// testReadKeyGroupsCorrupt: a flipped bit in a key group's bytes, or an
// index that lies, is ErrCorrupt naming the key and the key group.
func testReadKeyGroupsCorrupt(t *testing.T, newStore newStoreFunc) {
	ctx := context.Background()
	s := newStore(t)
	c := snapshots.NewCheckpoints(s, "job", nil)
	h, err := c.PutTaskState(ctx, 1, keyedState("sum#0"))
	if err != nil {
		t.Fatal(err)
	}
	data, err := s.Get(ctx, h.Key)
	if err != nil {
		t.Fatal(err)
	}
	sec := h.KeyGroups[4] // key group 17
	data[sec.Offset+sec.Length/2] ^= 1
	if err := s.Put(ctx, h.Key, data); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadKeyGroups(ctx, h, 17, 18); !errors.Is(err, snapshots.ErrCorrupt) ||
		!strings.Contains(err.Error(), h.Key) || !strings.Contains(err.Error(), "key group 17") {
		t.Errorf("a corrupt key group: %v", err)
	}
	if _, _, err := c.ReadKeyGroups(ctx, h, 0, 17); err != nil {
		t.Errorf("the other key groups: %v", err)
	}
	lying := proto.CloneOf(h)
	lying.KeyGroups[0].KeyGroup = 1 // the bytes hold key group 0
	if _, _, err := c.ReadKeyGroups(ctx, lying, 1, 2); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("an index that lies: %v", err)
	}
	unsorted := proto.CloneOf(h)
	unsorted.KeyGroups[1], unsorted.KeyGroups[2] = unsorted.KeyGroups[2], unsorted.KeyGroups[1]
	if _, _, err := c.ReadKeyGroups(ctx, unsorted, 0, 64); !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), "out of order") {
		t.Errorf("an index out of order: %v", err)
	}
	beyond := proto.CloneOf(h)
	beyond.KeyGroups[7].Length = beyond.Size
	if _, _, err := c.ReadKeyGroups(ctx, beyond, 60, 61); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("an index beyond the object: %v", err)
	}
}
