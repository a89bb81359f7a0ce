package coordinator

import (
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
)

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns the fake time d after t0.
func at(d time.Duration) time.Time { return t0.Add(d) }

func ack(id uint64, task string) *messages.AckCheckpoint {
	return &messages.AckCheckpoint{CheckpointId: id, TaskId: task}
}

func decline(id uint64, task, reason string) *messages.DeclineCheckpoint {
	return &messages.DeclineCheckpoint{CheckpointId: id, TaskId: task, Reason: reason}
}

func format(acts []Action) string {
	lines := make([]string, len(acts))
	for i, a := range acts {
		lines[i] = a.String()
	}
	return strings.Join(lines, "\n")
}

// expect fails t unless acts format to want, one action per element.
func expect(t *testing.T, acts []Action, want ...string) {
	t.Helper()
	if got, w := format(acts), strings.Join(want, "\n"); got != w {
		t.Fatalf("actions:\n%s\nwant:\n%s", got, w)
	}
}

// ackAll acks checkpoint id from every task and returns the last step's actions.
func ackAll(c *Coordinator, now time.Time, id uint64, tasks ...string) []Action {
	var acts []Action
	for _, task := range tasks {
		acts = c.Ack(now, ack(id, task))
	}
	return acts
}
