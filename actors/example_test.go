package actors_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// A word count with keyed state, checkpointed every 10ms.
func ExampleRun() {
	g := topology.New("wordcount")
	lines := topology.FromSlice(g, "lines", []string{"a b", "b c", "c", "c a"})
	words := topology.FlatMap(lines, "split", func(l string, out *topology.Collector[string]) error {
		for _, w := range strings.Fields(l) {
			out.Emit(w)
		}
		return nil
	})
	counts := topology.Process(topology.KeyBy(words, func(w string) string { return w }), "count",
		func(s *topology.KeyedSetup[string]) topology.ProcessFunc[string, string, string] {
			n := topology.Value[int64](s, "n") // keyed state, scoped to the current word
			return func(ctx *topology.Context[string], w string, out *topology.Collector[string]) error {
				c, _ := n.Get()
				n.Set(c + 1)
				out.Emit(fmt.Sprintf("%s=%d", ctx.Key(), c+1))
				return nil
			}
		}, topology.Parallelism(2))
	var mu sync.Mutex
	var seen []string
	topology.Sink(counts, "collect", func(s string) error {
		mu.Lock()
		seen = append(seen, s)
		mu.Unlock()
		return nil
	})

	err := actors.Run(context.Background(), g,
		actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(10*time.Millisecond))
	sort.Strings(seen)
	fmt.Println(seen, err)
	// Output: [a=1 a=2 b=1 b=2 c=1 c=2 c=3] <nil>
}

// Start runs a job in the background. Here an endless job is stopped with a
// savepoint, and a second run resumes from it: the sums in its state still
// equal the records its source has produced, none lost or counted twice.
func ExampleStart() {
	ctx := context.Background()
	store := snapshots.NewMem()
	build := func() *topology.Graph {
		g := topology.New("endless")
		nums := topology.Generate(g, "source", -1, func(i int64) int64 { return i }) // 0, 1, 2, ...
		sums := topology.Process(topology.KeyBy(nums, func(v int64) int64 { return v % 2 }), "sum",
			func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
				sum := topology.Value[int64](s, "sum")
				return func(_ *topology.Context[int64], v int64, _ *topology.Collector[int64]) error {
					t, _ := sum.Get()
					sum.Set(t + v)
					return nil
				}
			})
		topology.Sink(sums, "sink", func(int64) error { return nil })
		return g
	}

	job, err := actors.Start(ctx, build(), actors.WithStore(store))
	if err != nil {
		panic(err)
	}
	if _, err := job.StopWithSavepoint(ctx, "first"); err != nil {
		panic(err)
	}
	fmt.Println("first run stopped:", errors.Is(job.Wait(), actors.ErrStopped))

	job, err = actors.Start(ctx, build(), actors.WithStore(store), actors.WithSavepoint("first"))
	if err != nil {
		panic(err)
	}
	if _, err := job.StopWithSavepoint(ctx, "second"); err != nil {
		panic(err)
	}
	fmt.Println("second run stopped:", errors.Is(job.Wait(), actors.ErrStopped))

	sp, err := snapshots.NewCheckpoints(store, "endless", nil).LoadSavepoint(ctx, "second")
	if err != nil {
		panic(err)
	}
	n, _ := topology.GeneratedRecords(sp.States["source#0"])
	sums, _ := topology.DecodeValueState[int64, int64](sp.States["sum#0"], "sum")
	fmt.Println("sums match the source:", sums[0]+sums[1] == n*(n-1)/2)
	// Output:
	// first run stopped: true
	// second run stopped: true
	// sums match the source: true
}
