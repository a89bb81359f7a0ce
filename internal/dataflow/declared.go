package dataflow

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/snapflow/snapflow/messages"
)

// DeclaredStates runs the setup function of every operator that declares
// keyed state (Process) once, for the TaskPlan of its subtask 0, on a
// throwaway KeyedSetup, and returns the descriptors of the states each
// declares, by operator name, in declaration order (empty for an operator
// that declares none). The runtime calls it when a job starts, before any
// record flows, to check a checkpoint against the declarations (see
// CompareStateDescriptors) and to fail early on a bad declaration.
//
// A setup that panics, returns a nil process function, declares a state
// twice or without a name, or declares a type the default codec cannot
// store exactly (see Value) gives an error naming the operator and wrapping
// ErrInvalidState; the errors of all operators are joined.
func (p *Plan) DeclaredStates() (map[string][]*messages.StateDescriptor, error) {
	out := map[string][]*messages.StateDescriptor{}
	var errs []error
	for _, t := range p.Tasks {
		if t.Subtask != 0 || t.node == nil || t.node.declare == nil {
			continue
		}
		descs, err := t.node.declare(t)
		if err != nil {
			errs = append(errs, fmt.Errorf("topology: operator %q: %w", t.Operator, err))
			continue
		}
		out[t.Operator] = descs
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// ErrPreflight is wrapped by the error of Preflight.
var ErrPreflight = errors.New("topology: an operator's check failed")

// Preflight runs the checks of every operator (see Check), all at the same
// time, and returns nil or an error wrapping ErrPreflight and each check's
// error, naming the operators, in the plan's order.
func (p *Plan) Preflight(ctx context.Context) error {
	type run struct {
		operator string
		check    func(context.Context) error
		err      error
	}
	var runs []*run
	for _, t := range p.Tasks {
		if t.Subtask != 0 || t.node == nil {
			continue
		}
		for _, check := range t.node.checks {
			runs = append(runs, &run{operator: t.Operator, check: check})
		}
	}
	// At the same time: a check may wait for a timeout (a silent broker).
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() { r.err = r.check(ctx) })
	}
	wg.Wait()
	var errs []error
	for _, r := range runs {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("operator %q: %w", r.operator, r.err))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPreflight, errors.Join(errs...))
}
