package dataflow

import (
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/messages"
)

// CoProcessFunc is the pair of functions of a two-input keyed operator:
// First handles the records of the first input, Second those of the
// second. Both see the same keyed state, timers and side outputs, scoped
// to the record's key.
type CoProcessFunc[K Key, A, B, O any] struct {
	First  ProcessFunc[K, A, O]
	Second ProcessFunc[K, B, O]
}

// CoProcess adds a keyed operator with two inputs of different types and
// the same key type: for joins and enrichment. Records of one key, from
// either input, go to the same task, which holds the key's state and
// timers. setup runs as for Process (see Process) and returns the two
// functions. The operator's watermark is the minimum of its inputs', and
// checkpoint alignment works as for a union. Both inputs must be keyed
// with KeyBy: KeyByHash places keys by a hash the other input would not
// follow, and Validate refuses it.
func CoProcess[K Key, A, B, O any](a KeyedStream[A, K], b KeyedStream[B, K], name string,
	setup func(*KeyedSetup[K]) CoProcessFunc[K, A, B, O], opts ...Option) Stream[O] {
	g := a.g
	checkFn(g, name, setup, setup == nil)
	if b.g != g {
		g.problem("operator %q: its two inputs belong to different graphs", name)
	}
	if a.codec.custom || b.codec.custom {
		g.problem("operator %q: CoProcess needs both inputs keyed with KeyBy; KeyByHash places keys by its own hash, which the other input would not follow", name)
	}
	keyA, keyB, codec := a.key, b.key, a.codec
	// newSetup runs setup for a task, for the declaration and for every
	// instance, and checks what it declared and returned.
	newSetup := func(task *TaskPlan, ic *InstanceContext) (*KeyedSetup[K], CoProcessFunc[K, A, B, O], error) {
		ks := newKeyedSetup(task, codec)
		if ic != nil {
			ks.useDisk(ic.DiskState, ic.Job)
		}
		fns := setup(ks)
		ks.sealed = true
		if fns.First == nil || fns.Second == nil {
			ks.fail("setup returned a CoProcessFunc without First or Second")
		}
		if ks.err != nil {
			return nil, fns, errors.Join(ks.err, ks.closeDisk())
		}
		if _, err := timerFuncOf[K, O](ks); err != nil {
			return nil, fns, errors.Join(err, ks.closeDisk())
		}
		return ks, fns, nil
	}
	n := g.addNode(name, KindOperator, opts, func(ic *InstanceContext) (Instance, error) {
		out, err := newCollector[O](ic)
		if err != nil {
			return nil, err
		}
		ks, f, err := newSetup(ic.Task, ic)
		if err != nil {
			return nil, err
		}
		ks.untracked = ic.SkipDirtyKeyGroups
		onTimer, _ := timerFuncOf[K, O](ks)
		sides, err := newSideOutputs(ic)
		if err != nil {
			return nil, err
		}
		ctx := &Context[K]{setup: ks, ts: minTime, wm: minTime, sides: &sides}
		first := &processInstance[K, A, O]{setup: ks, ctx: ctx, key: keyA, fn: f.First, onTimer: onTimer, out: out, in: newInputs[A]()}
		second := &processInstance[K, B, O]{setup: ks, ctx: ctx, key: keyB, fn: f.Second, onTimer: onTimer, out: out, in: newInputs[B]()}
		return &coProcessInstance[K, A, B, O]{processInstance: first, second: second, ports: ic.Task.InputPorts}, nil
	})
	connectPort(n, a.Stream, 0)
	connectPort(n, b.Stream, 1)
	n.keyedState = true
	n.declare = func(task *TaskPlan) (descs []*messages.StateDescriptor, err error) {
		defer func() {
			if r := recover(); r != nil {
				cause, _ := r.(error)
				err = &stateError{msg: fmt.Sprintf("setup panicked: %v", r), sentinel: ErrInvalidState, cause: cause}
			}
		}()
		ks, _, err := newSetup(task, nil)
		if err != nil {
			return nil, err
		}
		return ks.descriptors(), nil
	}
	return Stream[O]{g: g, parts: []part{{node: n}}}
}

// connectPort connects s to n as n's input port: 0 for the first input
// of a two-input operator, 1 for the second.
func connectPort[T any](n *node, s Stream[T], port int) {
	first := len(n.inputs)
	connect(n, s)
	for _, e := range n.inputs[first:] {
		e.port = port
	}
}

// coProcessInstance is a two-input keyed operator: the first input's
// process instance, which snapshots, restores and fires timers for both,
// and the second input's, which shares its state, context and output.
type coProcessInstance[K Key, A, B, O any] struct {
	*processInstance[K, A, O]
	second *processInstance[K, B, O]
	ports  []int // by input channel: 0 or 1
}

func (c *coProcessInstance[K, A, B, O]) ProcessBatch(input int, batch any, ts []int64) error {
	if input < len(c.ports) && c.ports[input] == 1 {
		return c.second.ProcessBatch(input, batch, ts)
	}
	return c.processInstance.ProcessBatch(input, batch, ts)
}
