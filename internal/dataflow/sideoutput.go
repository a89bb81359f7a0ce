package dataflow

import (
	"fmt"
	"reflect"
)

// SideOutput names a typed side output of a Process operator: a stream of
// its own, for late records, errors or anything else that is not the
// operator's main output. Declare it once with NewSideOutput, emit to it
// from the process or timer function with Emit, and take its stream with
// SideOutputOf. Records emitted to a side output that no operator consumes
// are dropped.
type SideOutput[T any] struct{ tag *sideTag }

// sideTag identifies a side output; newCollector makes its Collector.
type sideTag struct {
	name         string
	typ          reflect.Type
	newCollector func(ic *InstanceContext, side int) (flusher, error)
}

// flusher is a Collector of any type.
type flusher interface {
	flush()
	pending() bool
}

// NewSideOutput returns a side output called name (for logs and errors).
func NewSideOutput[T any](name string) SideOutput[T] {
	return SideOutput[T]{tag: &sideTag{name: name, typ: reflect.TypeFor[T](),
		newCollector: func(ic *InstanceContext, side int) (flusher, error) { return newSideCollector[T](ic, side) }}}
}

// Name is the side output's name.
func (o SideOutput[T]) Name() string {
	if o.tag == nil {
		return ""
	}
	return o.tag.name
}

// SideEmitter is what Emit sends through: the Context of a process or
// timer function.
type SideEmitter interface {
	side(tag *sideTag) (c any, ts int64)
}

// Emit sends v to the side output, from a process or timer function whose
// context is ctx; v carries the timestamp of the record or timer being
// handled.
func (o SideOutput[T]) Emit(ctx SideEmitter, v T) {
	c, ts := ctx.side(o.tag)
	if c == nil {
		return // nobody consumes it
	}
	col := c.(*Collector[T])
	col.ts = ts
	col.Emit(v)
}

// SideOutputOf returns the stream of side output o of the Process operator
// whose main output is s. Validate refuses s when it is not the output of
// one Process operator, and two side outputs of one operator with the same
// name.
func SideOutputOf[T, O any](s Stream[O], o SideOutput[T]) Stream[T] {
	if o.tag == nil {
		s.g.problem("SideOutputOf: a zero SideOutput (make it with NewSideOutput)")
		return Stream[T]{g: s.g}
	}
	if len(s.parts) != 1 || s.parts[0].side != 0 || !s.parts[0].node.keyedState {
		s.g.problem("side output %q: only the main output of one Process operator has side outputs", o.tag.name)
		return Stream[T]{g: s.g}
	}
	n := s.parts[0].node
	k := 0
	for i, t := range n.sides {
		if t == o.tag {
			k = i + 1
			break
		}
		if t.name == o.tag.name {
			s.g.problem("operator %q: two side outputs called %q", n.name, t.name)
		}
	}
	if k == 0 {
		n.sides = append(n.sides, o.tag)
		k = len(n.sides)
	}
	return Stream[T]{g: s.g, parts: []part{{node: n, side: k}}}
}

// sideOutputs is a task's side outputs that something consumes.
type sideOutputs struct {
	tags []*sideTag
	cols []flusher
}

func newSideOutputs(ic *InstanceContext) (sideOutputs, error) {
	var so sideOutputs
	n := ic.Task.node
	if n == nil {
		return so, nil
	}
	for i, tag := range n.sides {
		c, err := tag.newCollector(ic, i+1)
		if err != nil {
			return so, fmt.Errorf("side output %q: %w", tag.name, err)
		}
		so.tags = append(so.tags, tag)
		so.cols = append(so.cols, c)
	}
	return so, nil
}

func (so *sideOutputs) collector(tag *sideTag) any {
	for i, t := range so.tags {
		if t == tag {
			return so.cols[i]
		}
	}
	return nil
}

func (so *sideOutputs) pending() bool {
	for _, c := range so.cols {
		if c.pending() {
			return true
		}
	}
	return false
}

func (so *sideOutputs) flush() {
	for _, c := range so.cols {
		c.flush()
	}
}
