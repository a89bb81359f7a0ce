package monitor

import (
	"time"

	"github.com/snapflow/snapflow/actors"
)

// Job returns the job's status now. The tasks' counters are read from the
// attached job (none before Attach).
func (m *Monitor) Job() JobStatus {
	m.mu.Lock()
	if m.job != nil {
		select {
		case <-m.job.Done(): // it may have been stopped: no event says so
			m.ended(m.job)
		default:
		}
	}
	now := time.Now()
	s := JobStatus{
		Name: m.name, State: m.state, Epoch: m.epoch, Started: m.started, Now: now, Error: m.failure,
		Operators: []Operator{}, Tasks: []Task{}, Edges: []Edge{}, Nodes: append([]Node{}, m.nodes...), Counts: m.counts,
	}
	if m.last != nil {
		l := *m.last
		l.AgeSeconds = now.Sub(l.Time).Seconds()
		s.LastCheckpoint = &l
	}
	j, t := m.job, m.topo
	if t != nil {
		s.Operators = append(s.Operators, t.operators...)
		s.Tasks = append(s.Tasks, t.tasks...)
		s.Edges = append(s.Edges, t.edges...)
		for i := range s.Tasks {
			s.Tasks[i].Node = m.placed[s.Tasks[i].ID]
		}
	}
	m.mu.Unlock()
	if j == nil {
		return s
	}
	for _, tm := range j.TaskMetrics() { // atomic loads: outside the lock
		i, ok := t.byTask[tm.Task]
		if !ok {
			continue
		}
		task, op := &s.Tasks[i], &s.Operators[t.taskOp[i]]
		task.RecordsIn, task.RecordsOut = tm.RecordsIn, tm.RecordsOut
		task.BackpressureSeconds, task.QueuedBatches = tm.Backpressure.Seconds(), tm.QueuedBatches
		op.RecordsIn += tm.RecordsIn
		op.RecordsOut += tm.RecordsOut
		op.BackpressureSeconds += tm.Backpressure.Seconds()
		op.QueuedBatches += tm.QueuedBatches
	}
	return s
}

// taskMetrics reads the attached job's counters with its topology (nil, nil
// before Attach).
func (m *Monitor) taskMetrics() ([]actors.TaskMetrics, *topo) {
	m.mu.Lock()
	j, t := m.job, m.topo
	m.mu.Unlock()
	if j == nil {
		return nil, nil
	}
	return j.TaskMetrics(), t
}
