package dataflow

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// checkpointFrom makes the manifest a checkpoint of p would hold, with the
// states given by task id, as the runtime writes it.
func checkpointFrom(p *Plan, states map[string]*messages.TaskState) *messages.Manifest {
	m := &messages.Manifest{Job: p.Job, CheckpointId: 9, TopologyFingerprint: p.Fingerprint, MaxParallelism: uint32(p.MaxParallelism)}
	for _, t := range p.Tasks {
		if states[t.ID] == nil {
			states[t.ID] = &messages.TaskState{TaskId: t.ID, Operator: t.Operator, OperatorId: t.OperatorID, Subtask: uint32(t.Subtask)}
		}
		m.Tasks = append(m.Tasks, &messages.TaskStateEntry{
			TaskId: t.ID, Operator: t.Operator, OperatorId: t.OperatorID, Subtask: uint32(t.Subtask),
			Parallelism: uint32(t.Parallelism), KeyGroupStart: uint32(t.KeyGroupStart), KeyGroupEnd: uint32(t.KeyGroupEnd),
		})
	}
	return m
}

// TestRescaleKeyedState restores the keyed state of the agg operator at
// every parallelism from 1 to 5 into every other: each key's state reaches
// the task that owns its key group, once, and each task reads only the
// stored tasks that held key groups of its range.
func TestRescaleKeyedState(t *testing.T) {
	events := userEvents(400)
	for from := 1; from <= 5; from++ {
		for to := 1; to <= 5; to++ {
			t.Run(fmt.Sprintf("%d to %d", from, to), func(t *testing.T) {
				reg := map[string]*aggStates{}
				p := mustPlan(t, aggGraph(from, reg))
				insts := map[string]Instance{}
				for s := range from {
					id := fmt.Sprintf("agg#%d", s)
					insts[id] = mustInstance(t, p, id, 8, noopSender{})
				}
				routeEvents(t, p, insts, events)
				want := map[string]int64{}
				states := map[string]*messages.TaskState{}
				for id, inst := range insts {
					states[id] = snapshot(t, inst)
					for k, v := range valuesOf(reg[id].sum) {
						want[k] = v
					}
				}
				m := checkpointFrom(p, states)

				reg2 := map[string]*aggStates{}
				p2 := mustPlan(t, aggGraph(to, reg2))
				decl, err := p2.DeclaredStates()
				if err != nil {
					t.Fatal(err)
				}
				if from != to {
					if _, err := PlanRestore(p2, decl, m, states, RestoreOptions{}); !errors.Is(err, ErrRestoreRefused) ||
						!strings.Contains(err.Error(), fmt.Sprintf("parallelism changed from %d to %d", from, to)) {
						t.Fatalf("without Rescale: %v", err)
					}
				}
				r, err := PlanRestore(p2, decl, m, states, RestoreOptions{Rescale: true})
				if err != nil {
					t.Fatal(err)
				}
				if rescaled := from != to; rescaled != slices.Contains(r.Rescaled, "agg") {
					t.Errorf("Rescaled = %v", r.Rescaled)
				}
				got := map[string]int64{}
				for _, task := range p2.Tasks {
					if task.Operator != "agg" {
						continue
					}
					tr := r.Task(task.Index)
					for _, part := range tr.Parts {
						old := mustTask(t, p, part)
						if old.KeyGroupEnd <= task.KeyGroupStart || task.KeyGroupEnd <= old.KeyGroupStart {
							t.Errorf("%s reads %s, whose key groups [%d,%d) are outside its range [%d,%d)",
								task.ID, part, old.KeyGroupStart, old.KeyGroupEnd, task.KeyGroupStart, task.KeyGroupEnd)
						}
					}
					inst := mustInstance(t, p2, task.ID, 8, noopSender{})
					if st := r.State(p2, task.Index, states); st != nil {
						for _, g := range st.KeyGroups {
							if int(g.KeyGroup) < task.KeyGroupStart || int(g.KeyGroup) >= task.KeyGroupEnd {
								t.Errorf("%s is given key group %d, outside [%d,%d)", task.ID, g.KeyGroup, task.KeyGroupStart, task.KeyGroupEnd)
							}
						}
						if err := inst.Restore(st); err != nil {
							t.Fatal(err)
						}
					}
					for k, v := range valuesOf(reg2[task.ID].sum) {
						if owner := TaskForKeyGroup(aggMaxP, to, int(HashString(k)%aggMaxP)); owner != task.Subtask {
							t.Errorf("key %q restored in %s, owned by subtask %d", k, task.ID, owner)
						}
						if _, dup := got[k]; dup {
							t.Errorf("key %q restored twice", k)
						}
						got[k] = v
					}
				}
				if !mapsEqual(got, want) {
					t.Errorf("restored sums %v, want %v", got, want)
				}
			})
		}
	}
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestRescaleSplits runs a Generate source through a chain of
// parallelisms, reading a random part of the records in each phase and
// restoring the next phase's tasks from the previous snapshot: every index
// is produced exactly once, whatever the chain, also after splits were
// divided or merged.
func TestRescaleSplits(t *testing.T) {
	chains := [][]int{{1, 4, 2, 3}, {3, 1, 5}, {2, 7, 7, 1}, {1, 2, 4, 8, 3}, {5, 5, 2}}
	for seed, chain := range chains {
		t.Run(fmt.Sprint(chain), func(t *testing.T) {
			const count = 300
			rng := rand.New(rand.NewPCG(uint64(seed), 7))
			var all []int64
			var states map[string]*messages.TaskState
			var prev *Plan
			for phase, par := range chain {
				g := New("gen")
				Sink(Sequence(g, "src", 0, count-1, Parallelism(par)), "sink", discard[int64])
				p := mustPlan(t, g)
				var r *Restore
				if prev != nil {
					var err error
					if r, err = PlanRestore(p, nil, checkpointFrom(prev, states), states, RestoreOptions{Rescale: true}); err != nil {
						t.Fatal(err)
					}
				}
				next := map[string]*messages.TaskState{}
				last := phase == len(chain)-1
				for _, task := range p.Tasks {
					if task.Kind != KindSource {
						continue
					}
					src, f := sourceTask(t, p, task.ID, 4)
					if r != nil {
						if st := r.State(p, task.Index, states); st != nil {
							if err := src.Restore(st); err != nil {
								t.Fatal(err)
							}
						}
					}
					if err := src.Open(t.Context(), nil); err != nil {
						t.Fatal(err)
					}
					if last {
						all = append(all, drain[int64](t, src, f, 3)...)
						continue
					}
					for range rng.IntN(12) {
						if _, _, err := src.Produce(1 + rng.IntN(5)); err != nil {
							t.Fatal(err)
						}
					}
					src.Flush()
					all = append(all, records[int64](t, f)...)
					var st messages.TaskState
					if err := src.Snapshot(&st); err != nil {
						t.Fatal(err)
					}
					st.TaskId, st.Operator, st.Subtask = task.ID, task.Operator, uint32(task.Subtask)
					next[task.ID] = wireRoundTrip(t, &st)
				}
				states, prev = next, p
			}
			slices.Sort(all)
			for i, v := range all {
				if v != int64(i) {
					t.Fatalf("records after the chain %v: %d at position %d (%d records); want 0..%d once each", chain, v, i, len(all), count-1)
				}
			}
			if len(all) != count {
				t.Fatalf("%d records, want %d", len(all), count)
			}
		})
	}
}

// TestRescaleSplitsSpread: scaling a generator out divides its splits, so
// every new task has records to produce.
func TestRescaleSplitsSpread(t *testing.T) {
	spec := func() *splitSpec {
		g := New("gen")
		Sink(Sequence(g, "src", 0, 999), "sink", discard[int64])
		return mustPlan(t, g).Tasks[0].node.splits
	}()
	dealt, _ := redistributeSplits([][][]byte{spec.initial(1)}, nil, 4, spec.divide)
	for s, splits := range dealt {
		if len(splits) != 1 {
			t.Errorf("task %d of 4 got %d splits, want 1", s, len(splits))
		}
	}
	// Near the end, a split with one record left is not divided.
	one := genSplit{next: 999, step: 1}.encode()
	if _, _, ok := spec.divide(one); ok {
		t.Error("a split with one record left was divided")
	}
}

// TestRescaleLegacyOffsets: a generator's one-offset position from before
// splits is converted, also when the job is rescaled.
func TestRescaleLegacyOffsets(t *testing.T) {
	old := func(par int) *Plan {
		g := New("gen")
		Sink(Sequence(g, "src", 0, 99, Parallelism(par)), "sink", discard[int64])
		return mustPlan(t, g)
	}
	p := old(2)
	states := map[string]*messages.TaskState{}
	// Task 0 produced 0,2,4 (3 records), task 1 produced 1,3 (2 records).
	for s, n := range []byte{3, 2} {
		id := fmt.Sprintf("src#%d", s)
		states[id] = &messages.TaskState{TaskId: id, Operator: "src", Subtask: uint32(s), HasSourceOffset: true,
			SourceOffset: []byte{0, 0, 0, 0, 0, 0, 0, n}}
	}
	p2 := old(3)
	r, err := PlanRestore(p2, nil, checkpointFrom(p, states), states, RestoreOptions{Rescale: true})
	if err != nil {
		t.Fatal(err)
	}
	var all []int64
	var produced int64
	for s := range 3 {
		task := p2.Tasks[s]
		src, f := sourceTask(t, p2, task.ID, 4)
		st := r.State(p2, task.Index, states)
		n, err := GeneratedRecords(st)
		if err != nil {
			t.Fatal(err)
		}
		produced += n
		if err := src.Restore(st); err != nil {
			t.Fatal(err)
		}
		if err := src.Open(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		all = append(all, drain[int64](t, src, f, 5)...)
	}
	if produced != 5 {
		t.Errorf("GeneratedRecords over the new tasks = %d, want the 5 of the old ones", produced)
	}
	slices.Sort(all)
	want := []int64{5}
	for i := int64(6); i < 100; i++ {
		want = append(want, i)
	}
	if !slices.Equal(all, want) {
		t.Errorf("after the restore the tasks produced %v, want 5..99", all)
	}
}

// offsetSource is a Source (one offset per task) over 0..n-1.
type offsetSource struct{ pos, n int }

func (s *offsetSource) Open(_ context.Context, off []byte) error {
	if len(off) > 0 {
		s.pos = int(off[0])
	}
	return nil
}
func (s *offsetSource) Read(buf []int) (int, error) {
	k := 0
	for ; k < len(buf) && s.pos < s.n; k++ {
		buf[k] = s.pos
		s.pos++
	}
	if s.pos == s.n {
		return k, io.EOF
	}
	return k, nil
}
func (s *offsetSource) Offset() []byte { return []byte{byte(s.pos)} }
func (s *offsetSource) Close() error   { return nil }

// TestRescaleRefusals: what PlanRestore refuses, each naming the operator
// and what to do.
func TestRescaleRefusals(t *testing.T) {
	offsets := func(par int, id string) *Plan {
		g := New("job")
		var opts []Option
		if id != "" {
			opts = append(opts, OperatorID(id))
		}
		src := FromSource(g, "in", func(int, int) Source[int] { return &offsetSource{n: 10} }, append(opts, Parallelism(par))...)
		Sink(src, "out", discard[int])
		return mustPlan(t, g)
	}
	states := func(p *Plan) map[string]*messages.TaskState {
		out := map[string]*messages.TaskState{}
		for _, task := range p.Tasks {
			if task.Kind == KindSource {
				out[task.ID] = &messages.TaskState{TaskId: task.ID, Operator: task.Operator, HasSourceOffset: true, SourceOffset: []byte{3}}
			}
		}
		return out
	}
	p := offsets(2, "")
	st := states(p)
	m := checkpointFrom(p, st)
	for _, c := range []struct {
		name string
		next *Plan
		opts RestoreOptions
		want string // "" accepted
	}{
		{"a Source rescaled", offsets(3, ""), RestoreOptions{Rescale: true}, `operator "in": its source keeps one offset per task (a Source), which cannot be redistributed over 3 tasks: implement SplitSource`},
		{"a Source at its parallelism", offsets(2, ""), RestoreOptions{Rescale: true}, ""},
		{"renamed, id kept", func() *Plan {
			g := New("job")
			Sink(FromSource(g, "input", func(int, int) Source[int] { return &offsetSource{n: 10} }, OperatorID("in"), Parallelism(2)), "out", discard[int])
			return mustPlan(t, g)
		}(), RestoreOptions{}, ""},
		{"renamed without an id", func() *Plan {
			g := New("job")
			Sink(FromSource(g, "input", func(int, int) Source[int] { return &offsetSource{n: 10} }, Parallelism(2)), "out", discard[int])
			return mustPlan(t, g)
		}(), RestoreOptions{}, `operator "in": the checkpoint holds its source position, but the job has no operator with that id`},
		{"a source dropped, even when allowed", func() *Plan {
			g := New("job")
			Sink(FromSource(g, "input", func(int, int) Source[int] { return &offsetSource{n: 10} }, Parallelism(2)), "out", discard[int])
			return mustPlan(t, g)
		}(), RestoreOptions{AllowNonRestoredState: true}, `refused even with actors.WithAllowNonRestoredState: give the source that replaces it topology.OperatorID("in")`},
		{"a Source become a split source", func() *Plan {
			g := New("job")
			Sink(Sequence(g, "in", 0, 9, Parallelism(2)), "out", discard[int64])
			return mustPlan(t, g)
		}(), RestoreOptions{}, `operator "in": the offset of stored task in#0 is not a position of this source: topology: source offset of 1 bytes, want 8`},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := PlanRestore(c.next, nil, m, st, c.opts)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if tr := r.Task(0); len(tr.Parts) != 1 || tr.Parts[0] != "in#0" || tr.Rescaled {
					t.Errorf("task 0 restores %+v, want in#0 whole", tr)
				}
				return
			}
			if !errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v\nwant it to say %s", err, c.want)
			}
		})
	}
}

// TestOperatorIDValidate: ids are unique and valid names, and an id
// different from the name changes the fingerprint while jobs without ids
// keep theirs.
func TestOperatorIDValidate(t *testing.T) {
	g := New("job")
	a := Map(Sequence(g, "src", 0, 1), "a", func(v int64) int64 { return v }, OperatorID("shared"))
	b := Map(a, "b", func(v int64) int64 { return v }, OperatorID("shared"))
	c := Map(b, "c", func(v int64) int64 { return v }, OperatorID("bad/id"))
	Sink(c, "src-copy", discard[int64], OperatorID("src"))
	err := g.Validate()
	for _, want := range []string{
		`operator "b": the operator id "shared" is also the id of operator "a"`,
		`operator "c": the operator id "bad/id" must not contain`,
		`operator "src-copy": the operator id "src" is also the id of operator "src"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate: %v\nwant it to say %s", err, want)
		}
	}

	plain := func(opts ...Option) string {
		g := New("job")
		Sink(Sequence(g, "src", 0, 1, opts...), "sink", discard[int64])
		return mustPlan(t, g).Fingerprint
	}
	if plain() != plain(OperatorID("src")) {
		t.Error("an id equal to the name changed the fingerprint")
	}
	if plain() == plain(OperatorID("other")) {
		t.Error("another id left the fingerprint unchanged")
	}
}

// TestPreflight: every operator's checks run, and their errors come
// together, each naming its operator.
func TestPreflight(t *testing.T) {
	g := New("job")
	var calls atomic.Int64
	// The source's and the map's checks wait for each other: they must
	// run at the same time (a silent service's timeout is paid once).
	srcIn, mIn := make(chan struct{}), make(chan struct{})
	meet := func(ctx context.Context, mine, theirs chan struct{}) error {
		close(mine)
		select {
		case <-theirs:
			return nil
		case <-ctx.Done():
			return errors.New("the other check never ran alongside")
		}
	}
	src := Sequence(g, "src", 0, 1, Check(func(ctx context.Context) error {
		calls.Add(1)
		return meet(ctx, srcIn, mIn)
	}), Parallelism(2))
	m := Map(src, "m", func(v int64) int64 { return v }, Check(func(ctx context.Context) error {
		calls.Add(1)
		if err := meet(ctx, mIn, srcIn); err != nil {
			return err
		}
		return errors.New("no service")
	}))
	Sink(m, "out", discard[int64], Check(func(context.Context) error { calls.Add(1); return errors.New("no permission") }))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err := mustPlan(t, g).Preflight(ctx)
	if calls := calls.Load(); calls != 3 {
		t.Errorf("%d checks ran, want 3 (once per operator)", calls)
	}
	if !errors.Is(err, ErrPreflight) || !strings.Contains(err.Error(), `operator "m": no service`) || !strings.Contains(err.Error(), `operator "out": no permission`) ||
		strings.Contains(err.Error(), "never ran alongside") {
		t.Errorf("Preflight: %v", err)
	}
	g2 := New("job")
	Sink(Sequence(g2, "src", 0, 1), "out", discard[int64])
	if err := mustPlan(t, g2).Preflight(t.Context()); err != nil {
		t.Errorf("a plan without checks: %v", err)
	}
}
