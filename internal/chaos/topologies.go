package chaos

import (
	"fmt"

	"github.com/snapflow/snapflow/messages"

	"github.com/snapflow/snapflow/topology"
)

// Shape is a topology of the soak. Build adds its operators to g; the final
// "last" state of every checker operator it names must equal Want.
type Shape struct {
	Name     string
	Checkers []string
	Build    func(g *topology.Graph, n int64, rate float64, in *Injector, v *Violations) *Sink
	// BuildPhase, set instead of Build, makes the shape run in phases of
	// different parallelisms, each stopped with a savepoint that the next
	// starts from (see Run). It adds the operators of phase ph to g, writing
	// to sink, the verifying sink of the whole run.
	BuildPhase func(g *topology.Graph, ph Phase, n int64, rate float64, in *Injector, sink *Sink)
	Want       func(n int64) map[int64]int64
	// Verify, when set, checks the output of a run of n records in place
	// of Want and the checkers, and adds its counts to res.
	Verify func(n int64, res *RunResult) error
	// CheckSavepoint, when set, checks the states of a phase's savepoint
	// further, and adds its counts to res.
	CheckSavepoint func(name string, states map[string]*messages.TaskState, res *RunResult) error
}

// keys is the number of keys of the soak's sources (a multiple of every
// source parallelism, so that each key has one producing task).
const keys = 64

// Shapes are the soak's topologies: a chain, a keyed fan-out 1 -> 4 -> 2, a
// union of two sources and a diamond.
var Shapes = []Shape{
	{
		Name:     "chain",
		Checkers: []string{"check"},
		Build: func(g *topology.Graph, n int64, rate float64, in *Injector, v *Violations) *Sink {
			src := Generate(g, "source", 0, keys, n, rate)
			relabel := topology.Map(src, "relabel", func(e Event) Event { return Event{Key: e.Key + 1000, Seq: e.Seq} })
			kept := topology.Filter(relabel, "keep", func(Event) bool { return true }, topology.Parallelism(1))
			sink := NewSink(v)
			topology.Sink(Check(kept, "check", 2, in, v), "sink", sink.Write)
			return sink
		},
		Want: func(n int64) map[int64]int64 { return shift(Expected(0, keys, n), 1000) },
	},
	{
		Name:     "fanout",
		Checkers: []string{"check", "check2"},
		Build: func(g *topology.Graph, n int64, rate float64, in *Injector, v *Violations) *Sink {
			src := Generate(g, "source", 0, keys, n, rate)
			first := Check(src, "check", 4, in, v)
			sink := NewSink(v)
			topology.Sink(Check(first, "check2", 2, in, v), "sink", sink.Write)
			return sink
		},
		Want: func(n int64) map[int64]int64 { return Expected(0, keys, n) },
	},
	{
		Name:     "union",
		Checkers: []string{"check"},
		Build: func(g *topology.Graph, n int64, rate float64, in *Injector, v *Violations) *Sink {
			a := Generate(g, "source-a", 0, keys, n, rate, topology.Parallelism(2))
			b := Generate(g, "source-b", keys, keys, n/2, rate)
			sink := NewSink(v)
			topology.Sink(Check(topology.Union(a, b), "check", 3, in, v), "sink", sink.Write)
			return sink
		},
		Want: func(n int64) map[int64]int64 {
			w := Expected(0, keys, n)
			for k, s := range Expected(keys, keys, n/2) {
				w[k] = s
			}
			return w
		},
	},
	{
		Name:     "diamond",
		Checkers: []string{"check"},
		Build: func(g *topology.Graph, n int64, rate float64, in *Injector, v *Violations) *Sink {
			src := Generate(g, "source", 0, keys, n, rate)
			even := topology.Filter(src, "even-keys", func(e Event) bool { return e.Key%2 == 0 })
			odd := topology.Filter(topology.Rebalance(src), "odd-keys", func(e Event) bool { return e.Key%2 == 1 }, topology.Parallelism(1))
			sink := NewSink(v)
			topology.Sink(Check(topology.Union(even, odd), "check", 2, in, v), "sink", sink.Write)
			return sink
		},
		Want: func(n int64) map[int64]int64 { return Expected(0, keys, n) },
	},
}

// MaxPhaseParallelism is the highest parallelism of a phase of Rescale.
const MaxPhaseParallelism = 4

// Rescale is the soak's rescaling shape, run in phases: a union of two
// KeyedSplits sources (one split per key, so that a key's records stay in
// order whatever the parallelism), a keyed checker and a second keyed
// checker. In a phase of parallelism p, source-a and check run p tasks,
// source-b p-1 (at least 1), and check2 and the sink
// MaxPhaseParallelism+1-p, so that every stage is rescaled at every phase.
var Rescale = Shape{
	Name:     "rescale",
	Checkers: []string{"check", "check2"},
	BuildPhase: func(g *topology.Graph, ph Phase, n int64, rate float64, in *Injector, sink *Sink) {
		p := ph.Parallelism
		a := KeyedSplits(g, "source-a", 0, keys, n/keys, rate, ph.Gate, topology.Parallelism(p))
		b := KeyedSplits(g, "source-b", keys, keys/2, n/keys/2, rate, ph.Gate, topology.Parallelism(max(1, p-1)))
		first := Check(topology.Union(a, b), "check", p, in, sink.v)
		p2 := MaxPhaseParallelism + 1 - p
		// Keyed into the sink (which sees each key's records in order),
		// rather than forward: a rescale from an unaligned checkpoint
		// redistributes the records in flight of keyed edges only.
		second := topology.KeyBy(Check(first, "check2", p2, in, sink.v), func(e Event) int64 { return e.Key })
		topology.Sink(second.Stream, "sink", sink.Write, topology.Parallelism(p2))
	},
	Want: func(n int64) map[int64]int64 {
		w := map[int64]int64{}
		for k := range int64(keys) {
			if n/keys > 0 {
				w[k] = n / keys
			}
			if k < keys/2 && n/keys/2 > 0 {
				w[keys+k] = n / keys / 2
			}
		}
		return w
	},
}

// ShapeNamed returns the shape called name.
func ShapeNamed(name string) (Shape, error) {
	for _, s := range append(Shapes[:len(Shapes):len(Shapes)], Rescale) {
		if s.Name == name {
			return s, nil
		}
	}
	return Shape{}, fmt.Errorf("chaos: no shape %q", name)
}

func shift(m map[int64]int64, by int64) map[int64]int64 {
	out := make(map[int64]int64, len(m))
	for k, v := range m {
		out[k+by] = v
	}
	return out
}
