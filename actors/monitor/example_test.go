package monitor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/snapshots"
)

// A monitor on a registry of its own, watching a job to its end.
func ExampleNew() {
	reg := prometheus.NewRegistry()
	mon, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		panic(err)
	}
	job, err := actors.Start(context.Background(), testGraph("example", records), actors.WithStore(snapshots.NewMem()),
		actors.WithCheckpointInterval(10*time.Millisecond), actors.WithListener(mon.Listener()))
	if err != nil {
		panic(err)
	}
	mon.Attach(job)
	if err := job.Wait(); err != nil {
		panic(err)
	}
	st := mon.Job()
	fmt.Println(st.Name, st.State, len(st.Operators), "operators", len(st.Tasks), "tasks")
	fmt.Println("last checkpoint is the final one:", st.LastCheckpoint.ID == mon.Checkpoints(1)[0].ID && mon.Checkpoints(1)[0].Final)
	n, err := testutil.GatherAndCount(reg, "snapflow_operator_records_in_total")
	fmt.Println(n, "records_in series", err)
	// Output:
	// example finished 3 operators 4 tasks
	// last checkpoint is the final one: true
	// 3 records_in series <nil>
}
