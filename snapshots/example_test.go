package snapshots_test

import (
	"context"
	"fmt"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// A checkpoint is written as the tasks' states, then the manifest, which
// completes it; recovery loads the newest complete checkpoint.
func ExampleCheckpoints_LoadLatest() {
	ctx := context.Background()
	store, err := snapshots.Open(ctx, "mem://")
	if err != nil {
		panic(err)
	}
	chks := snapshots.NewCheckpoints(store, "wordcount", nil)

	for id := uint64(1); id <= 2; id++ {
		manifest := &messages.Manifest{Job: "wordcount", CheckpointId: id}
		for _, task := range []string{"source#0", "count#0"} {
			st := &messages.TaskState{TaskId: task, CheckpointId: id, OperatorState: fmt.Appendf(nil, "%s@%d", task, id)}
			h, err := chks.PutTaskState(ctx, id, st)
			if err != nil {
				panic(err)
			}
			manifest.Tasks = append(manifest.Tasks, &messages.TaskStateEntry{TaskId: task, State: h})
		}
		if err := chks.PutManifest(ctx, manifest); err != nil { // the commit point
			panic(err)
		}
	}
	// Checkpoint 3 never completes: its manifest is missing.
	if _, err := chks.PutTaskState(ctx, 3, &messages.TaskState{TaskId: "source#0"}); err != nil {
		panic(err)
	}

	r, err := chks.LoadLatest(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("restore checkpoint", r.Manifest.GetCheckpointId())
	fmt.Printf("count#0: %s\n", r.States["count#0"].GetOperatorState())

	infos, err := chks.List(ctx)
	if err != nil {
		panic(err)
	}
	for _, info := range infos {
		fmt.Printf("chk %d complete=%t objects=%d\n", info.ID, info.Complete, info.Objects)
	}
	// Output:
	// restore checkpoint 2
	// count#0: count#0@2
	// chk 1 complete=true objects=3
	// chk 2 complete=true objects=3
	// chk 3 complete=false objects=1
}

func ExampleCheckpoints_Retain() {
	ctx := context.Background()
	chks := snapshots.NewCheckpoints(snapshots.NewMem(), "job", nil)
	for id := uint64(1); id <= 4; id++ {
		h, err := chks.PutTaskState(ctx, id, &messages.TaskState{TaskId: "sum#0"})
		if err != nil {
			panic(err)
		}
		if id == 3 {
			continue // aborted: no manifest
		}
		m := &messages.Manifest{Job: "job", CheckpointId: id, Tasks: []*messages.TaskStateEntry{{TaskId: "sum#0", State: h}}}
		if err := chks.PutManifest(ctx, m); err != nil {
			panic(err)
		}
	}
	// Keep two complete checkpoints; checkpoint 5 is in flight.
	if err := chks.Retain(ctx, 2, 5); err != nil {
		panic(err)
	}
	keys, err := chks.Store().List(ctx, "")
	if err != nil {
		panic(err)
	}
	for _, k := range keys {
		fmt.Println(k)
	}
	// Output:
	// job/checkpoints/chk-00000000000000000002/_manifest
	// job/checkpoints/chk-00000000000000000002/sum#0.state
	// job/checkpoints/chk-00000000000000000004/_manifest
	// job/checkpoints/chk-00000000000000000004/sum#0.state
}

func ExampleStateKey() {
	fmt.Println(snapshots.StateKey("wordcount", 7, "count#1"))
	fmt.Println(snapshots.ManifestKey("wordcount", 7))
	// Output:
	// wordcount/checkpoints/chk-00000000000000000007/count#1.state
	// wordcount/checkpoints/chk-00000000000000000007/_manifest
}

func ExampleOpen() {
	store, err := snapshots.Open(context.Background(), "s3://bucket/prefix")
	fmt.Println(store, err)
	store, err = snapshots.Open(context.Background(), "mem://")
	fmt.Println(store, err)
	// Output:
	// <nil> snapshots: store URL "s3://bucket/prefix": endpoint= is required, e.g. s3://bucket/PREFIX?endpoint=127.0.0.1:9000&secure=false
	// mem:// <nil>
}
