package coordinator_test

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/messages"
)

func Example() {
	tasks := []string{"src#0", "sum#0"}
	c := coordinator.New(coordinator.Config{Interval: 10 * time.Second}, tasks, 1)
	start := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	show := func(acts []coordinator.Action) {
		for _, a := range acts {
			fmt.Println(a)
		}
	}

	c.Tick(start) // starts the clock
	next, _ := c.NextTrigger()
	fmt.Println("next trigger in", next.Sub(start))
	show(c.Tick(next))
	for _, task := range tasks {
		show(c.Ack(next, &messages.AckCheckpoint{CheckpointId: 1, TaskId: task}))
	}
	show(c.ManifestWritten(next, 1, nil))

	// Every source is exhausted: the final checkpoint is taken at once.
	show(c.Finish(next.Add(time.Second)))
	show(c.Decline(next.Add(time.Second), &messages.DeclineCheckpoint{CheckpointId: 2, TaskId: "sum#0", Reason: "disk full"}))
	fmt.Printf("%+v\n", c.Stats())
	// Output:
	// next trigger in 10s
	// Trigger chk=1
	// WriteManifest chk=1 acks=[src#0,sum#0]
	// Completed chk=1
	// Trigger chk=2 final
	// Aborted chk=2 final reason="declined by task sum#0: disk full"
	// FailJob reason="declined by task sum#0: disk full" err="coordinator: too many failed checkpoints: 1 in a row, 0 tolerated; last: declined by task sum#0: disk full"
	// {Triggered:2 Completed:1 Aborted:1 ConsecutiveFailures:1 LastCompleted:1}
}
