package actors_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// A process function splits its input between its main output and two
// side outputs of other types, one of them consumed through a shuffle at
// another parallelism; each record arrives exactly where it was sent.
func TestSideOutputs(t *testing.T) {
	const n = 20000
	g := topology.New("sides")
	odd := topology.NewSideOutput[string]("odd")
	big := topology.NewSideOutput[float64]("big")
	unused := topology.NewSideOutput[int]("unused")
	src := topology.Sequence(g, "src", 1, n, topology.Parallelism(2))
	evens := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 7 }), "split",
		func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				switch {
				case v%2 == 1:
					odd.Emit(ctx, "o")
				case v > n-100:
					big.Emit(ctx, float64(v))
				default:
					out.Emit(v)
				}
				unused.Emit(ctx, 1)
				return nil
			}
		}, topology.Parallelism(3))
	var mu sync.Mutex
	var evenSum, oddCount, bigCount int64
	topology.Sink(evens, "evens", func(v int64) error { mu.Lock(); evenSum += v; mu.Unlock(); return nil })
	odds := topology.SideOutputOf(evens, odd)
	topology.Sink(topology.Rebalance(odds), "odds", func(string) error { mu.Lock(); oddCount++; mu.Unlock(); return nil }, topology.Parallelism(2))
	topology.Sink(topology.SideOutputOf(evens, big), "bigs", func(float64) error { mu.Lock(); bigCount++; mu.Unlock(); return nil })
	if err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(testLogger(t))); err != nil {
		t.Fatal(err)
	}
	var wantEven int64
	for v := int64(2); v <= n-100; v += 2 {
		wantEven += v
	}
	if oddCount != n/2 || bigCount != 50 || evenSum != wantEven {
		t.Fatalf("odd %d (want %d), big %d (want 50), even sum %d (want %d)", oddCount, n/2, bigCount, evenSum, wantEven)
	}
}

func TestSideOutputRefusals(t *testing.T) {
	g := topology.New("bad-sides")
	src := topology.Sequence(g, "src", 1, 10)
	m := topology.Map(src, "map", func(v int64) int64 { return v })
	topology.Sink(topology.SideOutputOf(m, topology.NewSideOutput[int]("x")), "s1", func(int) error { return nil })
	topology.Sink(m, "s2", func(int64) error { return nil })
	err := g.Validate()
	if err == nil || !strings.Contains(err.Error(), `side output "x": only the main output of one Process operator has side outputs`) {
		t.Fatalf("Validate = %v", err)
	}
}
