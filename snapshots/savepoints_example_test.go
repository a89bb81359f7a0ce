package snapshots_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// A savepoint is written like a checkpoint, under its name: the tasks'
// states, then the manifest. It is never overwritten, retention leaves it
// alone, and loading it never falls back to anything else.
func ExampleCheckpoints_LoadSavepoint() {
	ctx := context.Background()
	chks := snapshots.NewCheckpoints(snapshots.NewMem(), "wordcount", nil)

	m := &messages.Manifest{Job: "wordcount", CheckpointId: 7, Savepoint: "before-upgrade", MaxParallelism: 128}
	for i, task := range []string{"count#0", "count#1"} {
		st := &messages.TaskState{TaskId: task, OperatorId: "count", Subtask: uint32(i), CheckpointId: 7}
		h, err := chks.PutSavepointState(ctx, "before-upgrade", st)
		if err != nil {
			panic(err)
		}
		m.Tasks = append(m.Tasks, &messages.TaskStateEntry{
			TaskId: task, OperatorId: "count", Subtask: uint32(i), Parallelism: 2, State: h,
			KeyGroupStart: uint32(64 * i), KeyGroupEnd: uint32(64 * (i + 1)),
		})
	}
	if err := chks.PutSavepointManifest(ctx, m); err != nil { // the commit point
		panic(err)
	}
	err := chks.PutSavepointManifest(ctx, m)
	fmt.Println("taken twice:", errors.Is(err, snapshots.ErrSavepointExists))

	if _, err := chks.DeleteAll(ctx); err != nil { // deletes checkpoints only
		panic(err)
	}
	r, err := chks.LoadSavepoint(ctx, "before-upgrade")
	if err != nil {
		panic(err)
	}
	for _, e := range r.Manifest.GetTasks() {
		fmt.Printf("%s key groups [%d,%d) in %s\n", e.GetTaskId(), e.GetKeyGroupStart(), e.GetKeyGroupEnd(), e.GetState().GetKey())
	}
	// Output:
	// taken twice: true
	// count#0 key groups [0,64) in wordcount/savepoints/before-upgrade/chk-00000000000000000007/count#0.state
	// count#1 key groups [64,128) in wordcount/savepoints/before-upgrade/chk-00000000000000000007/count#1.state
}
