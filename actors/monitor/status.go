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
	tms, _ := m.taskMetrics()
	for _, tm := range tms { // atomic loads: outside the lock
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

// taskMetrics reads the attached job's counters, plus what the jobs
// attached before counted, with its topology (nil, nil before Attach). A
// task of an earlier job that the attached one lacks (it has fewer tasks
// now) comes last, with what it counted.
func (m *Monitor) taskMetrics() ([]actors.TaskMetrics, *topo) {
	m.mu.Lock()
	j, t := m.job, m.topo
	m.mu.Unlock()
	if j == nil {
		return nil, nil
	}
	tms := j.TaskMetrics() // atomic loads: outside the lock
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.carried) == 0 {
		return tms, t
	}
	seen := make(map[string]bool, len(tms))
	for i := range tms {
		tm := &tms[i]
		seen[tm.Task] = true
		if c, ok := m.carried[tm.Task]; ok {
			tm.RecordsIn += c.RecordsIn
			tm.RecordsOut += c.RecordsOut
			tm.Backpressure += c.Backpressure
		}
	}
	for id, c := range m.carried {
		if !seen[id] {
			tms = append(tms, c)
		}
	}
	return tms, t
}

// carry adds the final counters of the job attached before (its queued
// batches are gone) to what is carried, under m.mu.
func (m *Monitor) carry(final []actors.TaskMetrics) {
	if len(final) == 0 {
		return
	}
	if m.carried == nil {
		m.carried = make(map[string]actors.TaskMetrics, len(final))
	}
	for _, tm := range final {
		c := m.carried[tm.Task]
		c.Task, c.Operator, c.Subtask = tm.Task, tm.Operator, tm.Subtask
		c.RecordsIn += tm.RecordsIn
		c.RecordsOut += tm.RecordsOut
		c.Backpressure += tm.Backpressure
		m.carried[tm.Task] = c
	}
}
