package dataflow

import (
	"context"
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/messages"
)

// SplitSource is a replayable source whose position is a list of splits:
// one per partition of a topic, say, or per range of a sequence. A split is
// opaque to the runtime; its state (for example the partition and the next
// offset) is the source's to encode. Unlike the offset of a Source, which
// belongs to one task, splits can move between tasks, so a job restored at
// another parallelism (from a savepoint, say) redistributes them over its
// new source tasks. The runtime calls its methods from one goroutine at a
// time, and a SplitSource may implement Waker, as a Source may.
type SplitSource[T any] interface {
	// Open positions the source at splits, the states of the splits this
	// task reads: states returned by Splits, or by Splits.Initial for a job
	// without state. The list may be empty (more tasks than splits): the
	// source then ends at once. ctx is as for Source.Open.
	Open(ctx context.Context, splits [][]byte) error
	// Read is as Source.Read; it returns io.EOF once every split is
	// exhausted.
	Read(buf []T) (n int, err error)
	// Splits returns the state of every split given to Open, in the same
	// order, just after the last record Read returned. The runtime copies
	// the result.
	Splits() [][]byte
	// Close releases the source.
	Close() error
}

// Splits describes the splits of a FromSplits source.
type Splits struct {
	// Initial returns the splits of a job that starts without state, for
	// the operator's parallelism: split i is read by task i % parallelism.
	// Every task calls it, in every process of a cluster, so it must return
	// the same splits for the same parallelism each time: tasks that
	// disagree would read some records twice and others never.
	Initial func(parallelism int) [][]byte
	// Divide, optional, divides the state of a split into two splits that
	// together hold exactly the records it has left, or returns ok false
	// when it cannot. When a job is restored at a parallelism above its
	// number of splits, splits are divided until every task has one (or
	// none can be divided further); tasks without a split end at once.
	Divide func(split []byte) (a, b []byte, ok bool)
}

// splitSpec is what the plan knows of a split source.
type splitSpec struct {
	initial func(parallelism int) [][]byte
	divide  func(split []byte) (a, b []byte, ok bool)
	// fromOffset converts the one-offset position of a source that became
	// a split source (the built-in sources, see Generate) into splits; nil
	// when there is no such position.
	fromOffset func(subtask, parallelism int, offset []byte) ([][]byte, error)
}

// FromSplits adds a source whose position is a list of splits (see
// SplitSource). newSource is called once per task (and again after every
// restore) with the task's subtask index and the operator's parallelism.
func FromSplits[T any](g *Graph, name string, splits Splits, newSource func(subtask, parallelism int) SplitSource[T], opts ...Option) Stream[T] {
	if splits.Initial == nil {
		g.problem("operator %q: FromSplits needs Splits.Initial, the splits of a job without state", name)
	}
	return fromSplits(g, name, &splitSpec{initial: splits.Initial, divide: splits.Divide}, newSource, opts)
}

func fromSplits[T any](g *Graph, name string, spec *splitSpec, newSource func(subtask, parallelism int) SplitSource[T], opts []Option) Stream[T] {
	if newSource == nil {
		g.problem("operator %q: nil source function", name)
	}
	n := g.addNode(name, KindSource, opts, func(ic *InstanceContext) (Instance, error) {
		out, err := newCollector[T](ic)
		if err != nil {
			return nil, err
		}
		src := newSource(ic.Task.Subtask, ic.Task.Parallelism)
		if src == nil {
			return nil, fmt.Errorf("source function returned nil")
		}
		si := newSourceInstance[T](nil, out, ic)
		si.split = &splitReader[T]{src: src, spec: spec, task: ic.Task}
		if r, ok := src.(SplitReader[T]); ok {
			si.split.reader = r
			if c := si.clock; c != nil {
				c.splits = &splitClocks{outOfOrder: c.gen.OutOfOrderness(), idle: c.gen.IdleTimeout(), fallback: minTime}
			}
		}
		return si, nil
	})
	n.splits = spec
	checkWatermarks[T](g, n)
	return Stream[T]{g: g, parts: []part{{node: n}}}
}

// splitReader is the split side of a source task.
type splitReader[T any] struct {
	src       SplitSource[T]
	reader    SplitReader[T] // src, when it reads one split at a time
	spec      *splitSpec
	task      *TaskPlan
	splits    [][]byte // restored
	hasSplits bool
	opened    int // the number of splits given to Open
}

func (r *splitReader[T]) open(ctx context.Context, wake func()) error {
	if w, ok := r.src.(Waker); ok {
		w.SetWake(wake)
	}
	splits := r.splits
	if !r.hasSplits {
		splits = assignedSplits(r.spec.initial(r.task.Parallelism), r.task.Subtask, r.task.Parallelism)
	}
	if splits == nil {
		splits = [][]byte{}
	}
	r.opened = len(splits)
	return r.src.Open(ctx, splits)
}

// assignedSplits returns the splits that task subtask of parallelism tasks
// reads: those whose index is subtask modulo parallelism.
func assignedSplits(all [][]byte, subtask, parallelism int) [][]byte {
	out := [][]byte{}
	for i := subtask; i < len(all); i += parallelism {
		out = append(out, all[i])
	}
	return out
}

func (r *splitReader[T]) snapshot(st *messages.TaskState) error {
	splits := r.src.Splits()
	st.Splits = make([][]byte, len(splits))
	for i, s := range splits {
		st.Splits[i] = slices.Clone(s)
		if st.Splits[i] == nil {
			st.Splits[i] = []byte{}
		}
	}
	st.HasSplits = true
	return nil
}

func (r *splitReader[T]) restore(st *messages.TaskState) error {
	switch {
	case st.GetHasSplits():
		r.splits, r.hasSplits = st.GetSplits(), true
	case st.GetHasSourceOffset() && r.spec.fromOffset != nil:
		splits, err := r.spec.fromOffset(r.task.Subtask, r.task.Parallelism, st.GetSourceOffset())
		if err != nil {
			return err
		}
		r.splits, r.hasSplits = splits, true
	case st.GetHasSourceOffset():
		return fmt.Errorf("the checkpoint holds the source's position as one offset (it was a Source, see FromSource), but the source now reads splits (FromSplits)")
	}
	return nil
}

// redistributeSplits deals the splits of an operator's old tasks (in
// subtask order) out to parallelism new tasks: they are concatenated,
// divided with divide (when given) while there are fewer than parallelism,
// and split i goes to task i % parallelism. Every split goes to exactly one
// task. oldTS, when every old task has one, holds each split's event-time
// position (see messages.SourceEventTime), parallel to old; the positions
// are dealt out with their splits (both halves of a divided split keep
// its position), and ts is nil otherwise.
func redistributeSplits(old [][][]byte, oldTS [][]int64, parallelism int, divide func([]byte) ([]byte, []byte, bool)) (splits [][][]byte, ts [][]int64) {
	var all [][]byte
	var allTS []int64
	withTS := len(oldTS) == len(old)
	for i, s := range old {
		all = append(all, s...)
		if withTS && len(oldTS[i]) == len(s) {
			allTS = append(allTS, oldTS[i]...)
		} else {
			withTS = false
		}
	}
	for divide != nil && len(all) < parallelism {
		n, grew := len(all), false
		for i := 0; i < n && len(all) < parallelism; i++ {
			if a, b, ok := divide(all[i]); ok {
				all[i] = a
				all = append(all, b)
				if withTS {
					allTS = append(allTS, allTS[i])
				}
				grew = true
			}
		}
		if !grew {
			break
		}
	}
	splits = make([][][]byte, parallelism)
	for s := range splits {
		splits[s] = assignedSplits(all, s, parallelism)
	}
	if withTS {
		ts = make([][]int64, parallelism)
		for s := range ts {
			ts[s] = []int64{}
			for i := s; i < len(allTS); i += parallelism {
				ts[s] = append(ts[s], allTS[i])
			}
		}
	}
	return splits, ts
}
