package actorstest_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// A test of a job's own operator: fail its task once and check that the
// job's result equals that of a run without the failure.
func ExampleWithFaults() {
	run := func(faults *actorstest.Faults) (int64, error) {
		g := topology.New("squares")
		nums := topology.Sequence(g, "source", 1, 2000)
		sums := topology.Process(topology.KeyBy(nums, func(int64) int64 { return 0 }), "sum",
			func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
				sum := topology.Value[int64](s, "sum")
				return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
					t, _ := sum.Get()
					sum.Set(t + v*v)
					if v == 2000 {
						out.Emit(t + v*v)
					}
					return nil
				}
			})
		var result atomic.Int64
		topology.Sink(sums, "sink", func(v int64) error { result.Store(v); return nil })
		opts := []actors.Option{actors.WithStore(snapshots.NewMem())}
		if faults != nil {
			opts = append(opts, actorstest.WithFaults(faults))
		}
		err := actors.Run(context.Background(), g, opts...)
		return result.Load(), err
	}

	var failed atomic.Bool
	faults := &actorstest.Faults{
		// Fail the task "sum#0" once, before the first batch it processes:
		// the job restarts it from its newest checkpoint.
		Process: func(task string) {
			if task == "sum#0" && !failed.Swap(true) {
				panic("injected failure")
			}
		},
	}
	want, err := run(nil)
	fmt.Println("without a failure:", want, err)
	got, err := run(faults)
	fmt.Println("with one:", got, err, "failed:", failed.Load())
	// Output:
	// without a failure: 2668667000 <nil>
	// with one: 2668667000 <nil> failed: true
}
