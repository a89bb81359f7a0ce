package snapshots_test

import (
	"context"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// TestRefsNeverInline: a state that references earlier objects is stored
// as an object whatever the inline limit, so that the next incremental
// state can build on it; one without references still travels inline.
func TestRefsNeverInline(t *testing.T) {
	ctx := context.Background()
	store := snapshots.NewMem()
	c := snapshots.NewCheckpoints(store, "j", nil)
	// No inline limit yet: the base must be an object to be referenced.
	st := &messages.TaskState{Job: "j", TaskId: "t", KeyGroups: []*messages.KeyGroupState{{KeyGroup: 1}, {KeyGroup: 2}}}
	base, err := c.PutTaskState(ctx, 1, st)
	if err != nil {
		t.Fatal(err)
	}
	refs, ok := snapshots.Sections(base)
	if !ok {
		t.Fatal("the base cannot be referenced")
	}
	c.SetInlineLimit(1 << 20)
	delta := &messages.TaskState{Job: "j", TaskId: "t", KeyGroups: []*messages.KeyGroupState{{KeyGroup: 3}}}
	h, err := c.PutTaskStateRefs(ctx, 2, delta, refs)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.GetInline()) > 0 {
		t.Fatal("a state with references travels inline: the next checkpoint could not build on it")
	}
	if _, err := store.Get(ctx, h.GetKey()); err != nil {
		t.Fatalf("the state with references is not stored: %v", err)
	}
	if _, ok := snapshots.Sections(h); !ok {
		t.Fatal("the state with references cannot be referenced")
	}
	full, err := c.PutTaskState(ctx, 3, delta)
	if err != nil {
		t.Fatal(err)
	}
	if len(full.GetInline()) == 0 {
		t.Fatal("a small state without references is not inline")
	}
}
