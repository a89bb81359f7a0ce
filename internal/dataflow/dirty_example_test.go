package dataflow_test

import (
	"fmt"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// A task of a Process operator records the key groups its state writes: an
// incremental checkpoint snapshots only those, and a restore may load the
// key groups one at a time.
func ExampleKeyGroupSnapshotter() {
	g := dataflow.New("counts", dataflow.MaxParallelism(128))
	words := dataflow.KeyBy(dataflow.FromSlice(g, "words", []string{}), func(w string) string { return w })
	counts := dataflow.Process(words, "count", func(s *dataflow.KeyedSetup[string]) dataflow.ProcessFunc[string, string, int64] {
		n := dataflow.Value[int64](s, "n")
		return func(_ *dataflow.Context[string], _ string, _ *dataflow.Collector[int64]) error {
			c, _ := n.Get() // an int64 read writes nothing
			n.Set(c + 1)
			return nil
		}
	})
	dataflow.Sink(counts, "sink", func(int64) error { return nil })
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	newTask := func() dataflow.Instance {
		inst, err := plan.NewInstance(plan.Task("count#0").Index, dataflow.InstanceContext{BatchSize: 8, Sender: printer{}})
		if err != nil {
			panic(err)
		}
		return inst
	}
	task := newTask()
	if err := task.ProcessBatch(0, []string{"a", "b", "a"}, nil); err != nil {
		fmt.Println(err)
		return
	}
	ks := task.(dataflow.KeyGroupSnapshotter)
	dirty := make([]uint64, dataflow.KeyGroupWords(128))
	ks.TakeDirtyKeyGroups(dirty)
	groups := func(set []uint64) (out []int) {
		for kg := range 128 {
			if set[kg/64]&(1<<(kg%64)) != 0 {
				out = append(out, kg)
			}
		}
		return out
	}
	fmt.Println("written:", groups(dirty), "key groups of a and b:", dataflow.HashString("a")%128, dataflow.HashString("b")%128)

	var st messages.TaskState
	if err := ks.SnapshotKeyGroups(&st, dirty); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("snapshot holds", len(st.KeyGroups), "key groups and", len(st.StateDescriptors), "descriptor")

	restored := newTask()
	header := &messages.TaskState{StateDescriptors: st.StateDescriptors}
	if err := restored.Restore(header); err != nil {
		fmt.Println(err)
		return
	}
	for _, g := range st.KeyGroups {
		if err := restored.(dataflow.KeyGroupRestorer).RestoreKeyGroup(g); err != nil {
			fmt.Println(err)
			return
		}
	}
	clear(dirty)
	restored.(dataflow.KeyGroupSnapshotter).TakeDirtyKeyGroups(dirty)
	counts2, err := dataflow.DecodeValueState[string, int64](snapshotOf(restored), "n")
	fmt.Println("restored:", counts2, err, "written since:", groups(dirty))
	// Output:
	// written: [80 91] key groups of a and b: 91 80
	// snapshot holds 2 key groups and 1 descriptor
	// restored: map[a:2 b:1] <nil> written since: []
}

func snapshotOf(inst dataflow.Instance) *messages.TaskState {
	var st messages.TaskState
	if err := inst.Snapshot(&st); err != nil {
		panic(err)
	}
	return &st
}
