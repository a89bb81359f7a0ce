package dataflow_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// paritySum builds the graph of the package documentation: the numbers
// 1..100, keyed by parity, summed per key by two tasks, into a sink.
func paritySum() *dataflow.Graph {
	g := dataflow.New("paritysum")
	nums := dataflow.Sequence(g, "source", 1, 100)
	byParity := dataflow.KeyBy(nums, func(v int64) int64 { return v % 2 })
	sums := dataflow.Process(byParity, "sum", func(s *dataflow.KeyedSetup[int64]) dataflow.ProcessFunc[int64, int64, int64] {
		total := dataflow.Value[int64](s, "total")
		return func(ctx *dataflow.Context[int64], v int64, out *dataflow.Collector[int64]) error {
			t, _ := total.Get()
			total.Set(t + v)
			out.Emit(t + v)
			return nil
		}
	}, dataflow.Parallelism(2))
	dataflow.Sink(sums, "sink", func(int64) error { return nil })
	return g
}

func ExampleNew() {
	g := paritySum()
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, t := range plan.Tasks {
		fmt.Printf("%s (%s) owns key groups [%d,%d)\n", t.ID, t.Kind, t.KeyGroupStart, t.KeyGroupEnd)
	}
	// Output:
	// source#0 (source) owns key groups [0,128)
	// sum#0 (operator) owns key groups [0,64)
	// sum#1 (operator) owns key groups [64,128)
	// sink#0 (sink) owns key groups [0,128)
}

func ExampleNewPlan() {
	plan, err := dataflow.NewPlan(paritySum())
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ch := range plan.Channels {
		fmt.Printf("%s -> %s input %d (%s)\n", plan.Tasks[ch.From].ID, plan.Tasks[ch.To].ID, ch.ToInput, ch.Partition)
	}
	// Output:
	// source#0 -> sum#0 input 0 (hash)
	// source#0 -> sum#1 input 0 (hash)
	// sum#0 -> sink#0 input 0 (rebalance)
	// sum#1 -> sink#0 input 1 (rebalance)
}

func ExampleGraph_Validate() {
	g := dataflow.New("broken", dataflow.MaxParallelism(4))
	nums := dataflow.Sequence(g, "numbers", 1, 10, dataflow.Parallelism(2))
	doubled := dataflow.Map(dataflow.Forward(nums), "double", func(v int64) int64 { return 2 * v }, dataflow.Parallelism(8))
	dataflow.Map(doubled, "unused", func(v int64) int64 { return v })

	err := g.Validate()
	var ve *dataflow.ValidationError
	fmt.Println(errors.Is(err, dataflow.ErrInvalid), errors.As(err, &ve))
	fmt.Println(err)
	// Output:
	// true true
	// topology: job "broken" is invalid:
	//   - operator "double": parallelism 8 exceeds the max parallelism 4
	//   - operator "double": forward edge from "numbers" joins parallelism 2 to 8; use Rebalance or the same parallelism
	//   - operator "unused": its output stream is never consumed (a dangling stream): connect it to an operator or a sink
}

// printer is a Sender that prints the batches a task emits.
type printer struct{}

func (printer) Send(output int, batch any, _ []int64) { fmt.Printf("output %d: %v\n", output, batch) }

// ExampleProcess drives one task of a keyed operator by hand, as the runtime
// does: it creates the instance, hands it batches, and snapshots its state.
func ExampleProcess() {
	plan, err := dataflow.NewPlan(paritySum())
	if err != nil {
		fmt.Println(err)
		return
	}
	sum, err := plan.NewInstance(plan.Task("sum#0").Index, dataflow.InstanceContext{BatchSize: 2, Sender: printer{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := sum.ProcessBatch(0, []int64{2, 4, 6}, nil); err != nil {
		fmt.Println(err)
		return
	}
	sum.Flush()
	var st messages.TaskState
	if err := sum.Snapshot(&st); err != nil {
		fmt.Println(err)
		return
	}
	totals, err := dataflow.DecodeValueState[int64, int64](&st, "total")
	fmt.Println(totals, err)
	// Output:
	// output 0: [2 6]
	// output 0: [12]
	// map[0:12] <nil>
}

// ExampleSequence reads a sequence split over three source tasks.
func ExampleSequence() {
	g := dataflow.New("numbers")
	dataflow.Sink(dataflow.Sequence(g, "source", 1, 10, dataflow.Parallelism(3)), "sink",
		func(int64) error { return nil }, dataflow.Parallelism(3))
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	for s := range 3 {
		inst, err := plan.NewInstance(s, dataflow.InstanceContext{BatchSize: 10, Sender: printer{}})
		if err != nil {
			fmt.Println(err)
			return
		}
		src := inst.(dataflow.SourceInstance)
		if err := src.Open(context.Background(), nil); err != nil {
			fmt.Println(err)
			return
		}
		n, status, err := src.Produce(10)
		fmt.Printf("%s read %d, done: %t, err: %v\n", plan.Tasks[s].ID, n, status == dataflow.SourceDone, err)
		src.Flush()
	}
	// Output:
	// source#0 read 4, done: true, err: <nil>
	// output 0: [1 4 7 10]
	// source#1 read 3, done: true, err: <nil>
	// output 0: [2 5 8]
	// source#2 read 3, done: true, err: <nil>
	// output 0: [3 6 9]
}

// ExampleKeyByHash places keys with the user's hash: key group k%4 of four,
// so with two tasks, keys 0, 1, 4, 5 go to the first task and 2, 3 to the second.
func ExampleKeyByHash() {
	g := dataflow.New("placed", dataflow.MaxParallelism(4))
	keyed := dataflow.KeyByHash(dataflow.Sequence(g, "source", 0, 5),
		func(v int64) int64 { return v }, func(k int64) uint64 { return uint64(k) })
	dataflow.Sink(keyed.Stream, "sink", func(int64) error { return nil }, dataflow.Parallelism(2))
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := plan.NewInstance(plan.Task("source#0").Index, dataflow.InstanceContext{BatchSize: 8, Sender: printer{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := src.(dataflow.SourceInstance).Open(context.Background(), nil); err != nil {
		fmt.Println(err)
		return
	}
	if _, _, err := src.(dataflow.SourceInstance).Produce(8); err != nil {
		fmt.Println(err)
		return
	}
	src.Flush()
	// Output:
	// output 0: [0 1 4 5]
	// output 1: [2 3]
}

// ExampleKeyBy sends every record of one key to the same task: here words,
// hashed to the key groups of two tasks.
func ExampleKeyBy() {
	g := dataflow.New("words")
	words := dataflow.FromSlice(g, "words", []string{"to", "be", "or", "not", "to", "be"})
	byWord := dataflow.KeyBy(words, func(w string) string { return w })
	dataflow.Sink(byWord.Stream, "count", func(string) error { return nil }, dataflow.Parallelism(2))
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		fmt.Println(err)
		return
	}
	src, err := plan.NewInstance(plan.Task("words#0").Index, dataflow.InstanceContext{BatchSize: 8, Sender: printer{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := src.(dataflow.SourceInstance).Open(context.Background(), nil); err != nil {
		fmt.Println(err)
		return
	}
	if _, _, err := src.(dataflow.SourceInstance).Produce(8); err != nil {
		fmt.Println(err)
		return
	}
	src.Flush()
	// Output:
	// output 0: [to be to be]
	// output 1: [or not]
}

// wordCounts keys words by their first letter and counts, per letter, each
// word in a map state.
func wordCounts(setup func(s *dataflow.KeyedSetup[string]) dataflow.ProcessFunc[string, string, string]) *dataflow.Graph {
	g := dataflow.New("words")
	words := dataflow.FromSlice(g, "words", []string{"apple", "avocado", "apple", "banana"})
	byLetter := dataflow.KeyBy(words, func(w string) string { return w[:1] })
	dataflow.Sink(dataflow.Process(byLetter, "count", setup), "sink", func(string) error { return nil })
	return g
}

// ExampleDecodeMapState reads a map state out of a task's snapshot, as a
// tool inspecting a checkpoint does.
func ExampleDecodeMapState() {
	plan, err := dataflow.NewPlan(wordCounts(func(s *dataflow.KeyedSetup[string]) dataflow.ProcessFunc[string, string, string] {
		counts := dataflow.MapOf[string, int64](s, "counts")
		return func(_ *dataflow.Context[string], w string, _ *dataflow.Collector[string]) error {
			n, _ := counts.Get(w)
			counts.Put(w, n+1)
			return nil
		}
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	task, err := plan.NewInstance(plan.Task("count#0").Index, dataflow.InstanceContext{BatchSize: 8, Sender: printer{}})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := task.ProcessBatch(0, []string{"apple", "avocado", "apple", "banana"}, nil); err != nil {
		fmt.Println(err)
		return
	}
	var st messages.TaskState
	if err := task.Snapshot(&st); err != nil {
		fmt.Println(err)
		return
	}
	counts, err := dataflow.DecodeMapState[string, string, int64](&st, "counts")
	fmt.Println(counts, err)
	// Asking for another type than the state holds is refused.
	_, err = dataflow.DecodeMapState[string, string, float64](&st, "counts")
	fmt.Println(errors.Is(err, dataflow.ErrIncompatibleState))
	// Output:
	// map[a:map[apple:2 avocado:1] b:map[banana:1]] <nil>
	// true
}

// lastSeen is per-word state with a field the default (JSON) codec would
// silently drop.
type lastSeen struct {
	count int64
	Word  string
}

// lastSeenCodec stores a lastSeen, unexported field included.
type lastSeenCodec struct{}

// CodecID names the encoding in state descriptors (see IdentifiedCodec).
func (lastSeenCodec) CodecID() string { return "example.lastSeen/v1" }

func (lastSeenCodec) Append(dst []byte, v lastSeen) ([]byte, error) {
	return fmt.Appendf(dst, "%d %s", v.count, v.Word), nil
}

func (lastSeenCodec) Decode(b []byte) (lastSeen, error) {
	var v lastSeen
	_, err := fmt.Sscanf(string(b), "%d %s", &v.count, &v.Word)
	return v, err
}

// ExampleMapOf declares map states: one with the default codecs, one whose
// values need a codec of their own, passed with MapCodecs. Plan.DeclaredStates
// lists what each operator declares, as the runtime checks it at Start.
func ExampleMapOf() {
	plan, err := dataflow.NewPlan(wordCounts(func(s *dataflow.KeyedSetup[string]) dataflow.ProcessFunc[string, string, string] {
		counts := dataflow.MapOf[string, int64](s, "counts")
		last := dataflow.MapOf(s, "last", dataflow.MapCodecs[string](nil, lastSeenCodec{}))
		return func(_ *dataflow.Context[string], w string, _ *dataflow.Collector[string]) error {
			n, _ := counts.Get(w)
			counts.Put(w, n+1)
			last.Put(w, lastSeen{count: n + 1, Word: w})
			return nil
		}
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	declared, err := plan.DeclaredStates()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, d := range declared["count"] {
		fmt.Printf("%s: %s %s[%s] of %s (%s)\n", d.Name, d.Kind, d.KeyType, d.MapKeyType, d.ValueType, d.ValueCodec)
	}
	// Output:
	// counts: map string[string] of int64 (snapflow.fixed8)
	// last: map string[string] of github.com/snapflow/snapflow/internal/dataflow_test.lastSeen (example.lastSeen/v1)
}

// ExampleValue_refused shows a state type that the default codec cannot
// store exactly: JSON would drop the unexported field, so the declaration
// is refused when the job starts, naming the operator, the state and the
// field. Passing a codec to Value (as ExampleMapOf does) accepts it.
func ExampleValue_refused() {
	plan, err := dataflow.NewPlan(wordCounts(func(s *dataflow.KeyedSetup[string]) dataflow.ProcessFunc[string, string, string] {
		dataflow.Value[lastSeen](s, "last")
		return func(*dataflow.Context[string], string, *dataflow.Collector[string]) error { return nil }
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	_, err = plan.DeclaredStates()
	fmt.Println(errors.Is(err, dataflow.ErrInvalidState))
	fmt.Println(err)
	// Output:
	// true
	// topology: operator "count": state "last": type github.com/snapflow/snapflow/internal/dataflow_test.lastSeen: field count is unexported, and JSON skips it; export it or pass a codec to Value
}

// ExampleCompareStateDescriptors checks a checkpoint's state descriptors
// against a redeployed job's: the value type changed from int64 to float64,
// which would misread every stored value.
func ExampleCompareStateDescriptors() {
	stored := []*messages.StateDescriptor{{Name: "total", Kind: "value", KeyType: "int64", ValueType: "int64", ValueCodec: "snapflow.fixed8"}}
	declared := []*messages.StateDescriptor{{Name: "total", Kind: "value", KeyType: "int64", ValueType: "float64", ValueCodec: "snapflow.fixed8"}}
	err := dataflow.CompareStateDescriptors("sum", stored, declared)
	fmt.Println(errors.Is(err, dataflow.ErrIncompatibleState))
	fmt.Println(err)
	fmt.Println(dataflow.CompareStateDescriptors("sum", stored, stored))
	// Output:
	// true
	// topology: operator "sum": the checkpoint's keyed state does not match the declared state: state "total": value type changed from int64 to float64; restore with the old declaration, or give a changed state a new name (it then starts empty)
	// <nil>
}
