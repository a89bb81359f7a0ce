package snapshots_test

import (
	"context"
	"errors"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

// putCheckpoint stores a one-task checkpoint id whose state holds key
// groups 3 and 9 with an entry each, and an operator state.
func putCheckpoint(t *testing.T, c *snapshots.Checkpoints, id uint64) *messages.TaskState {
	t.Helper()
	ctx := context.Background()
	st := &messages.TaskState{Job: "j", TaskId: "t", CheckpointId: id, OperatorState: []byte{byte(id)},
		KeyGroups: []*messages.KeyGroupState{
			{KeyGroup: 3, States: []*messages.NamedState{{Name: "s", Entries: []*messages.StateEntry{{Key: []byte("a"), Value: []byte{byte(id)}}}}}},
			{KeyGroup: 9, States: []*messages.NamedState{{Name: "s", Entries: []*messages.StateEntry{{Key: []byte("b"), Value: []byte{byte(id)}}}}}},
		}}
	h, err := c.PutTaskState(ctx, id, st)
	if err != nil {
		t.Fatal(err)
	}
	m := &messages.Manifest{Job: "j", CheckpointId: id, MaxParallelism: 16,
		Tasks: []*messages.TaskStateEntry{{TaskId: "t", Operator: "op", State: h, KeyGroupStart: 0, KeyGroupEnd: 16}}}
	if err := c.PutManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLoadLatestHeads: LoadLatestHeadsSince returns the newest checkpoint
// with each state's head and its key groups listed empty, and passes over
// a checkpoint marked unusable, as LoadLatestSince does.
func TestLoadLatestHeads(t *testing.T) {
	ctx := context.Background()
	c := snapshots.NewCheckpoints(snapshots.NewMem(), "j", nil)
	putCheckpoint(t, c, 1)
	full := putCheckpoint(t, c, 2)
	r, err := c.LoadLatestHeadsSince(ctx, 0)
	if err != nil || r == nil {
		t.Fatalf("LoadLatestHeadsSince = %v, %v", r, err)
	}
	if !r.Heads || r.Manifest.GetCheckpointId() != 2 {
		t.Fatalf("loaded checkpoint %d heads %t, want 2 with heads", r.Manifest.GetCheckpointId(), r.Heads)
	}
	head := r.States["t"]
	want := proto.CloneOf(full)
	for _, g := range want.KeyGroups {
		g.States = nil
	}
	if !proto.Equal(head, want) {
		t.Fatalf("head = %v\nwant %v", head, want)
	}
	c.MarkUnusable(2, snapshots.ErrCorrupt)
	r, err = c.LoadLatestHeadsSince(ctx, 0)
	if err != nil || r.Manifest.GetCheckpointId() != 1 {
		t.Fatalf("after marking 2 unusable: %v, %v; want checkpoint 1", r, err)
	}
	if r, err := c.LoadLatestSince(ctx, 0); err != nil || r.Manifest.GetCheckpointId() != 1 {
		t.Fatalf("LoadLatestSince after marking 2 unusable: %v, %v; want checkpoint 1", r, err)
	}
	c.MarkUnusable(1, snapshots.ErrNotFound)
	if _, err := c.LoadLatestHeadsSince(ctx, 0); !errors.Is(err, snapshots.ErrNoUsableCheckpoint) {
		t.Fatalf("with both marked unusable: %v, want ErrNoUsableCheckpoint", err)
	}
}

// TestRetainPassesOverMarkedUnusable: a checkpoint a restore marked
// unusable does not count towards retention, so the older one recovery
// fell back to is kept, and the marked one's objects stay too.
func TestRetainPassesOverMarkedUnusable(t *testing.T) {
	ctx := context.Background()
	store := snapshots.NewMem()
	c := snapshots.NewCheckpoints(store, "j", nil)
	putCheckpoint(t, c, 1)
	putCheckpoint(t, c, 2)
	c.MarkUnusable(2, snapshots.ErrCorrupt)
	if err := c.Retain(ctx, 1, 3); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2} {
		if _, err := c.ReadManifest(ctx, id); err != nil {
			t.Fatalf("checkpoint %d after retention keeping 1 with 2 marked unusable: %v", id, err)
		}
	}
	if r, err := c.LoadLatestSince(ctx, 0); err != nil || r.Manifest.GetCheckpointId() != 1 {
		t.Fatalf("LoadLatestSince = %v, %v; want checkpoint 1", r, err)
	}
}
