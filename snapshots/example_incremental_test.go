package snapshots_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// groupOf returns key group kg holding one entry.
func groupOf(kg uint32, value string) *messages.KeyGroupState {
	return &messages.KeyGroupState{KeyGroup: kg, States: []*messages.NamedState{{
		Name: "count", Entries: []*messages.StateEntry{{Key: fmt.Appendf(nil, "k%d", kg), Value: []byte(value)}},
	}}}
}

// An incremental checkpoint stores the key groups that changed and
// references the others where the previous checkpoint stored them;
// retention keeps what a retained checkpoint references.
func ExampleCheckpoints_PutTaskStateRefs() {
	ctx := context.Background()
	chks := snapshots.NewCheckpoints(snapshots.NewMem(), "wordcount", nil)
	checkpoint := func(id uint64, h *messages.StateHandle) {
		m := &messages.Manifest{Job: "wordcount", CheckpointId: id, Tasks: []*messages.TaskStateEntry{{TaskId: "count#0", State: h}}}
		if err := chks.PutManifest(ctx, m); err != nil {
			panic(err)
		}
	}

	full := &messages.TaskState{TaskId: "count#0", CheckpointId: 1}
	for kg := range uint32(4) {
		full.KeyGroups = append(full.KeyGroups, groupOf(kg, "1"))
	}
	h1, err := chks.PutTaskState(ctx, 1, full)
	if err != nil {
		panic(err)
	}
	checkpoint(1, h1)

	// Checkpoint 2: key group 2 changed.
	secs, _ := snapshots.Sections(h1)
	var refs []*messages.KeyGroupSection
	for _, s := range secs {
		if s.GetKeyGroup() != 2 {
			refs = append(refs, s)
		}
	}
	changed := &messages.TaskState{TaskId: "count#0", CheckpointId: 2, KeyGroups: []*messages.KeyGroupState{groupOf(2, "2")}}
	h2, err := chks.PutTaskStateRefs(ctx, 2, changed, refs)
	if err != nil {
		panic(err)
	}
	checkpoint(2, h2)
	fmt.Printf("checkpoint 2 uploaded %d of %d bytes\n", snapshots.UploadedSize(h2), snapshots.StateSize(h2))

	// Deleting checkpoint 1 keeps the object that checkpoint 2 references.
	if err := chks.Delete(ctx, 1); err != nil {
		panic(err)
	}
	keys, err := chks.Store().List(ctx, "")
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Println(strings.TrimPrefix(k, snapshots.CheckpointsPrefix("wordcount")))
	}
	r, err := chks.LoadLatest(ctx)
	if err != nil {
		panic(err)
	}
	for _, g := range r.States["count#0"].GetKeyGroups() {
		fmt.Printf("key group %d: %s\n", g.GetKeyGroup(), g.GetStates()[0].GetEntries()[0].GetValue())
	}
	// Output:
	// checkpoint 2 uploaded 63 of 121 bytes
	// chk-00000000000000000001/count#0.state
	// chk-00000000000000000002/_manifest
	// chk-00000000000000000002/count#0.state
	// key group 0: 1
	// key group 1: 1
	// key group 2: 2
	// key group 3: 1
}

// With an inline limit, small states travel in the manifest: a checkpoint
// of small tasks is one write.
func ExampleCheckpoints_SetInlineLimit() {
	ctx := context.Background()
	store := snapshots.NewMem()
	chks := snapshots.NewCheckpoints(store, "small", nil)
	chks.SetInlineLimit(4 << 10)
	m := &messages.Manifest{Job: "small", CheckpointId: 1}
	for _, task := range []string{"source#0", "count#0", "count#1"} {
		h, err := chks.PutTaskState(ctx, 1, &messages.TaskState{TaskId: task, OperatorState: []byte("tiny")})
		if err != nil {
			panic(err)
		}
		m.Tasks = append(m.Tasks, &messages.TaskStateEntry{TaskId: task, State: h})
	}
	if err := chks.PutManifest(ctx, m); err != nil {
		panic(err)
	}
	keys, err := store.List(ctx, "")
	if err != nil {
		panic(err)
	}
	fmt.Println(len(keys), "object:", strings.TrimPrefix(keys[0], snapshots.CheckpointsPrefix("small")))
	r, err := chks.LoadLatest(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Printf("count#1: %s\n", r.States["count#1"].GetOperatorState())
	// Output:
	// 1 object: chk-00000000000000000001/_manifest
	// count#1: tiny
}

// A streaming restore reads the state's non-keyed parts, then its key
// groups, handed over one at a time to a single goroutine that can fill
// its maps without locks.
func ExampleCheckpoints_StreamKeyGroups() {
	ctx := context.Background()
	chks := snapshots.NewCheckpoints(snapshots.NewMem(), "wordcount", nil)
	st := &messages.TaskState{TaskId: "count#0", CheckpointId: 1, OperatorState: []byte("op")}
	for kg := range uint32(8) {
		st.KeyGroups = append(st.KeyGroups, groupOf(kg, fmt.Sprint(kg*10)))
	}
	h, err := chks.PutTaskState(ctx, 1, st)
	if err != nil {
		panic(err)
	}

	head, err := chks.ReadTaskStateHead(ctx, h)
	if err != nil {
		panic(err)
	}
	counts := map[string]string{}
	read, err := chks.StreamKeyGroups(ctx, h, 2, 5, func(g *messages.KeyGroupState) error {
		for _, e := range g.GetStates()[0].GetEntries() {
			counts[string(e.GetKey())] = string(e.GetValue())
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("operator state %q, %d key groups, %d bytes read\n", head.GetOperatorState(), len(counts), read)
	fmt.Println(counts["k2"], counts["k3"], counts["k4"])
	// Output:
	// operator state "op", 3 key groups, 67 bytes read
	// 20 30 40
}
