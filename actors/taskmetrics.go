package actors

// TaskMetrics returns every task's counters (see TaskMetrics), in the
// plan's order. Reading them costs a few atomic loads per task; the tasks
// count per batch, not per record.
func (j *Job) TaskMetrics() []TaskMetrics {
	out := make([]TaskMetrics, 0, len(j.sh.plan.Tasks))
	for _, t := range j.sh.plan.Tasks {
		out = append(out, TaskMetrics{Task: t.ID, Operator: t.Operator, Subtask: t.Subtask})
	}
	return out
}
