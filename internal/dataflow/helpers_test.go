package dataflow

import (
	"testing"
)

// sent is one batch handed to a fakeSender.
type sent struct {
	output int
	batch  any
}

// fakeSender records every batch a task emits, in order.
type fakeSender struct{ sends []sent }

func (f *fakeSender) Send(output int, batch any, _ []int64) {
	f.sends = append(f.sends, sent{output, batch})
}

// reset forgets the recorded batches.
func (f *fakeSender) reset() { f.sends = nil }

// records returns every record sent, in order, whatever its output.
func records[T any](t testing.TB, f *fakeSender) []T {
	t.Helper()
	var out []T
	for _, s := range f.sends {
		b, ok := s.batch.([]T)
		if !ok {
			t.Fatalf("batch of type %T, want %T", s.batch, out)
		}
		out = append(out, b...)
	}
	return out
}

// recordsByTask returns the records sent by task from, by the id of the
// receiving task.
func recordsByTask[T any](t testing.TB, p *Plan, from *TaskPlan, f *fakeSender) map[string][]T {
	t.Helper()
	out := map[string][]T{}
	for _, s := range f.sends {
		b, ok := s.batch.([]T)
		if !ok {
			t.Fatalf("batch of type %T, want []%T", s.batch, *new(T))
		}
		if s.output < 0 || s.output >= len(from.Outputs) {
			t.Fatalf("send to output %d of task %s, which has %d outputs", s.output, from.ID, len(from.Outputs))
		}
		to := p.Tasks[p.Channels[from.Outputs[s.output]].To].ID
		out[to] = append(out[to], b...)
	}
	return out
}

// noopSender drops every batch.
type noopSender struct{}

func (noopSender) Send(int, any, []int64) {}

func mustPlan(t testing.TB, g *Graph) *Plan {
	t.Helper()
	p, err := NewPlan(g)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	return p
}

func mustTask(t testing.TB, p *Plan, id string) *TaskPlan {
	t.Helper()
	task := p.Task(id)
	if task == nil {
		t.Fatalf("plan has no task %q", id)
	}
	return task
}

// mustInstance creates the instance of task id with the given batch size and sender.
func mustInstance(t testing.TB, p *Plan, id string, batchSize int, s Sender) Instance {
	t.Helper()
	inst, err := p.NewInstance(mustTask(t, p, id).Index, InstanceContext{BatchSize: batchSize, Sender: s, DiskState: testDisk})
	if err != nil {
		t.Fatalf("NewInstance(%s): %v", id, err)
	}
	if testDisk != nil {
		t.Cleanup(func() {
			if err := inst.Close(); err != nil {
				t.Errorf("Close(%s): %v", id, err)
			}
		})
	}
	return inst
}

func discard[T any](T) error { return nil }
