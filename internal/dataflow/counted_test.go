package dataflow

import (
	"slices"
	"testing"
)

// TestCountedOutputs: a task counts each record it emits once, on one
// output per record, whatever the edges: three consumers of one stream, a
// broadcast, a hash edge, and a side output beside the main output.
func TestCountedOutputs(t *testing.T) {
	discard := func(int64) error { return nil }
	for _, tc := range []struct {
		name  string
		build func(g *Graph, src Stream[int64])
		want  []bool // the source task's outputs
	}{
		{"three consumers", func(_ *Graph, s Stream[int64]) {
			Sink(s, "a", discard, Parallelism(2))
			Sink(s, "b", discard)
			Sink(s, "c", discard, Parallelism(3))
		}, []bool{true, true, false, false, false, false}},
		{"broadcast", func(_ *Graph, s Stream[int64]) { Sink(Broadcast(s), "a", discard, Parallelism(3)) }, []bool{true, false, false}},
		{"hash", func(_ *Graph, s Stream[int64]) {
			Sink(KeyBy(s, func(v int64) int64 { return v }).Stream, "a", discard, Parallelism(3))
		}, []bool{true, true, true}},
		{"forward and broadcast", func(_ *Graph, s Stream[int64]) {
			Sink(s, "a", discard)
			Sink(Broadcast(s), "b", discard, Parallelism(2))
		}, []bool{true, false, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := New("counted")
			tc.build(g, Generate(g, "source", 10, func(i int64) int64 { return i }))
			p, err := NewPlan(g)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Tasks[0].CountedOutputs(); !slices.Equal(got, tc.want) {
				t.Errorf("CountedOutputs = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("side output", func(t *testing.T) {
		g := New("counted-side")
		late := NewSideOutput[int64]("late")
		keyed := KeyBy(Generate(g, "source", 10, func(i int64) int64 { return i }), func(v int64) int64 { return v })
		main := Process(keyed, "proc", func(*KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
			return func(ctx *Context[int64], v int64, out *Collector[int64]) error { late.Emit(ctx, v); return nil }
		})
		Sink(main, "a", discard, Parallelism(2))
		Sink(main, "b", discard)
		Sink(SideOutputOf(main, late), "c", discard, Parallelism(2))
		p, err := NewPlan(g)
		if err != nil {
			t.Fatal(err)
		}
		proc := p.Task("proc#0")
		want := make([]bool, len(proc.Outputs))
		for _, r := range proc.Routes {
			if r.To == "a" || r.To == "c" {
				for i := r.First; i < r.First+r.Targets; i++ {
					want[i] = true
				}
			}
		}
		if got := proc.CountedOutputs(); !slices.Equal(got, want) {
			t.Errorf("CountedOutputs = %v, want %v (routes %+v)", got, want, proc.Routes)
		}
	})
}
