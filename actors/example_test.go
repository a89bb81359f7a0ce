package actors_test

import (
	"context"
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
