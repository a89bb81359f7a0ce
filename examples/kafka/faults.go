package main

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"

	"github.com/snapflow/snapflow/actors/actorstest"
)

// faultPlan is a seeded plan of task failures, spread over the run: panics
// of distinct tasks (Faults.Process), and one failure of a sink task
// between a checkpoint's completion and its commit (Faults.Complete). Each
// fires once per process, at the first chance it gets once the output
// holds a given number of effects, so that the faults land at different
// points of the input whatever the machine's speed.
type faultPlan struct {
	say       func(format string, args ...any)
	committed func() int64 // effects in the output

	mu            sync.Mutex
	panics        map[string]int64 // task -> the output it panics at
	window        string           // the sink task failing in the commit window ("": none)
	windowAt      int64            // ... at the output it fails at
	sinceComplete map[string]int64 // batches processed since the last completion, per task
	n             int              // failures planned
	fired         int
}

// faultTasks are the tasks that process batches, where Process faults
// fire.
func faultTasks() []string {
	var out []string
	for _, op := range []string{"decode", "totals", "out"} {
		for s := range parallelism {
			out = append(out, fmt.Sprintf("%s#%d", op, s))
		}
	}
	return out
}

// planFaults plans n failures (0: none) at outputs below 80% of records:
// the first in the commit window of a sink task, the others panics of
// distinct tasks. (Every task has batches left to process while the
// output lacks a fifth of the effects, when the input is fed in chunks.)
func planFaults(seed uint64, n int, records int64, committed func() int64, say func(string, ...any)) *faultPlan {
	f := &faultPlan{say: say, committed: committed, panics: map[string]int64{}, sinceComplete: map[string]int64{}}
	if n <= 0 {
		return f
	}
	rng := rand.New(rand.NewPCG(seed, 0x6b61666b61))
	at := func() int64 { return rng.Int64N(max(1, records*4/5)) }
	f.window, f.windowAt = fmt.Sprintf("out#%d", rng.IntN(parallelism)), at()
	tasks := faultTasks()
	for _, i := range rng.Perm(len(tasks))[:min(n-1, len(tasks))] {
		f.panics[tasks[i]] = at()
	}
	f.n = 1 + len(f.panics)
	return f
}

// planned returns the number of failures planned.
func (f *faultPlan) planned() int { return f.n }

// String describes what the plan has yet to inject.
func (f *faultPlan) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.panics) == 0 && f.window == "" {
		return "none"
	}
	var parts []string
	tasks := make([]string, 0, len(f.panics))
	for t := range f.panics {
		tasks = append(tasks, t)
	}
	sort.Slice(tasks, func(i, j int) bool { return f.panics[tasks[i]] < f.panics[tasks[j]] })
	for _, t := range tasks {
		parts = append(parts, fmt.Sprintf("%s panics once the output holds %d effects", t, f.panics[t]))
	}
	if f.window != "" {
		parts = append(parts, fmt.Sprintf("%s fails between a checkpoint's completion and its commit once the output holds %d", f.window, f.windowAt))
	}
	return strings.Join(parts, "; ")
}

// faults returns the hooks that carry the plan out.
func (f *faultPlan) faults() *actorstest.Faults {
	return &actorstest.Faults{Process: f.process, Complete: f.complete}
}

func (f *faultPlan) process(task string) {
	f.mu.Lock()
	f.sinceComplete[task]++
	at, ok := f.panics[task]
	fire := ok && f.committed() >= at
	if fire {
		delete(f.panics, task)
		f.fired++
	}
	f.mu.Unlock()
	if fire {
		f.say("injected: %s panics (the output holds %d effects)", task, f.committed())
		panic(fmt.Sprintf("kafka example: injected failure of %s", task))
	}
}

func (f *faultPlan) complete(task string, checkpoint uint64) {
	f.mu.Lock()
	// Batches processed since the previous completion went (mostly) into
	// the transaction this completion commits: fail only when there were
	// some, so that the restore has records to commit.
	fire := task == f.window && f.committed() >= f.windowAt && f.sinceComplete[task] > 0
	f.sinceComplete[task] = 0
	if fire {
		f.window = ""
		f.fired++
	}
	f.mu.Unlock()
	if fire {
		f.say("injected: %s fails as checkpoint %d completes, before it commits its transaction", task, checkpoint)
		panic(fmt.Sprintf("kafka example: injected failure of %s between the completion of checkpoint %d and its commit", task, checkpoint))
	}
}

// injected returns the number of failures injected so far.
func (f *faultPlan) injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fired
}
