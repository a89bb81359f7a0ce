package snapshotstest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

var streamTests = []test{
	{"StreamEqualsRead", testStreamEqualsRead},
	{"StreamStops", testStreamStops},
	{"StreamCorrupt", testStreamCorrupt},
	{"Head", testHead},
	{"HeadCorrupt", testHeadCorrupt},
}

// bigGroups is the number of key groups of bigState.
const bigGroups = 48

// bigGroup is key group kg at version v, of about 64 KiB in 16 entries.
func bigGroup(kg uint32, v uint64) *messages.KeyGroupState {
	g := &messages.KeyGroupState{KeyGroup: kg}
	ns := &messages.NamedState{Name: "blob"}
	for e := range 16 {
		ns.Entries = append(ns.Entries, &messages.StateEntry{
			Key:   fmt.Appendf(nil, "k%d-%d", kg, e),
			Value: randomBytes(4<<10, uint64(kg)<<32|uint64(e)<<8|v),
		})
	}
	g.States = []*messages.NamedState{ns}
	return g
}

// bigStates stores a state of bigGroups key groups of 64 KiB in full as
// checkpoint 1 and an incremental state, with every third key group
// changed, as checkpoint 2. It returns the handle of checkpoint 2, which
// indexes both objects, and the logical state it holds.
func bigStates(t *testing.T, c *snapshots.Checkpoints) (*messages.StateHandle, *messages.TaskState) {
	t.Helper()
	ctx := t.Context()
	full := &messages.TaskState{Job: job, TaskId: "big#0", CheckpointId: 1, OperatorState: []byte("before")}
	for kg := range uint32(bigGroups) {
		full.KeyGroups = append(full.KeyGroups, bigGroup(kg, 1))
	}
	h1, err := c.PutTaskState(ctx, 1, full)
	if err != nil {
		t.Fatal(err)
	}
	prev, _ := snapshots.Sections(h1)
	incr := &messages.TaskState{Job: job, TaskId: "big#0", CheckpointId: 2, OperatorState: []byte("after")}
	logical := proto.CloneOf(incr)
	var refs []*messages.KeyGroupSection
	for kg := range uint32(bigGroups) {
		if kg%3 == 1 {
			g := bigGroup(kg, 2)
			incr.KeyGroups = append(incr.KeyGroups, g)
			logical.KeyGroups = append(logical.KeyGroups, g)
			continue
		}
		refs = append(refs, prev[kg])
		logical.KeyGroups = append(logical.KeyGroups, full.KeyGroups[kg])
	}
	h2, err := c.PutTaskStateRefs(ctx, 2, incr, refs)
	if err != nil {
		t.Fatal(err)
	}
	return h2, logical
}

// collect streams the key groups [start, end) of h and returns them in
// key-group order.
func collect(t *testing.T, c *snapshots.Checkpoints, h *messages.StateHandle, start, end int) ([]*messages.KeyGroupState, int64) {
	t.Helper()
	var got []*messages.KeyGroupState
	seen := map[uint32]bool{} // written by fn without a lock: -race checks that fn is called from one goroutine
	read, err := c.StreamKeyGroups(t.Context(), h, start, end, func(g *messages.KeyGroupState) error {
		if seen[g.GetKeyGroup()] {
			return fmt.Errorf("key group %d twice", g.GetKeyGroup())
		}
		seen[g.GetKeyGroup()] = true
		got = append(got, g)
		return nil
	})
	if err != nil {
		t.Fatalf("StreamKeyGroups [%d,%d): %v", start, end, err)
	}
	slices.SortFunc(got, func(a, b *messages.KeyGroupState) int { return int(a.GetKeyGroup()) - int(b.GetKeyGroup()) })
	return got, read
}

// wantGroups checks that got holds exactly the key groups of want in
// [start, end).
func wantGroups(t *testing.T, what string, got []*messages.KeyGroupState, want *messages.TaskState, start, end int) {
	t.Helper()
	var exp []*messages.KeyGroupState
	for _, g := range want.GetKeyGroups() {
		if int(g.GetKeyGroup()) >= start && int(g.GetKeyGroup()) < end {
			exp = append(exp, g)
		}
	}
	if len(got) != len(exp) {
		t.Fatalf("%s [%d,%d): %d key groups, want %d", what, start, end, len(got), len(exp))
	}
	for i := range got {
		if !proto.Equal(got[i], exp[i]) {
			t.Fatalf("%s [%d,%d): key group %d differs", what, start, end, exp[i].GetKeyGroup())
		}
	}
}

// testStreamEqualsRead: StreamKeyGroups hands over exactly the key groups
// that ReadKeyGroups returns, for random ranges of a state spread over two
// objects, of one object, of an inline state and of a handle without an
// index.
func testStreamEqualsRead(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	h2, logical := bigStates(t, c)
	rnd := rand.New(rand.NewPCG(1, 2))
	ranges := [][2]int{{0, bigGroups}, {0, 1}, {bigGroups - 1, bigGroups + 5}, {5, 5}, {bigGroups, 2 * bigGroups}}
	for range 8 {
		a, b := rnd.IntN(bigGroups+1), rnd.IntN(bigGroups+1)
		ranges = append(ranges, [2]int{min(a, b), max(a, b)})
	}
	for _, r := range ranges {
		got, read := collect(t, c, h2, r[0], r[1])
		wantGroups(t, "StreamKeyGroups", got, logical, r[0], r[1])
		byRead, readRead, err := c.ReadKeyGroups(t.Context(), h2, r[0], r[1])
		if err != nil {
			t.Fatalf("ReadKeyGroups [%d,%d): %v", r[0], r[1], err)
		}
		wantGroups(t, "ReadKeyGroups", byRead, logical, r[0], r[1])
		var bytes int64
		for _, g := range got {
			bytes += int64(proto.Size(g))
		}
		if read < bytes || read != readRead {
			t.Errorf("[%d,%d): StreamKeyGroups read %d bytes, ReadKeyGroups %d, for key groups of %d", r[0], r[1], read, readRead, bytes)
		}
	}
	st, err := c.ReadTaskState(t.Context(), h2)
	if err != nil || !proto.Equal(st, logical) {
		t.Fatalf("ReadTaskState of the incremental state = %v", err)
	}

	// One object, inline, no index.
	one := keyedState("one#0")
	h1, err := c.PutTaskState(t.Context(), 3, one)
	if err != nil {
		t.Fatal(err)
	}
	c.SetInlineLimit(1 << 20)
	hi, err := c.PutTaskState(t.Context(), 3, keyedState("inline#0"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetInlineLimit(0)
	bare := &messages.StateHandle{Key: h1.GetKey(), Size: h1.GetSize(), Crc32C: h1.GetCrc32C()}
	for name, h := range map[string]*messages.StateHandle{"one object": h1, "inline": hi, "no index": bare} {
		for _, r := range [][2]int{{0, 64}, {3, 18}, {31, 61}, {61, 64}} {
			got, _ := collect(t, c, h, r[0], r[1])
			wantGroups(t, "StreamKeyGroups of "+name, got, one, r[0], r[1])
		}
	}
}

// errStop is what the fn of testStreamStops returns.
var errStop = errors.New("stop here")

// testStreamStops: an error of fn, or a done context, stops
// StreamKeyGroups at once.
func testStreamStops(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	h2, _ := bigStates(t, c)
	calls := 0
	_, err := c.StreamKeyGroups(t.Context(), h2, 0, bigGroups, func(*messages.KeyGroupState) error {
		calls++
		if calls == 3 {
			return errStop
		}
		return nil
	})
	if !errors.Is(err, errStop) || calls != 3 {
		t.Errorf("fn failing on its 3rd call: StreamKeyGroups = %v after %d calls; want its error after 3", err, calls)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	calls = 0
	count := func(*messages.KeyGroupState) error { calls++; return nil }
	for name, h := range map[string]*messages.StateHandle{"indexed": h2, "no index": {Key: h2.GetKey(), Size: h2.GetSize(), Crc32C: h2.GetCrc32C()}} {
		if _, err := c.StreamKeyGroups(ctx, h, 0, bigGroups, count); !errors.Is(err, context.Canceled) || calls != 0 {
			t.Errorf("%s, a cancelled context: StreamKeyGroups = %v after %d calls; want context.Canceled, no call", name, err, calls)
		}
	}

	ctx, cancel = context.WithCancel(t.Context())
	defer cancel()
	calls = 0
	_, err = c.StreamKeyGroups(ctx, h2, 0, bigGroups, func(*messages.KeyGroupState) error {
		calls++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || calls != 1 {
		t.Errorf("a context cancelled by the first call: StreamKeyGroups = %v after %d calls; want context.Canceled after 1", err, calls)
	}
}

// testStreamCorrupt: a run whose bytes do not match the index, in the
// state's own object or in a referenced one, is ErrCorrupt naming the
// object and the key group.
func testStreamCorrupt(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	h2, _ := bigStates(t, c)
	if h2.GetKeyGroups()[6].GetKey() == "" || h2.GetKeyGroups()[7].GetKey() != "" {
		t.Fatalf("key groups 6 and 7 lie in %q and %q, want checkpoint 1's object and the state's own", h2.GetKeyGroups()[6].GetKey(), h2.GetKeyGroups()[7].GetKey())
	}
	for _, kg := range []uint32{6, 7} { // 6 lies in checkpoint 1's object, 7 in checkpoint 2's
		sec := h2.GetKeyGroups()[kg]
		key := sec.GetKey()
		if key == "" {
			key = h2.GetKey()
		}
		data := mustGet(t, s, key)
		data[sec.GetOffset()+sec.GetLength()/3] ^= 0x02
		mustPut(t, s, key, data)
		_, err := c.StreamKeyGroups(t.Context(), h2, 0, bigGroups, func(*messages.KeyGroupState) error { return nil })
		if !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), fmt.Sprintf("key group %d", kg)) {
			t.Errorf("key group %d corrupt in %s: StreamKeyGroups = %v; want ErrCorrupt naming both", kg, key, err)
		}
		data[sec.GetOffset()+sec.GetLength()/3] ^= 0x02
		mustPut(t, s, key, data)
	}
	if err := s.Delete(t.Context(), snapshots.StateKey(job, 1, "big#0")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.StreamKeyGroups(t.Context(), h2, 0, bigGroups, func(*messages.KeyGroupState) error { return nil }); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("a referenced object deleted: StreamKeyGroups = %v; want ErrNotFound", err)
	}
}

// wantHead checks that ReadTaskStateHead of h returns st without its key
// groups, and that the head and every key group streamed make st.
func wantHead(t *testing.T, c *snapshots.Checkpoints, what string, h *messages.StateHandle, st *messages.TaskState) {
	t.Helper()
	head, err := c.ReadTaskStateHead(t.Context(), h)
	if err != nil {
		t.Fatalf("%s: ReadTaskStateHead: %v", what, err)
	}
	want := proto.CloneOf(st)
	want.KeyGroups = nil
	if !proto.Equal(head, want) {
		t.Fatalf("%s: ReadTaskStateHead = %v, want %v", what, head, want)
	}
	groups, _ := collect(t, c, h, 0, 1<<15)
	head.KeyGroups = groups
	if !proto.Equal(head, st) {
		t.Errorf("%s: the head and the streamed key groups are not the state", what)
	}
}

// testHead: ReadTaskStateHead returns a state without its key groups, for
// every kind of handle.
func testHead(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	wantHead(t, c, "a full state", ch.handles["sum#0"], logicalState(1, "sum#0", ch.vs["sum#0"]))
	ch.checkpoint(2, map[string][]uint32{"sum#0": {0, 5, 15}, "sum#1": {}})
	wantHead(t, c, "an incremental state", ch.handles["sum#0"], logicalState(2, "sum#0", ch.vs["sum#0"]))
	wantHead(t, c, "an incremental state that stored no key group", ch.handles["sum#1"], logicalState(2, "sum#1", ch.vs["sum#1"]))

	st := keyedState("sum#0")
	st.StateDescriptors = []*messages.StateDescriptor{{Name: "n", Kind: "value"}}
	st.Ended = true
	h, err := c.PutTaskState(ctx, 3, st)
	if err != nil {
		t.Fatal(err)
	}
	wantHead(t, c, "fields on both sides of the key groups", h, st)
	wantHead(t, c, "no index", &messages.StateHandle{Key: h.GetKey(), Size: h.GetSize(), Crc32C: h.GetCrc32C()}, st)
	c.SetInlineLimit(1 << 20)
	hi, err := c.PutTaskState(ctx, 4, st)
	if err != nil {
		t.Fatal(err)
	}
	wantHead(t, c, "inline", hi, st)
	empty := &messages.TaskState{TaskId: "src#0", SourceOffset: []byte("7"), HasSourceOffset: true}
	c.SetInlineLimit(0)
	he, err := c.PutTaskState(ctx, 4, empty)
	if err != nil {
		t.Fatal(err)
	}
	wantHead(t, c, "no key groups", he, empty)
}

// testHeadCorrupt: a flipped bit in the bytes ReadTaskStateHead reads is
// ErrCorrupt naming the key; one in a key group is for the key group's
// read to find. (The tag and length before each key group are read by
// neither: the index says where each one lies.)
func testHeadCorrupt(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	st := keyedState("sum#0")
	st.Ended = true
	h, err := c.PutTaskState(ctx, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	data := mustGet(t, s, h.GetKey())
	first, last := h.GetKeyGroups()[0], h.GetKeyGroups()[len(h.GetKeyGroups())-1]
	for name, at := range map[string]uint64{
		"kind":                    3,
		"before the key groups":   first.GetOffset() - uint64(protowire.SizeTag(8)+protowire.SizeVarint(first.GetLength())) - 1,
		"after the key groups":    last.GetOffset() + last.GetLength() + 1,
		"the envelope's checksum": uint64(len(data) - 1),
	} {
		bad := slices.Clone(data)
		bad[at] ^= 0x01
		mustPut(t, s, h.GetKey(), bad)
		if _, err := c.ReadTaskStateHead(ctx, h); !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), h.GetKey()) {
			t.Errorf("a flipped bit in %s (byte %d): ReadTaskStateHead = %v; want ErrCorrupt naming %s", name, at, err, h.GetKey())
		}
	}
	bad := slices.Clone(data)
	bad[first.GetOffset()+first.GetLength()/2] ^= 0x01
	mustPut(t, s, h.GetKey(), bad)
	if _, ranged := s.(snapshots.RangeReader); ranged {
		if _, err := c.ReadTaskStateHead(ctx, h); err != nil {
			t.Errorf("a flipped bit in key group 0: ReadTaskStateHead = %v; want nil: it does not read the key groups", err)
		}
	}
	if _, _, err := c.ReadKeyGroups(ctx, h, 0, 1); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("a flipped bit in key group 0: ReadKeyGroups = %v; want ErrCorrupt", err)
	}
	if err := s.Delete(ctx, h.GetKey()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReadTaskStateHead(ctx, h); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("a deleted object: ReadTaskStateHead = %v; want ErrNotFound", err)
	}
}
