package dataflow

import (
	"fmt"
	"slices"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

type dirtySender struct{}

func (dirtySender) Send(int, any, []int64) {}

// TestDirtyKeyGroupsFollowTheKeyHash: the key groups a record marks
// written are those a full snapshot places its state in, with KeyBy and
// with KeyByHash's own hash, for string and integer keys of 8 and 4
// bytes. Marking by the frozen hash under KeyByHash referenced stale
// copies of changed key groups.
func TestDirtyKeyGroupsFollowTheKeyHash(t *testing.T) {
	checkDirtyFollowsHash(t, func(i int) string { return fmt.Sprint("k", i) }, func(k string) uint64 { return uint64(len(k)) * 7 })
	checkDirtyFollowsHash(t, func(i int) int64 { return int64(i) }, func(k int64) uint64 { return uint64(k) })
	checkDirtyFollowsHash(t, func(i int) int32 { return int32(i) }, func(k int32) uint64 { return uint64(k) * 3 })
}

func checkDirtyFollowsHash[K Key](t *testing.T, key func(int) K, hash func(K) uint64) {
	t.Helper()
	for _, custom := range []bool{false, true} {
		const maxP = 128
		g := New("h", MaxParallelism(maxP))
		src := FromSlice(g, "src", []int{})
		var by KeyedStream[int, K]
		if custom {
			by = KeyByHash(src, key, hash)
		} else {
			by = KeyBy(src, key)
		}
		out := Process(by, "p", func(s *KeyedSetup[K]) ProcessFunc[K, int, int] {
			v := Value[int](s, "v")
			return func(_ *Context[K], x int, _ *Collector[int]) error {
				v.Set(x)
				return nil
			}
		})
		Sink(out, "sink", func(int) error { return nil })
		p, err := NewPlan(g)
		if err != nil {
			t.Fatal(err)
		}
		inst, err := p.NewInstance(p.Task("p#0").Index, InstanceContext{BatchSize: 8, Sender: dirtySender{}})
		if err != nil {
			t.Fatal(err)
		}
		batch := make([]int, 40)
		for i := range batch {
			batch[i] = i
		}
		if err := inst.ProcessBatch(0, batch, nil); err != nil {
			t.Fatal(err)
		}
		dirty := make([]uint64, KeyGroupWords(maxP))
		inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(dirty)
		var full messages.TaskState
		if err := inst.Snapshot(&full); err != nil {
			t.Fatal(err)
		}
		var want []int
		for _, g := range full.KeyGroups {
			want = append(want, int(g.KeyGroup))
		}
		if got := groupsOf(dirty); !slices.Equal(got, want) {
			t.Fatalf("%T keys, KeyByHash %t: marked key groups %v, the state lies in %v", *new(K), custom, got, want)
		}
	}
}
