package membership

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// TaskRef names one planned task: subtask Subtask of operator Operator, at
// position Index in the plan (topology.TaskPlan's Operator, Subtask and
// Index).
type TaskRef struct {
	Operator string
	Subtask  int
	Index    int
}

// String returns "operator#subtask", the task's id in the plan.
func (t TaskRef) String() string { return t.Operator + "#" + strconv.Itoa(t.Subtask) }

// Placement says which worker hosts each task. The zero Placement places
// nothing.
type Placement struct {
	tasks   []TaskRef   // as given to Place
	host    []int       // host[i] is the position in workers of tasks[i]'s worker
	workers []Worker    // as given to Place
	byIndex map[int]int // TaskRef.Index -> position in tasks
}

// Place assigns every task to one of workers, deterministically: the same
// tasks and workers, in the same order, give the same placement. A worker
// hosts at most Slots tasks.
//
// Tasks are placed operator by operator, in the order each operator first
// appears in tasks, except that operators with more tasks than there are
// workers, which cannot be spread, come last. Each task goes to the worker that, among those with a
// free slot, hosts the fewest tasks of its operator so far, then has the
// most free slots; a tie goes to the first worker in round-robin order,
// starting after the worker that took the previous task. So an operator's
// tasks land on different workers whenever the slots allow it, and with
// equal slots the tasks are dealt round robin and the workers' loads differ
// by at most one.
//
// Place fails with ErrNotEnoughSlots when the workers offer fewer slots than
// there are tasks, and with ErrInvalid for a task without an operator, a
// negative subtask or index, a repeated index or operator#subtask, or a
// worker without an id, with Slots < 1, lost, or listed twice.
func Place(tasks []TaskRef, workers []Worker) (Placement, error) {
	if err := checkTasks(tasks); err != nil {
		return Placement{}, err
	}
	slots, err := checkWorkers(workers)
	if err != nil {
		return Placement{}, err
	}
	if slots < len(tasks) {
		return Placement{}, fmt.Errorf("%w: need %d for %d tasks, have %d on %d workers",
			ErrNotEnoughSlots, len(tasks), len(tasks), slots, len(workers))
	}
	p := Placement{
		tasks:   append([]TaskRef(nil), tasks...),
		host:    make([]int, len(tasks)),
		workers: append([]Worker(nil), workers...),
		byIndex: make(map[int]int, len(tasks)),
	}
	for i, t := range tasks {
		p.byIndex[t.Index] = i
	}
	free := make([]int, len(workers))
	for w := range workers {
		free[w] = workers[w].Slots
	}
	next := 0 // round-robin start
	count := make([]int, len(workers))
	for _, group := range byOperator(tasks, len(workers)) {
		clear(count)
		for _, i := range group {
			w := pick(free, count, next)
			p.host[i] = w
			free[w]--
			count[w]++
			next = (w + 1) % len(workers)
		}
	}
	return p, nil
}

// pick returns the worker for the next task of an operator: among the
// workers with a free slot, the fewest tasks of the operator (count), then
// the most free slots, then the first in round-robin order from next.
func pick(free, count []int, next int) int {
	best := -1
	for d := range free {
		w := (next + d) % len(free)
		switch {
		case free[w] == 0:
		case best < 0, count[w] < count[best], count[w] == count[best] && free[w] > free[best]:
			best = w
		}
	}
	if best < 0 {
		panic("membership: no free slot left although the slots were counted")
	}
	return best
}

// byOperator groups the positions of tasks by operator, in the order each
// operator first appears, except that the operators with more tasks than
// there are workers come last: they cannot be spread anyway, and placed
// first they could take the slots that spreading the others needs.
func byOperator(tasks []TaskRef, workers int) [][]int {
	var groups [][]int
	at := make(map[string]int)
	for i, t := range tasks {
		g, ok := at[t.Operator]
		if !ok {
			g = len(groups)
			at[t.Operator] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	slices.SortStableFunc(groups, func(a, b []int) int {
		return cmp.Compare(boolInt(len(a) > workers), boolInt(len(b) > workers))
	})
	return groups
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// checkTasks validates the tasks given to Place.
func checkTasks(tasks []TaskRef) error {
	index := make(map[int]TaskRef, len(tasks))
	name := make(map[TaskRef]bool, len(tasks)) // keyed with Index 0
	for _, t := range tasks {
		switch {
		case t.Operator == "":
			return fmt.Errorf("%w task list: task at index %d has no operator", ErrInvalid, t.Index)
		case t.Subtask < 0 || t.Index < 0:
			return fmt.Errorf("%w task list: task %s at index %d: negative subtask or index", ErrInvalid, t, t.Index)
		}
		if u, dup := index[t.Index]; dup {
			return fmt.Errorf("%w task list: tasks %s and %s share index %d", ErrInvalid, u, t, t.Index)
		}
		index[t.Index] = t
		key := TaskRef{Operator: t.Operator, Subtask: t.Subtask}
		if name[key] {
			return fmt.Errorf("%w task list: task %s listed twice", ErrInvalid, t)
		}
		name[key] = true
	}
	return nil
}

// checkWorkers validates the workers given to Place and returns their slots.
func checkWorkers(workers []Worker) (int, error) {
	slots := 0
	seen := make(map[string]bool, len(workers))
	for _, w := range workers {
		switch {
		case w.ID == "":
			return 0, fmt.Errorf("%w worker list: worker at %s has no id", ErrInvalid, w.Addr)
		case seen[w.ID]:
			return 0, fmt.Errorf("%w worker list: worker %s listed twice", ErrInvalid, w)
		case w.Slots < 1:
			return 0, fmt.Errorf("%w worker list: worker %s has %d slots, want at least 1", ErrInvalid, w, w.Slots)
		case w.Lost:
			return 0, fmt.Errorf("%w worker list: worker %s is lost (%s)", ErrInvalid, w, w.Reason)
		}
		seen[w.ID] = true
		slots += w.Slots
	}
	return slots, nil
}

// Len returns the number of placed tasks.
func (p Placement) Len() int { return len(p.tasks) }

// Worker returns the worker hosting the task with TaskRef.Index index, and
// false for an index that was not placed.
func (p Placement) Worker(index int) (Worker, bool) {
	i, ok := p.byIndex[index]
	if !ok {
		return Worker{}, false
	}
	return p.workers[p.host[i]], true
}

// Tasks returns the tasks hosted by the worker with id, in the order given
// to Place; none for a worker that hosts nothing or was not given.
func (p Placement) Tasks(id string) []TaskRef {
	var out []TaskRef
	for i, t := range p.tasks {
		if p.workers[p.host[i]].ID == id {
			out = append(out, t)
		}
	}
	return out
}

// Workers returns the workers that host at least one task, in the order
// given to Place.
func (p Placement) Workers() []Worker {
	used := make([]bool, len(p.workers))
	for _, w := range p.host {
		used[w] = true
	}
	var out []Worker
	for w, u := range used {
		if u {
			out = append(out, p.workers[w])
		}
	}
	return out
}

// String lists, for each worker that hosts tasks, its tasks and itself:
// "map#0,sum#1 -> w1@127.0.0.1:4001; map#1,sum#0 -> w2@127.0.0.1:4002".
func (p Placement) String() string {
	var b strings.Builder
	for _, w := range p.Workers() {
		if b.Len() > 0 {
			b.WriteString("; ")
		}
		for j, t := range p.Tasks(w.ID) {
			if j > 0 {
				b.WriteByte(',')
			}
			b.WriteString(t.String())
		}
		b.WriteString(" -> ")
		b.WriteString(w.String())
	}
	return b.String()
}
