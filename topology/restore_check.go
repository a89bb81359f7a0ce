package topology

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// ErrRestoreRefused is wrapped by the errors of CheckRestore: a checkpoint
// that cannot be restored exactly into a plan.
var ErrRestoreRefused = errors.New("topology: checkpoint cannot be restored exactly")

// RestoreError lists every reason a checkpoint cannot be restored into a
// plan, each naming its operator or state. It wraps ErrRestoreRefused, and
// ErrIncompatibleState when a state declaration changed.
type RestoreError struct {
	Job        string
	Checkpoint uint64
	Problems   []string
	errs       []error
}

func (e *RestoreError) Error() string {
	return fmt.Sprintf("topology: checkpoint %d of job %q cannot be restored exactly into this job:\n  - %s",
		e.Checkpoint, e.Job, strings.Join(e.Problems, "\n  - "))
}

// Unwrap lets errors.Is match ErrRestoreRefused and the causes.
func (e *RestoreError) Unwrap() []error { return append([]error{ErrRestoreRefused}, e.errs...) }

// oldOperator is what a checkpoint holds of one operator.
type oldOperator struct {
	tasks       int
	source      bool // a task holds a source offset
	keyed       bool // a task holds keyed state or state descriptors
	opState     bool // a task holds non-keyed operator state
	descriptors []*messages.StateDescriptor
}

func (o *oldOperator) stateful() bool { return o.source || o.keyed || o.opState }

func (o *oldOperator) what() string {
	var parts []string
	if o.source {
		parts = append(parts, "source offsets")
	}
	if o.keyed {
		parts = append(parts, "keyed state")
	}
	if o.opState {
		parts = append(parts, "operator state")
	}
	return strings.Join(parts, " and ")
}

// CheckRestore decides whether checkpoint m, whose task states are states,
// can be restored exactly into plan p, whose keyed operators declare the
// states in declared (see Plan.DeclaredStates). Until state can be
// redistributed, a restore is exact only when every operator that holds
// state in the checkpoint
//
//   - still exists, with the same kind and parallelism (each task gets its
//     own state back, and a source its own offsets);
//   - if it holds keyed state, still declares keyed state, under the same
//     max parallelism (otherwise keys would move to other key groups), and
//     declares every stored state with the same kind, types and codecs.
//
// Operators without state may change, appear or go; new operators and new
// states start empty. CheckRestore returns nil or a *RestoreError that lists
// every problem.
func CheckRestore(p *Plan, declared map[string][]*messages.StateDescriptor, m *messages.Manifest, states map[string]*messages.TaskState) error {
	old := map[string]*oldOperator{}
	for _, t := range m.GetTasks() {
		op := old[t.GetOperator()]
		if op == nil {
			op = &oldOperator{}
			old[t.GetOperator()] = op
		}
		op.tasks++
		st := states[t.GetTaskId()]
		if st == nil {
			continue
		}
		op.source = op.source || st.GetHasSourceOffset()
		op.keyed = op.keyed || len(st.GetKeyGroups()) > 0 || len(st.GetStateDescriptors()) > 0
		op.opState = op.opState || len(st.GetOperatorState()) > 0
		if op.descriptors == nil && len(st.GetStateDescriptors()) > 0 {
			op.descriptors = st.GetStateDescriptors()
		}
	}
	type newOperator struct {
		kind        Kind
		parallelism int
		keyed       bool
	}
	cur := map[string]newOperator{}
	for _, t := range p.Tasks {
		cur[t.Operator] = newOperator{kind: t.Kind, parallelism: t.Parallelism, keyed: t.node != nil && t.node.keyedState}
	}
	e := &RestoreError{Job: p.Job, Checkpoint: m.GetCheckpointId()}
	add := func(err error, format string, args ...any) {
		e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
		if err != nil {
			e.errs = append(e.errs, err)
		}
	}
	names := make([]string, 0, len(old))
	for name := range old {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		op := old[name]
		if !op.stateful() {
			continue
		}
		n, ok := cur[name]
		if !ok {
			add(nil, "operator %q: the checkpoint holds its %s, but the job has no operator of that name (its state would be dropped)", name, op.what())
			continue
		}
		if n.parallelism != op.tasks {
			add(nil, "operator %q: parallelism changed from %d to %d; its %s cannot be redistributed yet (rescaling is not supported): keep parallelism %d",
				name, op.tasks, n.parallelism, op.what(), op.tasks)
		}
		if op.source && n.kind != KindSource {
			add(nil, "operator %q: the checkpoint holds its source offsets, but it is now a %s", name, n.kind)
		}
		if !op.keyed {
			continue
		}
		if !n.keyed {
			add(nil, "operator %q: the checkpoint holds its keyed state, but it no longer declares keyed state (its state would be dropped)", name)
			continue
		}
		switch mp := int(m.GetMaxParallelism()); {
		case mp == 0 && m.GetTopologyFingerprint() != p.Fingerprint:
			add(nil, "operator %q: the checkpoint does not record its max parallelism (it predates that record) and the topology changed, so the key groups of its keyed state cannot be checked", name)
		case mp != 0 && mp != p.MaxParallelism:
			add(nil, "operator %q: max parallelism changed from %d to %d: every restored key would move to another key group; keep topology.MaxParallelism(%d)",
				name, mp, p.MaxParallelism, mp)
		}
		if err := CompareStateDescriptors(name, op.descriptors, declared[name]); err != nil {
			add(err, "%v", strings.TrimPrefix(err.Error(), "topology: "))
		}
	}
	if len(e.Problems) == 0 {
		return nil
	}
	return e
}
