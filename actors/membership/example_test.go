package membership_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/membership"
)

func Example() {
	m := membership.New(membership.Config{}) // heartbeat every 1s, timeout 5s
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"w1", "w2", "w3"} {
		addr := fmt.Sprintf("127.0.0.1:400%d", i+1)
		if _, _, err := m.Register(t0, id, addr, 2); err != nil {
			fmt.Println(err)
		}
	}
	tasks := []membership.TaskRef{
		{Operator: "src", Subtask: 0, Index: 0},
		{Operator: "map", Subtask: 0, Index: 1},
		{Operator: "map", Subtask: 1, Index: 2},
		{Operator: "sum", Subtask: 0, Index: 3},
		{Operator: "sum", Subtask: 1, Index: 4},
	}
	p, err := membership.Place(tasks, m.Live())
	fmt.Println(p, err)

	// w1 and w3 ack their heartbeats; w2 hangs.
	t1 := t0.Add(3 * time.Second)
	m.Heartbeat(t1, "w1")
	m.Heartbeat(t1, "w3")
	deadline, _ := m.Deadline()
	fmt.Println("next deadline:", deadline.Sub(t0))
	for _, w := range m.Expired(t0.Add(5200 * time.Millisecond)) {
		fmt.Println(w.Err())
		fmt.Println("fail", w.ID, "tasks:", p.Tasks(w.ID))
	}

	// Rollback: 4 slots remain for 5 tasks; wait for a worker.
	_, err = membership.Place(tasks, m.Live())
	fmt.Println(errors.Is(err, membership.ErrNotEnoughSlots), err)

	// The hung process resumes: its heartbeat and its old id are refused,
	// so it drops its tasks and registers under a new id.
	t2 := t0.Add(7 * time.Second)
	fmt.Println("heartbeat w2:", m.Heartbeat(t2, "w2"))
	_, _, err = m.Register(t2, "w2", "127.0.0.1:4002", 2)
	fmt.Println(err)
	if _, _, err := m.Register(t2, "w2b", "127.0.0.1:4002", 2); err != nil {
		fmt.Println(err)
	}
	p, err = membership.Place(tasks, m.Live())
	fmt.Println(p, err)
	// Output:
	// src#0,sum#0 -> w1@127.0.0.1:4001; map#0,sum#1 -> w2@127.0.0.1:4002; map#1 -> w3@127.0.0.1:4003 <nil>
	// next deadline: 5s
	// membership: worker lost: w2@127.0.0.1:4002: no heartbeat for 5.2s (timeout 5s)
	// fail w2 tasks: [map#0 sum#1]
	// true membership: not enough slots: need 5 for 5 tasks, have 4 on 2 workers
	// heartbeat w2: false
	// membership: worker lost: register w2@127.0.0.1:4002: id w2 was declared lost (no heartbeat for 5.2s (timeout 5s)); register again under a new id
	// src#0,sum#0 -> w1@127.0.0.1:4001; map#0,sum#1 -> w3@127.0.0.1:4003; map#1 -> w2b@127.0.0.1:4002 <nil>
}
