package engine

import (
	"cmp"
	"slices"
	"time"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/messages"
)

// checkpointFigures are what the tasks' acks of one checkpoint say, for
// its EventCheckpointCompleted.
type checkpointFigures struct {
	bytes     uint64
	uploaded  uint64
	inFlight  uint64
	alignment time.Duration // the longest of any task
	upload    time.Duration // the longest of any task
	tasks     []TaskCheckpoint
}

// figuresOf sums up the acks of a checkpoint, one per task. The tasks are
// ordered by task id: by operator name, then subtask.
func figuresOf(plan *dataflow.Plan, acks []*messages.AckCheckpoint) checkpointFigures {
	type keyed struct {
		op  string
		sub int
		tc  TaskCheckpoint
	}
	ks := make([]keyed, 0, len(acks))
	var f checkpointFigures
	for _, a := range acks {
		tc := TaskCheckpoint{Task: a.GetTaskId(), Bytes: a.GetStateBytes(), Uploaded: a.GetUploadedBytes(), InFlight: a.GetInFlightBytes(), Alignment: time.Duration(a.GetAlignmentNanos()),
			Sync: time.Duration(a.GetSyncNanos()), Async: time.Duration(a.GetAsyncNanos())}
		f.bytes += tc.Bytes
		f.uploaded += tc.Uploaded
		f.inFlight += tc.InFlight
		f.alignment = max(f.alignment, tc.Alignment)
		f.upload = max(f.upload, tc.Async)
		k := keyed{op: tc.Task, tc: tc}
		if t := plan.Task(tc.Task); t != nil {
			k.op, k.sub = t.Operator, t.Subtask
		}
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b keyed) int { return cmp.Or(cmp.Compare(a.op, b.op), cmp.Compare(a.sub, b.sub)) })
	f.tasks = make([]TaskCheckpoint, len(ks))
	for i, k := range ks {
		f.tasks[i] = k.tc
	}
	return f
}

// takeFigures returns, and forgets, the figures of checkpoint id (none
// when its acks were never all in: a checkpoint settled after a failover).
func (j *jobActor) takeFigures(id uint64) checkpointFigures {
	f := j.figures[id]
	delete(j.figures, id)
	return f
}

// event fills the figures into e, an EventCheckpointCompleted.
func (f checkpointFigures) event(e Event) Event {
	e.Bytes, e.Uploaded, e.InFlight, e.Alignment, e.Upload, e.Tasks = f.bytes, f.uploaded, f.inFlight, f.alignment, f.upload, f.tasks
	return e
}
