package topology_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// The lecture's job: numbers summed by parity, by two keyed tasks, with
// the sums in keyed state.
func Example() {
	g := topology.New("paritysum")
	nums := topology.Sequence(g, "source", 1, 100)
	byParity := topology.KeyBy(nums, func(v int64) int64 { return v % 2 })
	sums := topology.Process(byParity, "sum", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		sum := topology.Value[int64](s, "sum")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			total, _ := sum.Get()
			sum.Set(total + v)
			if v >= 99 { // the last number of each parity
				out.Emit(total + v)
			}
			return nil
		}
	}, topology.Parallelism(2))
	var mu sync.Mutex
	var totals []int64
	topology.Sink(sums, "sink", func(v int64) error {
		mu.Lock()
		defer mu.Unlock()
		totals = append(totals, v)
		return nil
	})

	err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()))
	slices.Sort(totals)
	fmt.Println(totals, err)
	// Output: [2500 2550] <nil>
}

// A sink that writes in bulk takes the records a batch at a time; it must
// copy what it keeps, as the slice is reused.
func ExampleSinkBatch() {
	g := topology.New("bulk")
	nums := topology.Sequence(g, "source", 1, 1000)
	var mu sync.Mutex
	var rows, writes int
	topology.SinkBatch(nums, "db", func(batch []int64) error {
		mu.Lock()
		defer mu.Unlock()
		rows += len(batch) // one INSERT of len(batch) rows, say
		writes++
		return nil
	})

	err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithBatchSize(100))
	fmt.Println(rows, writes >= 10, err)
	// Output: 1000 true <nil>
}

// Validate reports every problem of a graph at once, each naming its
// operator.
func ExampleGraph_Validate() {
	g := topology.New("broken")
	nums := topology.Sequence(g, "source", 1, 10, topology.Parallelism(2))
	topology.Sink(topology.Forward(nums), "sink", func(int64) error { return nil }, topology.Parallelism(3))
	topology.Map(nums, "unused", func(v int64) int64 { return v })
	fmt.Println(g.Validate())
	// Output:
	// topology: job "broken" is invalid:
	//   - operator "sink": forward edge from "source" joins parallelism 2 to 3; use Rebalance or the same parallelism
	//   - operator "unused": its output stream is never consumed (a dangling stream): connect it to an operator or a sink
}

// partitions is a split source over fixed partitions: a split is a
// partition's number and the offset of its next record, 16 bytes. Splits
// move between tasks when the job is restored at another parallelism.
type partitions struct {
	data   [][]string // the records of each partition
	splits [][2]uint64
}

func (p *partitions) Open(_ context.Context, splits [][]byte) error {
	p.splits = p.splits[:0]
	for _, s := range splits {
		p.splits = append(p.splits, [2]uint64{binary.BigEndian.Uint64(s), binary.BigEndian.Uint64(s[8:])})
	}
	return nil
}

func (p *partitions) Read(buf []string) (int, error) {
	n := 0
	for i := range p.splits {
		part, next := p.splits[i][0], p.splits[i][1]
		for n < len(buf) && next < uint64(len(p.data[part])) {
			buf[n] = p.data[part][next]
			n, next = n+1, next+1
		}
		p.splits[i][1] = next
	}
	if n == 0 {
		return 0, io.EOF // every split is exhausted
	}
	return n, nil
}

func (p *partitions) Splits() [][]byte {
	out := make([][]byte, len(p.splits))
	for i, s := range p.splits {
		out[i] = binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, s[0]), s[1])
	}
	return out
}

func (p *partitions) Close() error { return nil }

// A source whose position is a list of splits, one per partition: three
// partitions read by two tasks.
func ExampleFromSplits() {
	data := [][]string{{"a1", "a2"}, {"b1"}, {"c1", "c2", "c3"}}
	g := topology.New("partitions")
	splits := topology.Splits{Initial: func(parallelism int) [][]byte {
		var out [][]byte
		for part := range data {
			out = append(out, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(part)), 0))
		}
		return out // split i is read by task i % parallelism
	}}
	records := topology.FromSplits(g, "partitions", splits, func(subtask, parallelism int) topology.SplitSource[string] {
		return &partitions{data: data}
	}, topology.Parallelism(2))
	var mu sync.Mutex
	var seen []string
	topology.Sink(records, "sink", func(r string) error {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, r)
		return nil
	})

	err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()))
	slices.Sort(seen)
	fmt.Println(seen, err)
	// Output: [a1 a2 b1 c1 c2 c3] <nil>
}

// DecodeValueState reads keyed state out of a stored checkpoint: here the
// final checkpoint of a finished job.
func ExampleDecodeValueState() {
	ctx := context.Background()
	store := snapshots.NewMem()
	g := topology.New("counts")
	words := topology.FromSlice(g, "words", []string{"a", "b", "a"})
	counts := topology.Process(topology.KeyBy(words, func(w string) string { return w }), "count",
		func(s *topology.KeyedSetup[string]) topology.ProcessFunc[string, string, int64] {
			n := topology.Value[int64](s, "n")
			return func(_ *topology.Context[string], _ string, _ *topology.Collector[int64]) error {
				c, _ := n.Get()
				n.Set(c + 1)
				return nil
			}
		})
	topology.Sink(counts, "sink", func(int64) error { return nil })
	if err := actors.Run(ctx, g, actors.WithStore(store)); err != nil {
		panic(err)
	}

	r, err := snapshots.NewCheckpoints(store, "counts", nil).LoadLatest(ctx)
	if err != nil {
		panic(err)
	}
	n, err := topology.DecodeValueState[string, int64](r.States["count#0"], "n")
	fmt.Println(n, err)
	// Output: map[a:2 b:1] <nil>
}
