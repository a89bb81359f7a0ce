package snapshotstest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

var inlineTests = []test{
	{"RoundTrip", testInlineRoundTrip},
	{"OneWrite", testInlineOneWrite},
	{"Mixed", testInlineMixed},
	{"NotReferenced", testInlineNotReferenced},
	{"Retain", testInlineRetain},
	{"Corrupt", testInlineCorrupt},
	{"Savepoint", testInlineSavepoint},
}

// putCounter counts the Puts that reach a store.
type putCounter struct {
	snapshots.Store
	puts atomic.Int64
}

func (p *putCounter) Put(ctx context.Context, key string, data []byte) error {
	p.puts.Add(1)
	return p.Store.Put(ctx, key, data)
}

// wantInline checks that h carries its state inline.
func wantInline(t *testing.T, h *messages.StateHandle) {
	t.Helper()
	if len(h.GetInline()) == 0 || uint64(len(h.GetInline())) != h.GetSize() || snapshots.Checksum(h.GetInline()) != h.GetCrc32C() {
		t.Errorf("handle of %s: %d inline bytes, size %d, crc32c %08x: want the state inline", h.GetKey(), len(h.GetInline()), h.GetSize(), h.GetCrc32C())
	}
	if snapshots.UploadedSize(h) != 0 {
		t.Errorf("handle of %s: uploaded %d bytes, want 0", h.GetKey(), snapshots.UploadedSize(h))
	}
}

// testInlineRoundTrip: a small state travels in its handle, and every
// read uses those bytes.
func testInlineRoundTrip(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	c.SetInlineLimit(64 << 10)
	ctx := t.Context()
	m := complete(t, c, 1)
	for _, e := range m.GetTasks() {
		wantInline(t, e.GetState())
		if want := snapshots.StateKey(job, 1, e.GetTaskId()); e.GetState().GetKey() != want {
			t.Errorf("inline handle key %s, want %s", e.GetState().GetKey(), want)
		}
	}
	wantKeys(t, s, "", snapshots.ManifestKey(job, 1))
	fresh, _ := newCheckpoints(s)
	wantLoaded(t, fresh, 1)
	if err := fresh.Verify(ctx, 1); err != nil {
		t.Errorf("Verify: %v", err)
	}

	st := keyedState("sum#0")
	h, err := c.PutTaskState(ctx, 2, st)
	if err != nil {
		t.Fatal(err)
	}
	wantInline(t, h)
	if len(h.GetKeyGroups()) != len(st.GetKeyGroups()) || !h.GetIndexed() {
		t.Fatalf("inline handle indexes %d key groups, want %d", len(h.GetKeyGroups()), len(st.GetKeyGroups()))
	}
	if got, err := fresh.ReadTaskState(ctx, h); err != nil || !proto.Equal(got, st) {
		t.Errorf("ReadTaskState of an inline state = %v, %v", got, err)
	}
	got, _, err := fresh.ReadKeyGroups(ctx, h, 4, 31)
	if err != nil || len(got) != 4 {
		t.Fatalf("ReadKeyGroups [4,31) of an inline state = %d key groups, %v; want 4", len(got), err)
	}
	for i, g := range got {
		if !proto.Equal(g, st.GetKeyGroups()[i+2]) {
			t.Errorf("key group %d = %v", g.GetKeyGroup(), g)
		}
	}
	wantKeys(t, s, "", snapshots.ManifestKey(job, 1))
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

// testInlineOneWrite: a checkpoint whose states are all inline is one
// write, its manifest.
func testInlineOneWrite(t *testing.T, newStore newStoreFunc) {
	pc := &putCounter{Store: newStore(t)}
	c, _ := newCheckpoints(pc)
	c.SetInlineLimit(4096)
	complete(t, c, 1)
	if n := pc.puts.Load(); n != 1 {
		t.Errorf("a checkpoint of %d inline states took %d writes, want 1", len(defaultTasks), n)
	}
	c.SetInlineLimit(0) // off again: one write per state and the manifest
	complete(t, c, 2)
	if n := pc.puts.Load() - 1; n != int64(len(defaultTasks))+1 {
		t.Errorf("a checkpoint without inline states took %d writes, want %d", n, len(defaultTasks)+1)
	}
	wantLoaded(t, c, 2)
}

// testInlineMixed: the limit is on the stored object's size: the small
// states of a checkpoint travel inline, the large ones are stored.
func testInlineMixed(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	small, err := snapshots.EncodeObject(snapshots.KindTaskState, taskState(1, "src#0"))
	if err != nil {
		t.Fatal(err)
	}
	c.SetInlineLimit(len(small))
	ch := newChain(t, c)
	m := ch.checkpoint(1, nil)
	for _, e := range m.GetTasks() {
		if inline := len(e.GetState().GetInline()) > 0; inline != (e.GetTaskId() == "src#0") {
			t.Errorf("task %s: inline %t, size %d, limit %d", e.GetTaskId(), inline, e.GetState().GetSize(), len(small))
		}
	}
	wantKeys(t, s, "", snapshots.ManifestKey(job, 1), snapshots.StateKey(job, 1, "sum#0"), snapshots.StateKey(job, 1, "sum#1")) // "_" sorts first
	fresh, _ := newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 1)
}

// testInlineNotReferenced: an inline state has no object to reference, so
// the next incremental state stores its key groups again.
func testInlineNotReferenced(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	c.SetInlineLimit(1 << 20)
	ch := newChain(t, c)
	ch.checkpoint(1, nil)
	h1 := ch.handles["sum#0"]
	wantInline(t, h1)
	if secs, ok := snapshots.Sections(h1); ok || secs != nil {
		t.Errorf("Sections of an inline handle = %v, %t; want none", secs, ok)
	}
	c.SetInlineLimit(0)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {2}, "sum#1": {17}})
	h2 := ch.handles["sum#0"]
	if len(h2.GetInline()) > 0 || len(h2.GetKeyGroups()) != 16 || h2.GetStateSize() != 0 {
		t.Errorf("the state after an inline one: %d inline bytes, %d key groups, state size %d; want all 16 stored", len(h2.GetInline()), len(h2.GetKeyGroups()), h2.GetStateSize())
	}
	if _, ok := snapshots.Sections(h2); !ok {
		t.Error("Sections of a stored state: not ok")
	}
	if _, ok := snapshots.Sections(nil); ok {
		t.Error("Sections(nil): ok")
	}
	fresh, _ := newCheckpoints(s)
	ch.want(loadLatest(t, fresh), 2)
}

// testInlineRetain: retention and deletions have no object to delete for
// an inline state.
func testInlineRetain(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	c.SetInlineLimit(4096)
	ctx := t.Context()
	for id := range uint64(3) {
		complete(t, c, id+1)
	}
	putStates(t, c, 4, defaultTasks...) // aborted, inline: nothing stored
	for _, r := range []*snapshots.Checkpoints{c, func() *snapshots.Checkpoints { f, _ := newCheckpoints(s); return f }()} {
		if err := r.Retain(ctx, 1, 5); err != nil {
			t.Fatalf("Retain: %v", err)
		}
		wantKeys(t, s, "", snapshots.ManifestKey(job, 2), snapshots.ManifestKey(job, 3)) // 2 is 3's fallback
		if n, err := r.DeleteIncomplete(ctx, 5); n != 0 || err != nil {
			t.Errorf("DeleteIncomplete = %d, %v; want 0", n, err)
		}
	}
	wantLoaded(t, c, 3)
	if n, err := c.DeleteAll(ctx); n != 2 || err != nil {
		t.Errorf("DeleteAll = %d, %v; want 2", n, err)
	}
	wantKeys(t, s, "")
}

// testInlineCorrupt: inline bytes that do not match their handle make the
// manifest corrupt: refused when written, unusable when read.
func testInlineCorrupt(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	ctx := t.Context()
	complete(t, c, 1)
	c.SetInlineLimit(4096)
	entries := putStates(t, c, 2, defaultTasks...)
	h := entries[1].GetState()
	wantInline(t, h)
	h.Inline[len(h.Inline)/2] ^= 0x08
	if _, err := c.ReadTaskState(ctx, h); !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), h.GetKey()) {
		t.Errorf("ReadTaskState of corrupt inline bytes = %v; want ErrCorrupt naming %s", err, h.GetKey())
	}
	if _, _, err := c.ReadKeyGroups(ctx, h, 0, 64); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("ReadKeyGroups of corrupt inline bytes = %v; want ErrCorrupt", err)
	}
	m := manifestOf(2, entries)
	if err := c.PutManifest(ctx, m); err == nil || !strings.Contains(err.Error(), h.GetKey()) {
		t.Errorf("PutManifest with corrupt inline bytes = %v; want a refusal naming %s", err, h.GetKey())
	}
	data, err := snapshots.EncodeObject(snapshots.KindManifest, m)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, snapshots.ManifestKey(job, 2), data)
	if _, err := c.ReadManifest(ctx, 2); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("ReadManifest with corrupt inline bytes = %v; want ErrCorrupt", err)
	}
	wantLoaded(t, c, 1)
	wantLogged(t, logs, 2, snapshots.ManifestKey(job, 2))
	short := proto.CloneOf(h)
	short.Inline = short.Inline[:len(short.Inline)-1]
	if _, err := c.ReadTaskState(ctx, short); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("ReadTaskState of truncated inline bytes = %v; want ErrCorrupt", err)
	}
}

// testInlineSavepoint: a savepoint's small states travel inline in its
// manifest too.
func testInlineSavepoint(t *testing.T, newStore newStoreFunc) {
	pc := &putCounter{Store: newStore(t)}
	c, _ := newCheckpoints(pc)
	c.SetInlineLimit(4096)
	m := putSavepoint(t, c, "v1")
	for _, e := range m.GetTasks() {
		wantInline(t, e.GetState())
	}
	if n := pc.puts.Load(); n != 1 {
		t.Errorf("a savepoint of inline states took %d writes, want 1", n)
	}
	fresh, _ := newCheckpoints(pc.Store)
	wantSavepoint(t, fresh, m)
	if err := fresh.VerifySavepoint(t.Context(), "v1"); err != nil {
		t.Errorf("VerifySavepoint: %v", err)
	}
}
