package membership

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// workers returns live workers w1..wn at 127.0.0.1:4001.. with the given
// slots.
func workers(slots ...int) []Worker {
	out := make([]Worker, len(slots))
	for i, s := range slots {
		out[i] = Worker{ID: fmt.Sprintf("w%d", i+1), Addr: fmt.Sprintf("127.0.0.1:%d", 4001+i), Slots: s}
	}
	return out
}

// plan returns the tasks of operators with the given parallelisms, in plan
// order: "name:p" each.
func plan(ops ...string) []TaskRef {
	var out []TaskRef
	for _, op := range ops {
		name, p, _ := strings.Cut(op, ":")
		var n int
		fmt.Sscan(p, &n)
		for s := range n {
			out = append(out, TaskRef{Operator: name, Subtask: s, Index: len(out)})
		}
	}
	return out
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name    string
		tasks   []TaskRef
		workers []Worker
		want    string
	}{
		{"round robin continues across operators", plan("src:1", "map:3", "sum:2"), workers(2, 2, 2),
			"src#0,map#2 -> w1@127.0.0.1:4001; map#0,sum#0 -> w2@127.0.0.1:4002; map#1,sum#1 -> w3@127.0.0.1:4003"},
		{"one worker", plan("src:1", "sum:2"), workers(3),
			"src#0,sum#0,sum#1 -> w1@127.0.0.1:4001"},
		{"more slots than tasks: the next task starts after the last one", plan("a:2", "b:2"), workers(4, 4, 4),
			"a#0,b#1 -> w1@127.0.0.1:4001; a#1 -> w2@127.0.0.1:4002; b#0 -> w3@127.0.0.1:4003"},
		{"most free slots first", plan("a:2"), workers(1, 3, 2),
			"a#0 -> w2@127.0.0.1:4002; a#1 -> w3@127.0.0.1:4003"},
		// Plain round robin would put a#0 on w1 and both b tasks on w2.
		{"spread where round robin would not", plan("a:1", "b:2", "c:1"), workers(1, 3),
			"b#1 -> w1@127.0.0.1:4001; a#0,b#0,c#0 -> w2@127.0.0.1:4002"},
		// x cannot be spread over 2 workers; placed first it would take w1's
		// only slot, and both y tasks would land on w2.
		{"operators that cannot spread come last", plan("x:3", "y:2"), workers(1, 4),
			"y#1 -> w1@127.0.0.1:4001; x#0,x#1,x#2,y#0 -> w2@127.0.0.1:4002"},
		{"parallelism above the workers: evenly", plan("a:5"), workers(3, 3),
			"a#0,a#2,a#4 -> w1@127.0.0.1:4001; a#1,a#3 -> w2@127.0.0.1:4002"},
		{"an idle worker is left out", plan("a:1"), workers(1, 1),
			"a#0 -> w1@127.0.0.1:4001"},
		{"nothing to place", nil, workers(1), ""},
		{"nothing to place, no workers", nil, nil, ""},
		{"exactly full", plan("a:2", "b:3"), workers(1, 4),
			"a#1 -> w1@127.0.0.1:4001; a#0,b#0,b#1,b#2 -> w2@127.0.0.1:4002"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Place(tt.tasks, tt.workers)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.String(); got != tt.want {
				t.Fatalf("placement\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestPlaceOrderOfOperatorsIsFirstAppearance(t *testing.T) {
	// b's tasks are not contiguous: they are still placed as one operator,
	// after a (which appears first).
	tasks := []TaskRef{{"a", 0, 0}, {"b", 0, 1}, {"a", 1, 2}, {"b", 1, 3}}
	p, err := Place(tasks, workers(2, 2))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := p.String(), "a#0,b#0 -> w1@127.0.0.1:4001; a#1,b#1 -> w2@127.0.0.1:4002"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func TestPlacementAccessors(t *testing.T) {
	ws := workers(2, 2, 2)
	// Indices need not be positions, nor dense.
	tasks := []TaskRef{{"src", 0, 10}, {"sum", 0, 20}, {"sum", 1, 30}}
	p, err := Place(tasks, ws)
	if err != nil {
		t.Fatal(err)
	}
	if p.Len() != 3 {
		t.Fatalf("Len() = %d", p.Len())
	}
	for index, want := range map[int]string{10: "w1", 20: "w2", 30: "w3"} {
		if w, ok := p.Worker(index); !ok || w != ws[map[string]int{"w1": 0, "w2": 1, "w3": 2}[want]] {
			t.Errorf("Worker(%d) = %+v, %v, want %s", index, w, ok, want)
		}
	}
	if w, ok := p.Worker(0); ok {
		t.Errorf("Worker(0) = %+v for an index never placed", w)
	}
	if got := p.Tasks("w2"); !slices.Equal(got, []TaskRef{{"sum", 0, 20}}) {
		t.Errorf("Tasks(w2) = %v", got)
	}
	if got := p.Tasks("nobody"); got != nil {
		t.Errorf("Tasks(nobody) = %v", got)
	}
	if got := ids(p.Workers()); !slices.Equal(got, []string{"w1", "w2", "w3"}) {
		t.Errorf("Workers() = %v", got)
	}
	// The placement keeps its own copies.
	tasks[0].Operator, ws[0].Addr = "changed", "changed:1"
	if got := p.String(); got != "src#0 -> w1@127.0.0.1:4001; sum#0 -> w2@127.0.0.1:4002; sum#1 -> w3@127.0.0.1:4003" {
		t.Errorf("placement changed with its inputs: %s", got)
	}
	var zero Placement
	if _, ok := zero.Worker(0); ok || zero.Len() != 0 || zero.String() != "" || zero.Workers() != nil || zero.Tasks("w1") != nil {
		t.Error("the zero Placement is not empty")
	}
}

func TestPlaceRefuses(t *testing.T) {
	lost := workers(2)
	lost[0].Lost, lost[0].Reason = true, "connection closed"
	tests := []struct {
		name     string
		tasks    []TaskRef
		workers  []Worker
		sentinel error
		want     string
	}{
		{"not enough slots", plan("a:3", "b:3"), workers(2, 3), ErrNotEnoughSlots,
			"membership: not enough slots: need 6 for 6 tasks, have 5 on 2 workers"},
		{"no workers", plan("a:1"), nil, ErrNotEnoughSlots,
			"membership: not enough slots: need 1 for 1 tasks, have 0 on 0 workers"},
		{"no operator", []TaskRef{{"", 0, 3}}, workers(1), ErrInvalid,
			"membership: invalid task list: task at index 3 has no operator"},
		{"negative subtask", []TaskRef{{"a", -1, 0}}, workers(1), ErrInvalid, "task a#-1 at index 0: negative subtask or index"},
		{"negative index", []TaskRef{{"a", 0, -1}}, workers(1), ErrInvalid, "negative subtask or index"},
		{"repeated index", []TaskRef{{"a", 0, 0}, {"b", 0, 0}}, workers(2), ErrInvalid, "tasks a#0 and b#0 share index 0"},
		{"repeated task", []TaskRef{{"a", 0, 0}, {"a", 0, 1}}, workers(2), ErrInvalid, "task a#0 listed twice"},
		{"worker without id", plan("a:1"), []Worker{{Addr: "127.0.0.1:4001", Slots: 1}}, ErrInvalid,
			"membership: invalid worker list: worker at 127.0.0.1:4001 has no id"},
		{"worker twice", plan("a:1"), append(workers(1), workers(1)...), ErrInvalid, "worker w1@127.0.0.1:4001 listed twice"},
		{"worker without slots", plan("a:1"), workers(1, 0), ErrInvalid, "worker w2@127.0.0.1:4002 has 0 slots, want at least 1"},
		{"lost worker", plan("a:1"), lost, ErrInvalid, "worker w1@127.0.0.1:4001 is lost (connection closed)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Place(tt.tasks, tt.workers)
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q wrapping %v", err, tt.want, tt.sentinel)
			}
			if p.Len() != 0 {
				t.Fatalf("a refused placement placed %d tasks", p.Len())
			}
		})
	}
}

// TestPlaceProperties places random plans on random workers and checks:
// every task is placed once; no worker hosts more tasks than its slots; the
// same input gives the same placement; an operator with parallelism <= the
// number of workers never has two tasks on one worker when some placement
// within the slots spreads every such operator (decided by a max flow); and
// with equal slots the loads of the workers differ by at most one.
func TestPlaceProperties(t *testing.T) {
	spreadable := 0
	for seed := range uint64(3000) {
		rng := rand.New(rand.NewPCG(seed, 17))
		tasks := randomPlan(rng)
		ws := randomWorkers(rng)
		equal := rng.IntN(3) == 0
		if equal {
			for i := range ws {
				ws[i].Slots = ws[0].Slots
			}
		}
		where := fmt.Sprintf("seed %d: tasks %v on workers %+v", seed, tasks, ws)
		p, err := Place(tasks, ws)
		total := 0
		for _, w := range ws {
			total += w.Slots
		}
		if total < len(tasks) {
			want := fmt.Sprintf("need %d for %d tasks, have %d on %d workers", len(tasks), len(tasks), total, len(ws))
			if !errors.Is(err, ErrNotEnoughSlots) || !strings.Contains(err.Error(), want) {
				t.Fatalf("%s: error %v, want ErrNotEnoughSlots: %s", where, err, want)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		again, _ := Place(slices.Clone(tasks), slices.Clone(ws))
		if !reflect.DeepEqual(p, again) {
			t.Fatalf("%s: not deterministic:\n%s\n%s", where, p, again)
		}
		checkPlacement(t, where, p, tasks, ws)
		if canSpread(tasks, ws) {
			spreadable++
			checkSpread(t, where, p, tasks, ws)
		}
		if equal {
			checkBalance(t, where, p, ws)
		}
	}
	if spreadable < 1000 {
		t.Fatalf("only %d spreadable cases: the generator misses the property", spreadable)
	}
}

// checkPlacement checks that every task is placed once, within the slots.
func checkPlacement(t *testing.T, where string, p Placement, tasks []TaskRef, ws []Worker) {
	t.Helper()
	seen := make(map[int]bool)
	for _, w := range ws {
		hosted := p.Tasks(w.ID)
		if len(hosted) > w.Slots {
			t.Fatalf("%s: %s hosts %d tasks with %d slots", where, w, len(hosted), w.Slots)
		}
		for _, task := range hosted {
			if seen[task.Index] {
				t.Fatalf("%s: task %s placed twice", where, task)
			}
			seen[task.Index] = true
			if got, ok := p.Worker(task.Index); !ok || got.ID != w.ID {
				t.Fatalf("%s: Worker(%d) = %s, but %s hosts it", where, task.Index, got, w)
			}
		}
	}
	if len(seen) != len(tasks) || p.Len() != len(tasks) {
		t.Fatalf("%s: %d of %d tasks placed", where, len(seen), len(tasks))
	}
}

// checkSpread checks that no operator with parallelism <= len(ws) has two
// tasks on one worker.
func checkSpread(t *testing.T, where string, p Placement, tasks []TaskRef, ws []Worker) {
	t.Helper()
	for op, n := range parallelism(tasks) {
		if n > len(ws) {
			continue
		}
		on := make(map[string]string)
		for _, task := range tasks {
			if task.Operator != op {
				continue
			}
			w, _ := p.Worker(task.Index)
			if other, dup := on[w.ID]; dup {
				t.Fatalf("%s: %s and %s both on %s although the slots allow spreading:\n%s", where, other, task, w, p)
			}
			on[w.ID] = task.String()
		}
	}
}

// checkBalance checks that the loads of the workers differ by at most one.
func checkBalance(t *testing.T, where string, p Placement, ws []Worker) {
	t.Helper()
	lo, hi := len(p.tasks), 0
	for _, w := range ws {
		n := len(p.Tasks(w.ID))
		lo, hi = min(lo, n), max(hi, n)
	}
	if hi-lo > 1 {
		t.Fatalf("%s: loads from %d to %d with equal slots:\n%s", where, lo, hi, p)
	}
}

// randomPlan returns 1..5 operators of parallelism 1..6, now and then with
// their tasks interleaved.
func randomPlan(rng *rand.Rand) []TaskRef {
	var tasks []TaskRef
	for op := range 1 + rng.IntN(5) {
		for s := range 1 + rng.IntN(6) {
			tasks = append(tasks, TaskRef{Operator: fmt.Sprintf("op%d", op), Subtask: s})
		}
	}
	if rng.IntN(4) == 0 {
		rng.Shuffle(len(tasks), func(i, j int) { tasks[i], tasks[j] = tasks[j], tasks[i] })
	}
	for i := range tasks {
		tasks[i].Index = i
	}
	return tasks
}

// randomWorkers returns 1..6 workers of 1..6 slots.
func randomWorkers(rng *rand.Rand) []Worker {
	slots := make([]int, 1+rng.IntN(6))
	for i := range slots {
		slots[i] = 1 + rng.IntN(6)
	}
	return workers(slots...)
}

// parallelism returns the number of tasks of each operator.
func parallelism(tasks []TaskRef) map[string]int {
	n := make(map[string]int)
	for _, t := range tasks {
		n[t.Operator]++
	}
	return n
}

// canSpread reports whether some placement within the slots puts the tasks
// of every operator with parallelism <= len(ws) on distinct workers: a flow
// from a source through operators (capacity their parallelism) and workers
// (capacity 1 from an operator that must spread) to a sink (capacity the
// worker's slots) carries every task.
func canSpread(tasks []TaskRef, ws []Worker) bool {
	par := parallelism(tasks)
	ops := make([]string, 0, len(par))
	for op := range par {
		ops = append(ops, op)
	}
	// Nodes: 0 source, 1..len(ops) operators, then workers, then the sink.
	n := 2 + len(ops) + len(ws)
	sink := n - 1
	capacity := make([][]int, n)
	for i := range capacity {
		capacity[i] = make([]int, n)
	}
	for i, op := range ops {
		capacity[0][1+i] = par[op]
		for j := range ws {
			capacity[1+i][1+len(ops)+j] = par[op]
			if par[op] <= len(ws) {
				capacity[1+i][1+len(ops)+j] = 1
			}
		}
	}
	for j, w := range ws {
		capacity[1+len(ops)+j][sink] = w.Slots
	}
	return maxFlow(capacity, 0, sink) == len(tasks)
}

// maxFlow returns the maximum flow from s to t, by augmenting paths found
// depth first; capacity is consumed.
func maxFlow(capacity [][]int, s, t int) int {
	flow := 0
	for {
		seen := make([]bool, len(capacity))
		var augment func(u, limit int) int
		augment = func(u, limit int) int {
			if u == t {
				return limit
			}
			seen[u] = true
			for v, c := range capacity[u] {
				if c > 0 && !seen[v] {
					if f := augment(v, min(limit, c)); f > 0 {
						capacity[u][v] -= f
						capacity[v][u] += f
						return f
					}
				}
			}
			return 0
		}
		f := augment(s, 1<<30)
		if f == 0 {
			return flow
		}
		flow += f
	}
}
