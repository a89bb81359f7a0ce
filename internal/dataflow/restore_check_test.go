package dataflow

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// evolving describes a job for the restore checks: source -> [map] -> keyed
// count -> sink.
type evolving struct {
	maxP            int
	srcP, mapP, cnt int
	float           bool   // the count's state is a float64
	stateName       string // default "n"
	extraState      bool
	noState         bool // the counting operator is a stateless Map
	dropCount       bool // no counting operator at all
}

func (e evolving) plan(t *testing.T) (*Plan, map[string][]*messages.StateDescriptor) {
	t.Helper()
	var opts []GraphOption
	if e.maxP > 0 {
		opts = append(opts, MaxParallelism(e.maxP))
	}
	g := New("evolve", opts...)
	src := Sequence(g, "source", 1, 100, Parallelism(max(1, e.srcP)))
	if e.mapP > 0 {
		src = Map(Rebalance(src), "double", func(v int64) int64 { return 2 * v }, Parallelism(e.mapP))
	}
	name := e.stateName
	if name == "" {
		name = "n"
	}
	var out Stream[int64]
	switch {
	case e.dropCount:
		out = src
	case e.noState:
		out = Map(Rebalance(src), "count", func(v int64) int64 { return v }, Parallelism(max(1, e.cnt)))
	default:
		out = Process(KeyBy(src, func(v int64) int64 { return v % 7 }), "count",
			func(s *KeyedSetup[int64]) ProcessFunc[int64, int64, int64] {
				if e.float {
					Value[float64](s, name)
				} else {
					Value[int64](s, name)
				}
				if e.extraState {
					MapOf[string, int64](s, "extra")
				}
				return func(_ *Context[int64], v int64, out *Collector[int64]) error { out.Emit(v); return nil }
			}, Parallelism(max(1, e.cnt)))
	}
	Sink(out, "sink", func(int64) error { return nil })
	p, err := NewPlan(g)
	if err != nil {
		t.Fatal(err)
	}
	declared, err := p.DeclaredStates()
	if err != nil {
		t.Fatal(err)
	}
	return p, declared
}

// checkpointOf makes the manifest and task states a checkpoint of p would
// hold: source offsets, and keyed state with entries in one key group.
func checkpointOf(p *Plan, declared map[string][]*messages.StateDescriptor) (*messages.Manifest, map[string]*messages.TaskState) {
	m := &messages.Manifest{Job: p.Job, CheckpointId: 7, TopologyFingerprint: p.Fingerprint, MaxParallelism: uint32(p.MaxParallelism)}
	states := map[string]*messages.TaskState{}
	for _, t := range p.Tasks {
		m.Tasks = append(m.Tasks, &messages.TaskStateEntry{TaskId: t.ID, Operator: t.Operator, Subtask: uint32(t.Subtask)})
		st := &messages.TaskState{TaskId: t.ID, Operator: t.Operator, Subtask: uint32(t.Subtask)}
		switch {
		case t.Kind == KindSource:
			st.HasSourceOffset, st.SourceOffset = true, []byte{0, 0, 0, 0, 0, 0, 0, 9}
		case declared[t.Operator] != nil:
			st.StateDescriptors = declared[t.Operator]
			st.KeyGroups = []*messages.KeyGroupState{{KeyGroup: uint32(t.KeyGroupStart)}}
		}
		states[t.ID] = st
	}
	return m, states
}

func TestCheckRestore(t *testing.T) {
	base := evolving{srcP: 2, cnt: 3}
	for _, c := range []struct {
		name string
		next evolving
		opts RestoreOptions
		want []string // substrings of the problems; none: accepted
		is   error
	}{
		{name: "same job", next: base},
		{name: "stateless operator added at another parallelism", next: evolving{srcP: 2, cnt: 3, mapP: 5}},
		{name: "state added", next: evolving{srcP: 2, cnt: 3, extraState: true}},
		{name: "lower parallelism", next: evolving{srcP: 2, cnt: 2},
			want: []string{`operator "count": parallelism changed from 3 to 2`}},
		{name: "higher parallelism", next: evolving{srcP: 2, cnt: 4},
			want: []string{`operator "count": parallelism changed from 3 to 4`}},
		{name: "rescaled", next: evolving{srcP: 1, cnt: 4}, opts: RestoreOptions{Rescale: true}},
		{name: "rescaled at another max parallelism", next: evolving{maxP: 64, srcP: 2, cnt: 2}, opts: RestoreOptions{Rescale: true},
			want: []string{`operator "count": max parallelism changed from 128 to 64`}},
		{name: "source parallelism", next: evolving{srcP: 1, cnt: 3},
			want: []string{`operator "source": parallelism changed from 2 to 1`, "source position"}},
		{name: "max parallelism", next: evolving{maxP: 64, srcP: 2, cnt: 3},
			want: []string{`operator "count": max parallelism changed from 128 to 64`}},
		{name: "state type", next: evolving{srcP: 2, cnt: 3, float: true},
			want: []string{`"count"`, `"n"`}, is: ErrIncompatibleState},
		{name: "state renamed", next: evolving{srcP: 2, cnt: 3, stateName: "m"},
			want: []string{`"count"`, `"n"`}, is: ErrIncompatibleState},
		{name: "keyed state dropped", next: evolving{srcP: 2, cnt: 3, noState: true},
			want: []string{`operator "count": the checkpoint holds its keyed state, but it no longer declares keyed state`}},
		{name: "stateful operator removed", next: evolving{srcP: 2, dropCount: true},
			want: []string{`operator "count": the checkpoint holds its keyed state, but the job has no operator with that id`, "topology.OperatorID(\"count\")"}},
		{name: "stateful operator removed, allowed", next: evolving{srcP: 2, dropCount: true}, opts: RestoreOptions{AllowNonRestoredState: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			old, oldDecl := base.plan(t)
			m, states := checkpointOf(old, oldDecl)
			next, decl := c.next.plan(t)
			r, err := PlanRestore(next, decl, m, states, c.opts)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if c.opts.AllowNonRestoredState && c.next.dropCount && !slices.Equal(r.Dropped, []string{"count"}) {
					t.Errorf("Dropped = %v, want [count]", r.Dropped)
				}
				return
			}
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrRestoreRefused) || (c.is != nil && !errors.Is(err, c.is)) {
				t.Fatalf("%v does not wrap ErrRestoreRefused and %v", err, c.is)
			}
			var re *RestoreError
			if !errors.As(err, &re) || re.Checkpoint != 7 || re.Job != "evolve" {
				t.Fatalf("%v is not a RestoreError of checkpoint 7 of evolve", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %s", err, w)
				}
			}
		})
	}
}

// TestCheckRestoreOldCheckpoints: a checkpoint without a recorded max
// parallelism or descriptors (taken before they were recorded) restores into
// the same topology, and is refused for keyed state once the topology
// changed, since its key groups cannot be checked.
func TestCheckRestoreOldCheckpoints(t *testing.T) {
	base := evolving{cnt: 2}
	old, decl := base.plan(t)
	m, states := checkpointOf(old, decl)
	m.MaxParallelism = 0
	for _, st := range states {
		st.StateDescriptors = nil
	}
	if _, err := PlanRestore(old, decl, m, states, RestoreOptions{}); err != nil {
		t.Fatalf("same topology: %v", err)
	}
	changed, decl2 := evolving{cnt: 2, mapP: 3}.plan(t)
	if _, err := PlanRestore(changed, decl2, m, states, RestoreOptions{}); err == nil || !strings.Contains(err.Error(), "does not record its max parallelism") {
		t.Fatalf("changed topology: %v", err)
	}
	rescaled, decl3 := evolving{cnt: 3}.plan(t)
	if _, err := PlanRestore(rescaled, decl3, m, states, RestoreOptions{Rescale: true}); err == nil || !strings.Contains(err.Error(), "does not record its max parallelism") {
		t.Fatalf("rescaled: %v", err)
	}
}

// TestCheckRestoreListsEveryProblem: all problems come in one error.
func TestCheckRestoreListsEveryProblem(t *testing.T) {
	old, decl := evolving{srcP: 2, cnt: 3}.plan(t)
	m, states := checkpointOf(old, decl)
	next, decl2 := evolving{srcP: 1, cnt: 1, float: true}.plan(t)
	var re *RestoreError
	if _, err := PlanRestore(next, decl2, m, states, RestoreOptions{}); !errors.As(err, &re) || len(re.Problems) != 3 {
		t.Fatalf("%v: want 3 problems (source, count parallelism, state type)", err)
	}
}
