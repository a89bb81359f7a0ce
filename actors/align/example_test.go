package align_test

import (
	"fmt"

	"github.com/snapflow/snapflow/actors/align"
)

// A task with two inputs: barrier 1 blocks input 0, whose later data wait
// until barrier 1 arrives on input 1 too.
func ExampleAligner() {
	a := align.New[string](2)
	var out []align.Action[string]
	for _, ev := range []align.Event[string]{
		{Kind: align.Data, Input: 0, Data: "a0"},
		{Kind: align.Barrier, Input: 0, Checkpoint: 1},
		{Kind: align.Data, Input: 0, Data: "a1"}, // buffered
		{Kind: align.Data, Input: 1, Data: "b0"},
		{Kind: align.Barrier, Input: 1, Checkpoint: 1},
		{Kind: align.End, Input: 0},
		{Kind: align.End, Input: 1},
	} {
		out = a.Step(ev, out[:0])
		for _, act := range out {
			switch act.Kind {
			case align.Process:
				fmt.Println("process", act.Data)
			case align.Snapshot:
				fmt.Println("snapshot", act.Checkpoint, "and emit the barrier")
			default:
				fmt.Println(act)
			}
		}
	}
	// Output:
	// process a0
	// process b0
	// snapshot 1 and emit the barrier
	// process a1
	// end-of-input in=0
	// end-of-input in=1
	// all-ended
}

// The coordinator gives checkpoint 1 up while input 1 has not delivered its
// barrier: the buffered data of input 0 are released.
func ExampleAligner_AbortCheckpoint() {
	a := align.New[string](2)
	var out []align.Action[string]
	out = a.Step(align.Event[string]{Kind: align.Barrier, Input: 0, Checkpoint: 1}, out)
	out = a.Step(align.Event[string]{Kind: align.Data, Input: 0, Data: "a1"}, out)
	id, _ := a.Aligning()
	fmt.Println("aligning", id, "buffered", a.Buffered())
	out = a.AbortCheckpoint(1, out[:0])
	for _, act := range out {
		fmt.Println(act)
	}
	// A late barrier of the aborted checkpoint is ignored.
	out = a.Step(align.Event[string]{Kind: align.Barrier, Input: 1, Checkpoint: 1}, out[:0])
	fmt.Println(len(out), "actions")
	// Output:
	// aligning 1 buffered 1
	// abort id=1
	// process in=0
	// 0 actions
}
