package dataflow

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/snapflow/snapflow/messages"
)

// ErrRestoreRefused is wrapped by the errors of PlanRestore: a checkpoint
// or savepoint that cannot be restored exactly into a plan.
var ErrRestoreRefused = errors.New("topology: checkpoint cannot be restored exactly")

// RestoreError lists every reason a checkpoint cannot be restored into a
// plan, each naming its operator or state. It wraps ErrRestoreRefused, and
// ErrIncompatibleState when a state declaration changed.
type RestoreError struct {
	Job        string
	Checkpoint uint64
	// Savepoint is the savepoint's name, "" for a checkpoint.
	Savepoint string
	Problems  []string
	errs      []error
}

// Error implements error.
func (e *RestoreError) Error() string {
	what := fmt.Sprintf("checkpoint %d", e.Checkpoint)
	if e.Savepoint != "" {
		what = fmt.Sprintf("savepoint %q (checkpoint %d)", e.Savepoint, e.Checkpoint)
	}
	return fmt.Sprintf("topology: %s of job %q cannot be restored exactly into this job:\n  - %s",
		what, e.Job, strings.Join(e.Problems, "\n  - "))
}

// Unwrap lets errors.Is match ErrRestoreRefused and the causes.
func (e *RestoreError) Unwrap() []error { return append([]error{ErrRestoreRefused}, e.errs...) }

// RestoreOptions say how PlanRestore may map a checkpoint onto a plan.
type RestoreOptions struct {
	// Rescale lets an operator that holds state run at another
	// parallelism: its keyed state is redistributed by key group, and the
	// splits of a split source (FromSplits, Generate) are dealt out again.
	// Without it every such operator must keep its parallelism.
	Rescale bool
	// AllowNonRestoredState drops the state of operators whose id the plan
	// no longer has, rather than refusing the checkpoint.
	AllowNonRestoredState bool
}

// Restore says where the state of every task of a plan comes from when a
// checkpoint is restored into it. Build it with PlanRestore.
type Restore struct {
	// Checkpoint is the id of the checkpoint restored.
	Checkpoint uint64
	// Dropped lists the operator ids whose state the checkpoint holds but
	// the plan has no operator for (RestoreOptions.AllowNonRestoredState),
	// sorted.
	Dropped []string
	// Rescaled lists the operator ids whose state is redistributed over
	// another parallelism, sorted.
	Rescaled []string
	tasks    []TaskRestore // by plan task index
	// DroppedWatermarks lists, per edge, the watermarks in flight that
	// were dropped because their channels' records were redistributed
	// (see PlanRestore).
	DroppedWatermarks []string
	// DroppedInFlight lists, per operator the job no longer has, the items
	// in flight to it that were dropped with its state
	// (AllowNonRestoredState).
	DroppedInFlight []string
	// inFlightRemapped: the checkpoint's channel state was placed in the
	// plan (TaskRestore.InFlight), rather than restored with each task.
	inFlightRemapped bool
}

// TaskRestore is where one task's state comes from.
type TaskRestore struct {
	// Parts are the ids of the stored tasks whose states the task reads:
	// none when it starts empty; one whose state it restores as it is,
	// unless Rescaled; when Rescaled, every stored task of its operator
	// that held key groups of its range, in subtask order.
	Parts []string
	// Rescaled says that the task's state is built from Parts and Splits
	// (see MergeState) rather than restored whole.
	Rescaled bool
	// Splits are the splits a rescaled split source reads (HasSplits).
	Splits    [][]byte
	HasSplits bool
	// EventTime is where a rescaled source resumes event time: the lowest
	// of its stored tasks' positions, so that no record that was on time
	// becomes late (nil: none stored).
	EventTime *messages.SourceEventTime
	// Watermark is where a rescaled keyed process function resumes its
	// watermark: the highest of the stored tasks' whose key groups it
	// takes, so that no window or timer that fired in one of them fires
	// again (nil: none stored). See resumeWatermark.
	Watermark *int64
	// InFlight is the channel state the task replays when the Restore
	// remapped the checkpoint's (InFlightRemapped), in its own channels.
	InFlight []*messages.InFlight
}

// InFlightRemapped says that the checkpoint's channel state was placed in
// the plan's channels (TaskRestore.InFlight), as the plan's topology or
// parallelism differs from the checkpoint's, rather than restored as each
// task stored it.
func (r *Restore) InFlightRemapped() bool { return r.inFlightRemapped }

// InFlight returns the channel state task i replays, whose stored state
// (as Restore.State returns it) is st.
func (r *Restore) InFlight(i int, st *messages.TaskState) []*messages.InFlight {
	if r.inFlightRemapped {
		return r.tasks[i].InFlight
	}
	return st.GetInFlight()
}

// Task returns where task i of the plan gets its state.
func (r *Restore) Task(i int) TaskRestore { return r.tasks[i] }

// State returns the state task i of p restores, built from the stored
// states (by stored task id) listed in its TaskRestore, or nil when it
// starts empty.
func (r *Restore) State(p *Plan, i int, states map[string]*messages.TaskState) *messages.TaskState {
	tr := r.tasks[i]
	parts := make([]*messages.TaskState, len(tr.Parts))
	for k, id := range tr.Parts {
		parts[k] = states[id]
	}
	return MergeState(p.Tasks[i], tr, parts)
}

// MergeState builds the state task restores from parts, the stored states
// its TaskRestore lists (in that order): nil when it starts empty, the one
// part as it is when the task is not rescaled, and otherwise a state that
// holds the parts' key groups within the task's range, their state
// descriptors, and the task's splits. It shares the parts' entries rather
// than copying them.
func MergeState(task *TaskPlan, tr TaskRestore, parts []*messages.TaskState) *messages.TaskState {
	if !tr.Rescaled {
		if len(parts) == 0 {
			return nil
		}
		return parts[0]
	}
	st := &messages.TaskState{
		TaskId: task.ID, Operator: task.Operator, OperatorId: task.OperatorID, Subtask: uint32(task.Subtask),
		Splits: tr.Splits, HasSplits: tr.HasSplits, EventTime: tr.EventTime, Watermark: tr.Watermark,
	}
	for _, p := range parts {
		if p.Watermark != nil && (st.Watermark == nil || p.GetWatermark() > st.GetWatermark()) {
			// The highest: no window that fired in any part fires again.
			st.Watermark = p.Watermark
		}
		st.Job, st.CheckpointId = p.GetJob(), p.GetCheckpointId()
		if len(st.StateDescriptors) == 0 {
			st.StateDescriptors = p.GetStateDescriptors()
		}
		for _, g := range p.GetKeyGroups() {
			if int(g.GetKeyGroup()) >= task.KeyGroupStart && int(g.GetKeyGroup()) < task.KeyGroupEnd {
				st.KeyGroups = append(st.KeyGroups, g)
			}
		}
	}
	return st
}

// storedTask is one task of a checkpoint, as PlanRestore sees it.
type storedTask struct {
	id         string
	subtask    int
	start, end int // key-group range
	st         *messages.TaskState
}

// storedOperator is what a checkpoint holds of one operator.
type storedOperator struct {
	id          string
	tasks       []storedTask // by subtask
	offsets     bool         // a task holds a one-offset source position
	splits      bool         // a task holds splits
	keyed       bool         // a task holds keyed state or state descriptors
	opState     bool         // a task holds non-keyed operator state
	txns        bool         // a task holds a transactional sink's transactions
	inFlight    bool         // a task holds channel state (an unaligned checkpoint's records in flight)
	descriptors []*messages.StateDescriptor
}

func (o *storedOperator) stateful() bool {
	return o.offsets || o.splits || o.keyed || o.opState || o.txns || o.inFlight
}

func (o *storedOperator) what() string {
	var parts []string
	if o.offsets || o.splits {
		parts = append(parts, "source position")
	}
	if o.keyed {
		parts = append(parts, "keyed state")
	}
	if o.opState {
		parts = append(parts, "operator state")
	}
	if o.txns {
		parts = append(parts, "transactions")
	}
	if o.inFlight {
		parts = append(parts, "records in flight")
	}
	return strings.Join(parts, " and ")
}

// EntryOperatorID returns the operator id of a manifest entry: its
// recorded id, or its operator's name in checkpoints that predate ids.
func EntryOperatorID(e *messages.TaskStateEntry) string {
	if id := e.GetOperatorId(); id != "" {
		return id
	}
	return e.GetOperator()
}

// storedOperators groups the manifest's tasks by operator id.
func storedOperators(m *messages.Manifest, states map[string]*messages.TaskState) (map[string]*storedOperator, []string) {
	ops := map[string]*storedOperator{}
	var ids []string
	for _, e := range m.GetTasks() {
		id := EntryOperatorID(e)
		op := ops[id]
		if op == nil {
			op = &storedOperator{id: id}
			ops[id] = op
			ids = append(ids, id)
		}
		st := states[e.GetTaskId()]
		op.tasks = append(op.tasks, storedTask{id: e.GetTaskId(), subtask: int(e.GetSubtask()),
			start: int(e.GetKeyGroupStart()), end: int(e.GetKeyGroupEnd()), st: st})
		if st == nil {
			continue
		}
		op.offsets = op.offsets || st.GetHasSourceOffset()
		op.splits = op.splits || st.GetHasSplits()
		op.keyed = op.keyed || len(st.GetKeyGroups()) > 0 || len(st.GetStateDescriptors()) > 0
		op.opState = op.opState || len(st.GetOperatorState()) > 0
		op.txns = op.txns || len(st.GetTransactions()) > 0
		op.inFlight = op.inFlight || len(st.GetInFlight()) > 0
		if op.descriptors == nil && len(st.GetStateDescriptors()) > 0 {
			op.descriptors = st.GetStateDescriptors()
		}
	}
	mp := int(m.GetMaxParallelism())
	for _, op := range ops {
		slices.SortFunc(op.tasks, func(a, b storedTask) int { return a.subtask - b.subtask })
		for i := range op.tasks {
			t := &op.tasks[i]
			if t.start == 0 && t.end == 0 && mp > 0 { // predates recorded ranges
				t.start, t.end = KeyGroupRange(mp, len(op.tasks), t.subtask)
			}
		}
	}
	slices.Sort(ids)
	return ops, ids
}

// newOperator is one operator of the plan, as PlanRestore sees it.
type newOperator struct {
	name          string
	kind          Kind
	tasks         []*TaskPlan // by subtask
	keyed         bool
	split         *splitSpec
	transactional bool
}

// PlanRestore decides how checkpoint m, whose task states are states, is
// restored into plan p, whose keyed operators declare the states in
// declared (see Plan.DeclaredStates), and returns where each task's state
// comes from. State is matched by operator id (see OperatorID), so
// operators may be renamed, added (they start empty) or removed (only
// without state, unless opts.AllowNonRestoredState). It refuses, with a
// *RestoreError that lists every problem, a checkpoint that cannot be
// restored exactly:
//
//   - state of an operator id the plan lacks (unless AllowNonRestoredState);
//   - a source position in an operator that is no longer a source, or that
//     changed between one offset (FromSource) and splits (FromSplits);
//   - keyed state in an operator that no longer declares keyed state, under
//     another max parallelism (every key would move to another key group),
//     or whose state declarations changed (kind, types or codecs; see
//     CompareStateDescriptors);
//   - a changed parallelism of an operator with state, unless opts.Rescale;
//     with it, still a source that keeps one offset per task (a Source: its
//     offsets cannot be split), keyed state of a checkpoint that does not
//     record its max parallelism, and non-keyed operator state.
//
// The channel state of an unaligned checkpoint restored into another
// topology or parallelism is found again by channel, or redistributed
// (see remapInFlight); what cannot be is refused, naming its edge.
//
// With a new parallelism, each task of a keyed operator restores the key
// groups of its range from whichever stored tasks held them, and a split
// source's splits are concatenated in subtask order, divided while there
// are fewer than tasks (Splits.Divide), and split i goes to task i modulo
// the parallelism.
func PlanRestore(p *Plan, declared map[string][]*messages.StateDescriptor, m *messages.Manifest, states map[string]*messages.TaskState, opts RestoreOptions) (*Restore, error) {
	old, ids := storedOperators(m, states)
	cur := map[string]*newOperator{}
	for _, t := range p.Tasks {
		op := cur[t.OperatorID]
		if op == nil {
			op = &newOperator{name: t.Operator, kind: t.Kind}
			if t.node != nil {
				op.keyed, op.split, op.transactional = t.node.keyedState, t.node.splits, t.node.transactional
			}
			cur[t.OperatorID] = op
		}
		op.tasks = append(op.tasks, t)
	}
	r := &Restore{Checkpoint: m.GetCheckpointId(), tasks: make([]TaskRestore, len(p.Tasks))}
	e := &RestoreError{Job: p.Job, Checkpoint: m.GetCheckpointId(), Savepoint: m.GetSavepoint()}
	add := func(err error, format string, args ...any) {
		e.Problems = append(e.Problems, fmt.Sprintf(format, args...))
		if err != nil {
			e.errs = append(e.errs, err)
		}
	}
	for _, id := range ids {
		op := old[id]
		n, ok := cur[id]
		if !ok {
			switch {
			case !op.stateful():
			case op.offsets || op.splits:
				// Dropping a source's position would replay its records
				// from the beginning into restored state downstream.
				add(nil, "operator %q: the checkpoint holds its source position, but the job has no operator with that id; a new source would read its records again from the beginning, into restored state (counting them twice), so this is refused even with actors.WithAllowNonRestoredState: give the source that replaces it topology.OperatorID(%q)",
					id, id)
			case opts.AllowNonRestoredState:
				r.Dropped = append(r.Dropped, id)
			default:
				add(nil, "operator %q: the checkpoint holds its %s, but the job has no operator with that id (its state would be dropped): give the operator that should own it topology.OperatorID(%q), or allow non-restored state (actors.WithAllowNonRestoredState) to drop it",
					id, op.what(), id)
			}
			continue
		}
		if !op.stateful() {
			continue
		}
		label := fmt.Sprintf("operator %q", n.name)
		if n.name != id {
			label = fmt.Sprintf("operator %q (id %q)", n.name, id)
		}
		before := len(e.Problems)
		rescale := len(n.tasks) != len(op.tasks)
		if rescale && !opts.Rescale {
			add(nil, "%s: parallelism changed from %d to %d; start from a savepoint or checkpoint by name (actors.WithSavepoint, actors.WithCheckpoint) or allow a topology change (actors.WithAllowTopologyChange) to redistribute its %s, or keep parallelism %d",
				label, len(op.tasks), len(n.tasks), op.what(), len(op.tasks))
		}
		checkSource(op, n, label, rescale, add)
		checkKeyed(op, n, label, rescale, m, p, declared, add)
		if op.opState && rescale {
			add(nil, "%s: its non-keyed operator state cannot be redistributed over %d tasks: keep parallelism %d", label, len(n.tasks), len(op.tasks))
		}
		if op.txns && rescale {
			add(nil, "%s: the transactions of a two-phase-commit sink are not redistributed yet, over %d tasks: keep parallelism %d", label, len(n.tasks), len(op.tasks))
		}
		if op.txns && !n.transactional {
			add(nil, "%s: the checkpoint holds the transactions of a two-phase-commit sink, which it no longer is: they would be neither committed nor aborted", label)
		}
		if len(e.Problems) > before {
			continue
		}
		if !rescale && sameTasks(op, n) {
			for s, t := range n.tasks {
				r.tasks[t.Index] = TaskRestore{Parts: []string{op.tasks[s].id}}
			}
			continue
		}
		if err := assign(r, op, n); err != nil {
			add(err, "%s: %v", label, err)
			continue
		}
		r.Rescaled = append(r.Rescaled, id)
	}
	if slices.ContainsFunc(ids, func(id string) bool { return old[id].inFlight }) &&
		(m.GetTopologyFingerprint() != p.Fingerprint || !inFlightInPlace(p, old, ids)) {
		remapInFlight(p, old, ids, cur, r, int(m.GetMaxParallelism()), opts.AllowNonRestoredState, add)
	}
	if len(e.Problems) == 0 {
		checkLateAfterRescale(p, m, old, ids, cur, r, add)
	}
	if len(e.Problems) > 0 {
		return nil, e
	}
	return r, nil
}

// sameTasks reports whether the stored tasks are subtasks 0..n-1 of an
// operator restored at the same parallelism, so each task restores the
// stored task of its subtask whole.
func sameTasks(op *storedOperator, n *newOperator) bool {
	for s, t := range op.tasks {
		if t.subtask != s || len(op.tasks) != len(n.tasks) {
			return false
		}
	}
	return true
}

// checkSource adds the problems of restoring op's source position into n.
func checkSource(op *storedOperator, n *newOperator, label string, rescale bool, add func(error, string, ...any)) {
	switch {
	case !op.offsets && !op.splits:
	case n.kind != KindSource:
		add(nil, "%s: the checkpoint holds its source position, but it is now a %s", label, n.kind)
	case op.splits && n.split == nil:
		add(nil, "%s: the checkpoint holds its position as splits (a split source, see FromSplits), but it now keeps one offset per task (FromSource)", label)
	case op.offsets && n.split == nil && rescale:
		add(nil, "%s: its source keeps one offset per task (a Source), which cannot be redistributed over %d tasks: implement SplitSource and use FromSplits to rescale it, or keep parallelism %d",
			label, len(n.tasks), len(op.tasks))
	case op.offsets && n.split != nil && n.split.fromOffset == nil:
		add(nil, "%s: the checkpoint holds one offset per task (it was a Source, see FromSource), but it now reads splits (FromSplits)", label)
	case op.offsets && n.split != nil:
		for _, t := range op.tasks { // converted, as the built-in sources' offsets from before splits
			if t.st.GetHasSourceOffset() {
				if _, err := n.split.fromOffset(t.subtask, len(op.tasks), t.st.GetSourceOffset()); err != nil {
					add(nil, "%s: the offset of stored task %s is not a position of this source: %v", label, t.id, err)
				}
			}
		}
	}
}

// checkKeyed adds the problems of restoring op's keyed state into n.
func checkKeyed(op *storedOperator, n *newOperator, label string, rescale bool, m *messages.Manifest, p *Plan,
	declared map[string][]*messages.StateDescriptor, add func(error, string, ...any)) {
	if !op.keyed {
		return
	}
	if !n.keyed {
		add(nil, "%s: the checkpoint holds its keyed state, but it no longer declares keyed state (its state would be dropped)", label)
		return
	}
	switch mp := int(m.GetMaxParallelism()); {
	case mp == 0 && (rescale || m.GetTopologyFingerprint() != p.Fingerprint):
		add(nil, "%s: the checkpoint does not record its max parallelism (it predates that record) and the topology changed, so the key groups of its keyed state cannot be checked", label)
	case mp != 0 && mp != p.MaxParallelism:
		add(nil, "%s: max parallelism changed from %d to %d: every restored key would move to another key group; keep topology.MaxParallelism(%d)",
			label, mp, p.MaxParallelism, mp)
	case mp != 0:
		for _, t := range op.tasks {
			for _, g := range t.st.GetKeyGroups() {
				if kg := int(g.GetKeyGroup()); kg < t.start || kg >= t.end {
					add(nil, "%s: stored task %s holds key group %d, outside its range [%d, %d): the checkpoint is inconsistent", label, t.id, kg, t.start, t.end)
					break
				}
			}
		}
	}
	if err := CompareStateDescriptors(n.name, op.descriptors, declared[n.name]); err != nil {
		add(err, "%v", strings.TrimPrefix(err.Error(), "topology: "))
	}
}

// assign fills in the TaskRestores of n's tasks from op's stored tasks,
// redistributing key groups and splits.
func assign(r *Restore, op *storedOperator, n *newOperator) error {
	var dealt [][][]byte
	var dealtTS [][]int64 // per split, when every stored task keeps them
	if op.splits || op.offsets {
		old := make([][][]byte, len(op.tasks))
		var oldTS [][]int64
		for _, t := range op.tasks {
			if ts := t.st.GetEventTime().GetSplitMaxTimestamps(); t.st.GetHasSplits() && len(ts) == len(t.st.GetSplits()) {
				oldTS = append(oldTS, ts)
			}
		}
		for i, t := range op.tasks {
			switch {
			case t.st.GetHasSplits():
				old[i] = t.st.GetSplits()
			case t.st.GetHasSourceOffset(): // checkSource made sure the spec converts offsets
				var err error
				if old[i], err = n.split.fromOffset(t.subtask, len(op.tasks), t.st.GetSourceOffset()); err != nil {
					return fmt.Errorf("stored task %s: %w", t.id, err)
				}
			}
		}
		dealt, dealtTS = redistributeSplits(old, oldTS, len(n.tasks), n.split.divide)
	}
	var eventTime *messages.SourceEventTime
	for i, t := range op.tasks {
		et := t.st.GetEventTime()
		if et == nil { // a task without: none is known for all
			eventTime = nil
			break
		}
		if i == 0 || et.GetMaxTimestamp() < eventTime.GetMaxTimestamp() {
			eventTime = et
		}
	}
	for s, t := range n.tasks {
		tr := TaskRestore{Rescaled: true, EventTime: eventTime, Watermark: resumeWatermark(op, t)}
		if dealt != nil {
			tr.Splits, tr.HasSplits = dealt[s], true
		}
		if eventTime != nil && dealtTS != nil {
			tr.EventTime = &messages.SourceEventTime{MaxTimestamp: eventTime.GetMaxTimestamp(), SplitMaxTimestamps: dealtTS[s]}
		}
		if op.keyed {
			for _, ot := range op.tasks {
				if ot.start < t.KeyGroupEnd && t.KeyGroupStart < ot.end {
					tr.Parts = append(tr.Parts, ot.id)
				}
			}
		}
		r.tasks[t.Index] = tr
	}
	return nil
}

// Operators describes the plan's operators for a manifest, in plan order:
// id, name, kind, parallelism, whether it declares keyed state (with the
// descriptors in declared, see DeclaredStates) and whether its position is
// a list of splits.
func (p *Plan) Operators(declared map[string][]*messages.StateDescriptor) []*messages.OperatorEntry {
	var out []*messages.OperatorEntry
	for _, t := range p.Tasks {
		if t.Subtask != 0 {
			continue
		}
		e := &messages.OperatorEntry{OperatorId: t.OperatorID, Name: t.Operator, Kind: t.Kind.String(), Parallelism: uint32(t.Parallelism)}
		if t.node != nil {
			e.Keyed, e.Splits = t.node.keyedState, t.node.splits != nil
		}
		for _, d := range declared[t.Operator] {
			e.States = append(e.States, copyDescriptor(d))
		}
		out = append(out, e)
	}
	return out
}
