package dataflow

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
)

// hopPlan is src (2 tasks) -> rebalance -> "map" -> keyBy -> "agg" ->
// "sink" (4 tasks, so that the edge into it is a rebalance edge at every
// parallelism of agg), with map and agg at parallelism n.
func hopPlan(t *testing.T, n int) *Plan {
	t.Helper()
	g := New("flight", MaxParallelism(32))
	src := Sequence(g, "src", 0, 9, Parallelism(2))
	mapped := Map(Rebalance(src), "map", func(v int64) int64 { return v }, Parallelism(n))
	agg := Map(KeyBy(mapped, func(v int64) int64 { return v % 13 }).Stream, "agg", func(v int64) int64 { return v }, Parallelism(n))
	Sink(agg, "sink", discard[int64], Parallelism(4))
	return mustPlan(t, g)
}

// TestLateUpstreamRefused: records in flight one hop before a rescaled
// operator (src -> map, a rebalance edge, with map -> keyBy -> agg after
// it) whose event times lie between agg's stored watermarks could be late
// at the rescaled task they reach: the restore is refused, naming the
// edge. With the records on the edge into agg on time wherever they go,
// only the upstream check can see it (main restored it).
func TestLateUpstreamRefused(t *testing.T) {
	p1, p2 := hopPlan(t, 2), hopPlan(t, 3)
	for _, c := range []struct {
		name   string
		w0, w1 int64
		refuse bool
	}{
		{"between", 1e9, 0, true},
		{"all late", 1e9, 1e9, false},   // late before the rescale too
		{"all on time", 1000, 0, false}, // every record is above 1000
		{"no watermark", -1, -1, false}, // nothing stored
		{"one without", 1e9, -1, true},  // a task without a watermark: every record on time there
		{"same range reversed", 0, 1e9, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, states, _ := flightCheckpoint(t, p1)
			for id, w := range map[string]int64{"agg#0": c.w0, "agg#1": c.w1} {
				if w >= 0 {
					states[id].Watermark = &w
				}
			}
			for _, st := range states { // on the edge into agg: later than any watermark
				for _, it := range st.InFlight {
					if it.ToOperatorId == "agg" && !it.IsWatermark {
						ts, err := DecodeTimestamps(it.Timestamps, len(it.Ends))
						if err != nil {
							t.Fatal(err)
						}
						for i := range ts {
							ts[i] += 2e9
						}
						it.Timestamps = EncodeTimestamps(ts)
					}
				}
			}
			_, err := PlanRestore(p2, nil, m, states, RestoreOptions{Rescale: true})
			want := `the channels from operator "src" to operator "map" (its input 0) hold records in flight with event times up to`
			switch {
			case !c.refuse && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse && (!errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), want) ||
				!strings.Contains(err.Error(), `on their way to operator "agg"`)):
				t.Fatalf("got %v, want a refusal naming the edge src -> map", err)
			case c.refuse && strings.Contains(err.Error(), `to operator "agg" (its input`):
				t.Fatalf("the edge into agg is refused, but its records are on time everywhere: %v", err)
			}
		})
	}
}

// TestResumeWatermarkPerTask: a rescaled keyed task resumes from the
// highest watermark of the stored tasks whose key groups it takes, not of
// all of them (main: all of them): a task that takes only a slower task's
// key groups keeps its watermark, and no record on its way to it is held
// late because another task was ahead.
func TestResumeWatermarkPerTask(t *testing.T) {
	m, states, _ := keyedCheckpoint(t, 2, 100, 50)
	for _, c := range []struct {
		to   int
		want []int64
	}{{3, []int64{100, 100, 50}}, {4, []int64{100, 100, 50, 50}}, {1, []int64{100}}} {
		t.Run(fmt.Sprint(c.to), func(t *testing.T) {
			p2 := mustPlan(t, aggGraph(c.to, map[string]*aggStates{}))
			decl, err := p2.DeclaredStates()
			if err != nil {
				t.Fatal(err)
			}
			r, err := PlanRestore(p2, decl, m, states, RestoreOptions{Rescale: true})
			if err != nil {
				t.Fatal(err)
			}
			for s := range c.to {
				task := mustTask(t, p2, fmt.Sprintf("agg#%d", s))
				st := r.State(p2, task.Index, states)
				if st == nil || st.Watermark == nil || *st.Watermark != c.want[s] {
					t.Errorf("%s resumes from watermark %v, want %d", task.ID, st.GetWatermark(), c.want[s])
				}
			}
		})
	}
}

// TestLateAtLeastOnceRefused: an at-least-once checkpoint's watermarks
// can be ahead of records the sources read again, which it does not store:
// a rescale in which a task would resume above the watermark of a stored
// task whose key groups it takes is refused, naming the operator (main
// restored it). One where every task takes the key groups of one stored
// task, or the same checkpoint aligned, is restored.
func TestLateAtLeastOnceRefused(t *testing.T) {
	for _, c := range []struct {
		to          int
		w0, w1      int64
		atLeastOnce bool
		refuse      bool
	}{
		{3, 100, 50, true, true},   // agg#1 takes key groups of both
		{4, 100, 50, true, false},  // each takes one stored task's
		{1, 100, 50, true, true},   // one takes both
		{3, 100, 100, true, false}, // the same watermark
		{3, 100, 50, false, false}, // aligned: a consistent cut
	} {
		t.Run(fmt.Sprintf("%d,%d,%d,%v", c.to, c.w0, c.w1, c.atLeastOnce), func(t *testing.T) {
			m, states, _ := keyedCheckpoint(t, 2, c.w0, c.w1)
			m.AtLeastOnce = c.atLeastOnce
			p2 := mustPlan(t, aggGraph(c.to, map[string]*aggStates{}))
			decl, err := p2.DeclaredStates()
			if err != nil {
				t.Fatal(err)
			}
			_, err = PlanRestore(p2, decl, m, states, RestoreOptions{Rescale: true})
			want := `operator "agg": the checkpoint was taken at least once (actors.CheckpointAtLeastOnce)`
			switch {
			case !c.refuse && err != nil:
				t.Fatalf("refused: %v", err)
			case c.refuse && (!errors.Is(err, ErrRestoreRefused) || !strings.Contains(err.Error(), want)):
				t.Fatalf("got %v, want a refusal naming agg", err)
			}
		})
	}
}

// keyedCheckpoint is a checkpoint of aggGraph at parallelism from, with
// keyed state in every task, whose tasks agg#0 and agg#1 stored watermarks
// w0 and w1.
func keyedCheckpoint(t *testing.T, from int, w0, w1 int64) (*messages.Manifest, map[string]*messages.TaskState, *Plan) {
	t.Helper()
	p := mustPlan(t, aggGraph(from, map[string]*aggStates{}))
	insts := map[string]Instance{}
	for s := range from {
		id := fmt.Sprintf("agg#%d", s)
		insts[id] = mustInstance(t, p, id, 8, noopSender{})
	}
	routeEvents(t, p, insts, userEvents(400))
	states := map[string]*messages.TaskState{}
	for id, inst := range insts {
		states[id] = snapshot(t, inst)
	}
	states["agg#0"].Watermark, states["agg#1"].Watermark = &w0, &w1
	return checkpointFrom(p, states), states, p
}
