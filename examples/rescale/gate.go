package main

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// gate holds the limit the order sources of one phase stop at: they
// produce only the indices below it. It starts closed (0), so the example
// first learns where the restored sources stand, then raises it to the
// phase's stop point, and waits on the sources' reports to know when every
// task has reached it: the phase then stops with a savepoint at an exact
// place, with no sleep and no source running to its end.
type gate struct {
	limit atomic.Int64

	mu      sync.Mutex
	wakes   map[string]func() // by task
	tasks   map[string]taskReport
	changed chan struct{} // closed and replaced on every report
}

// taskReport is what a source task last told the gate.
type taskReport struct {
	// start is the lowest index the task had left when it opened
	// (math.MaxInt64 when it had none).
	start int64
	// emitted is how many orders its splits had produced at the report.
	emitted int64
	// idleAt is the limit the task last went idle at, math.MaxInt64 once
	// it has produced every order of its splits, and -1 before either.
	idleAt int64
}

func newGate() *gate {
	return &gate{wakes: map[string]func(){}, tasks: map[string]taskReport{}, changed: make(chan struct{})}
}

func (g *gate) setWake(task string, wake func()) {
	g.mu.Lock()
	g.wakes[task] = wake
	g.mu.Unlock()
}

func (g *gate) report(task string, update func(*taskReport)) {
	g.mu.Lock()
	r, ok := g.tasks[task]
	if !ok {
		r = taskReport{start: math.MaxInt64, idleAt: -1}
	}
	update(&r)
	g.tasks[task] = r
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

func (g *gate) opened(task string, start, emitted int64) {
	g.report(task, func(r *taskReport) { *r = taskReport{start: start, emitted: emitted, idleAt: -1} })
}

func (g *gate) idle(task string, limit, emitted int64) {
	g.report(task, func(r *taskReport) { r.emitted, r.idleAt = emitted, limit })
}

func (g *gate) ended(task string, emitted int64) {
	g.report(task, func(r *taskReport) { r.emitted, r.idleAt = emitted, math.MaxInt64 })
}

// raise sets the limit and wakes every source task.
func (g *gate) raise(limit int64) {
	g.limit.Store(limit)
	g.mu.Lock()
	wakes := make([]func(), 0, len(g.wakes))
	for _, w := range g.wakes {
		wakes = append(wakes, w)
	}
	g.mu.Unlock()
	for _, w := range wakes {
		w()
	}
}

// wait waits until ok holds for the reports of the source tasks, and
// returns them. It returns an error when the job ends first (done is
// closed) or ctx ends.
func (g *gate) wait(ctx context.Context, done <-chan struct{}, what string, ok func(map[string]taskReport) bool) (map[string]taskReport, error) {
	for {
		g.mu.Lock()
		if ok(g.tasks) {
			out := make(map[string]taskReport, len(g.tasks))
			for k, v := range g.tasks {
				out[k] = v
			}
			g.mu.Unlock()
			return out, nil
		}
		changed := g.changed
		g.mu.Unlock()
		select {
		case <-changed:
		case <-done:
			return nil, fmt.Errorf("the job ended while waiting for %s", what)
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}

// allOpened returns a condition: every task in tasks has opened.
func allOpened(tasks []string) func(map[string]taskReport) bool {
	return func(r map[string]taskReport) bool {
		for _, t := range tasks {
			if _, ok := r[t]; !ok {
				return false
			}
		}
		return true
	}
}

// allReached returns a condition: every task in tasks has gone idle at
// limit (or above), or ended.
func allReached(tasks []string, limit int64) func(map[string]taskReport) bool {
	return func(r map[string]taskReport) bool {
		for _, t := range tasks {
			if rep, ok := r[t]; !ok || rep.idleAt < limit {
				return false
			}
		}
		return true
	}
}
