package topology

import (
	"context"
	"errors"
	"fmt"

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

// Preflight runs the checks of every operator (see Check), each operator's
// in turn, and returns nil or an error wrapping ErrPreflight and each
// check's error, naming the operators.
func (p *Plan) Preflight(ctx context.Context) error {
	var errs []error
	for _, t := range p.Tasks {
		if t.Subtask != 0 || t.node == nil {
			continue
		}
		for _, check := range t.node.checks {
			if err := check(ctx); err != nil {
				errs = append(errs, fmt.Errorf("operator %q: %w", t.Operator, err))
			}
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrPreflight, errors.Join(errs...))
}
