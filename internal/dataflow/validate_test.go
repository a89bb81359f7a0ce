package dataflow

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func id64(v int64) int64 { return v }

// link adds an edge from -> to behind the typed builder's back.
func link(from, to *node, p Partition) {
	e := &edge{from: from, to: to, partition: p}
	from.outputs = append(from.outputs, e)
	to.inputs = append(to.inputs, e)
}

// nodeNamed returns the node called name.
func nodeNamed(t *testing.T, g *Graph, name string) *node {
	t.Helper()
	for _, n := range g.nodes {
		if n.name == name {
			return n
		}
	}
	t.Fatalf("graph has no operator %q", name)
	return nil
}

// problems validates g, checks the error's types, and returns its problems.
func problems(t *testing.T, g *Graph) []string {
	t.Helper()
	err := g.Validate()
	if err == nil {
		t.Fatal("Validate() = nil, want an error")
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("errors.As(%T, *ValidationError) = false", err)
	}
	if ve.Job != g.Name() {
		t.Errorf("ValidationError.Job = %q, want %q", ve.Job, g.Name())
	}
	for _, p := range ve.Problems {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("Error() = %q does not list the problem %q", err, p)
		}
	}
	if _, perr := NewPlan(g); !errors.Is(perr, ErrInvalid) || perr.Error() != err.Error() {
		t.Errorf("NewPlan error = %v, want the validation error %v", perr, err)
	}
	return ve.Problems
}

func TestValidateValidGraph(t *testing.T) {
	g := New("ok")
	s := Sequence(g, "src", 1, 10, Parallelism(2))
	k := KeyBy(Map(s, "double", func(v int64) int64 { return 2 * v }, Parallelism(2)), id64)
	out := Process(k, "sum", func(*KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
		return func(_ *Context[int64], v int64, out *Collector[int64]) error { out.Emit(v); return nil }
	}, Parallelism(3))
	Sink(out, "sink", discard[int64])
	if err := g.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestValidateEachProblem(t *testing.T) {
	tests := []struct {
		name  string
		build func(t *testing.T) *Graph
		want  []string
	}{
		{
			name:  "empty graph",
			build: func(*testing.T) *Graph { return New("job") },
			want:  []string{"the graph is empty: add a source, operators and a sink"},
		},
		{
			name: "empty job name",
			build: func(*testing.T) *Graph {
				g := New("")
				Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
				return g
			},
			want: []string{"the job has an empty name"},
		},
		{
			name: "job name with a slash",
			build: func(*testing.T) *Graph {
				g := New("a/b")
				Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
				return g
			},
			want: []string{`job name "a/b" must not contain '/' or '\'`},
		},
		{
			name: "max parallelism 0",
			build: func(*testing.T) *Graph {
				g := New("job", MaxParallelism(0))
				Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
				return g
			},
			want: []string{"topology.MaxParallelism(0): the max parallelism must be between 1 and 32768"},
		},
		{
			name: "empty operator name",
			build: func(*testing.T) *Graph {
				g := New("job")
				Sink(Map(Sequence(g, "src", 1, 2), "", id64), "sink", discard[int64])
				return g
			},
			want: []string{"operator #1 (kind operator, numbered from 0 in the order added) has an empty name"},
		},
		{
			name: "duplicate operator name",
			build: func(*testing.T) *Graph {
				g := New("job")
				Sink(Map(Sequence(g, "x", 1, 2), "x", id64), "sink", discard[int64])
				return g
			},
			want: []string{`operator "x": the name is used by more than one operator`},
		},
		{
			name: "reserved character in operator name",
			build: func(*testing.T) *Graph {
				g := New("job")
				Sink(Sequence(g, "src#1", 1, 2), "sink", discard[int64])
				return g
			},
			want: []string{`operator "src#1": the name must not contain '#', '/' or '\'`},
		},
		{
			name: "parallelism 0",
			build: func(*testing.T) *Graph {
				g := New("job")
				Sink(Map(Sequence(g, "src", 1, 2), "m", id64, Parallelism(0)), "sink", discard[int64])
				return g
			},
			want: []string{`operator "m": parallelism 0 must be at least 1`},
		},
		{
			name: "parallelism above the max parallelism",
			build: func(*testing.T) *Graph {
				g := New("job", MaxParallelism(4))
				Sink(Map(Sequence(g, "src", 1, 2), "m", id64, Parallelism(5)), "sink", discard[int64])
				return g
			},
			want: []string{`operator "m": parallelism 5 exceeds the max parallelism 4`},
		},
		{
			// The typed API cannot express this: keyed state is declared
			// only by Process, which takes a KeyedStream, whose edges are
			// all Hash edges. Mark a Map's node as keyed behind its back.
			name: "keyed state on a non-keyed stream",
			build: func(t *testing.T) *Graph {
				g := New("job")
				Sink(Map(Sequence(g, "src", 1, 2), "m", id64), "sink", discard[int64])
				nodeNamed(t, g, "m").keyedState = true
				return g
			},
			want: []string{`operator "m": declares keyed state, but its input from "src" is not keyed (use KeyBy)`},
		},
		{
			name: "forward between different parallelisms",
			build: func(*testing.T) *Graph {
				g := New("job")
				s := Sequence(g, "src", 1, 2, Parallelism(2))
				Sink(Forward(s), "sink", discard[int64], Parallelism(3))
				return g
			},
			want: []string{`operator "sink": forward edge from "src" joins parallelism 2 to 3; use Rebalance or the same parallelism`},
		},
		{
			name: "dangling stream",
			build: func(*testing.T) *Graph {
				g := New("job")
				s := Sequence(g, "src", 1, 2)
				Sink(s, "sink", discard[int64])
				Map(s, "orphan", id64)
				return g
			},
			want: []string{`operator "orphan": its output stream is never consumed (a dangling stream): connect it to an operator or a sink`},
		},
		{
			// The typed builder cannot express a cycle: an operator's input
			// stream exists before the operator does. Add an edge back.
			name: "cycle",
			build: func(t *testing.T) *Graph {
				g := New("job")
				a := Map(Sequence(g, "src", 1, 2), "a", id64)
				Sink(Map(a, "b", id64), "sink", discard[int64])
				link(nodeNamed(t, g, "b"), nodeNamed(t, g, "a"), PartitionForward)
				return g
			},
			// Not "sink", which is downstream of the cycle but not on it.
			want: []string{`operator "a": is part of a cycle`, `operator "b": is part of a cycle`},
		},
		{
			name: "self loop",
			build: func(t *testing.T) *Graph {
				g := New("job")
				Sink(Map(Sequence(g, "src", 1, 2), "a", id64), "sink", discard[int64])
				a := nodeNamed(t, g, "a")
				link(a, a, PartitionRebalance)
				return g
			},
			want: []string{`operator "a": is part of a cycle`},
		},
		{
			// Only possible white-box: every typed constructor connects its input.
			name: "operator without input",
			build: func(*testing.T) *Graph {
				g := New("job")
				Sink(Sequence(g, "src", 1, 2), "sink", discard[int64])
				g.addNode("lonely", KindSink, nil, nil)
				return g
			},
			want: []string{`operator "lonely": has no input`},
		},
		{
			name: "nil functions",
			build: func(*testing.T) *Graph {
				g := New("job")
				src := FromSource[int64](g, "src", nil)
				gen := Generate[int64](g, "gen", 3, nil)
				s := Union(src, gen)
				m := Map[int64, int64](s, "map", nil)
				f := Filter(m, "filter", nil)
				fm := FlatMap[int64, int64](f, "flatmap", nil)
				k := KeyBy[int64, int64](fm, nil)
				p := Process[int64, int64, int64](k, "process", nil)
				kh := KeyByHash(p, id64, nil)
				p2 := Process(kh, "process2", func(*KeyedSetup[int64]) ProcessFunc[int64, int64, int64] { return nil })
				Sink(p2, "sink", nil)
				return g
			},
			want: []string{
				`operator "src": nil source function`,
				`operator "gen": nil generator function`,
				`operator "map": nil function func(int64) int64`,
				`operator "filter": nil function func(int64) bool`,
				`operator "flatmap": nil function func(int64, *dataflow.Collector[int64]) error`,
				`operator "flatmap": KeyBy of its output has a nil key function`,
				`operator "process": nil function func(*dataflow.KeyedSetup[int64]) dataflow.ProcessFunc[int64,int64,int64]`,
				`operator "process": KeyByHash of its output has a nil hash function`,
				`operator "sink": nil function func(int64) error`,
			},
		},
		{
			name: "union of streams of two graphs",
			build: func(*testing.T) *Graph {
				g, other := New("job"), New("other")
				s := Union(Sequence(g, "a", 1, 2), Sequence(other, "b", 1, 2))
				Sink(s, "sink", discard[int64])
				return g
			},
			want: []string{`operator "a": union with the output of operator "b", which belongs to another graph`},
		},
		{
			name: "key by a union",
			build: func(*testing.T) *Graph {
				g := New("job")
				s := Union(Sequence(g, "a", 1, 2), Sequence(g, "b", 1, 2))
				Sink(KeyBy[int64, int64](s, nil).Stream, "sink", discard[int64])
				return g
			},
			want: []string{`operators "a", "b": KeyBy of its output has a nil key function`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.build(t))
			if !slices.Equal(got, tt.want) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestValidateReportsEveryProblem checks that one graph with many problems
// gets them all in one error, not just the first.
func TestValidateReportsEveryProblem(t *testing.T) {
	g := New("", MaxParallelism(4))
	src := Sequence(g, "src", 1, 10, Parallelism(2))
	Map(src, "dangling", id64)
	fw := Map(Forward(src), "fw", id64, Parallelism(3))
	dup := Map(fw, "fw", id64, Parallelism(0))
	wide := Map(dup, "wide", id64, Parallelism(9))
	Sink(wide, "", nil)
	Map(wide, "cyc", id64)
	cyc := nodeNamed(t, g, "cyc")
	link(cyc, cyc, PartitionForward)

	got := problems(t, g)
	want := []string{
		"the job has an empty name",
		`operator "": nil function func(int64) error`,
		`operator "dangling": its output stream is never consumed`,
		`operator "fw": forward edge from "src" joins parallelism 2 to 3`,
		`operator "fw": the name is used by more than one operator`,
		`operator "fw": parallelism 0 must be at least 1`,
		`operator "wide": parallelism 9 exceeds the max parallelism 4`,
		`operator #5 (kind sink, numbered from 0 in the order added) has an empty name`,
		`operator "cyc": is part of a cycle`,
	}
	all := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("problems do not include %q; got:\n%s", w, all)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(got), len(want), all)
	}
}

func TestValidationErrorMessage(t *testing.T) {
	err := &ValidationError{Job: "j", Problems: []string{"one", "two"}}
	want := "topology: job \"j\" is invalid:\n  - one\n  - two"
	if err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
