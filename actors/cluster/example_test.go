package cluster_test

import (
	"context"
	"log"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/topology"
)

// buildJob is the job every node of the cluster builds, from the same
// binary and the same parameters.
func buildJob() *topology.Graph {
	g := topology.New("squares", topology.Params(map[string]string{"records": "1000"}))
	squares := topology.Generate(g, "squares", 1000, func(i int64) int64 { return i * i }, topology.Parallelism(2))
	topology.Sink(squares, "print", func(int64) error { return nil })
	return g
}

// A job across processes: this process is the coordinator, which places
// the tasks on two workers (each a process that calls ServeWorker, shown
// below) and checkpoints into a store they all open. Every node has the
// cluster's secret, here from SNAPFLOW_CLUSTER_SECRET (see docs/cluster.md).
func ExampleWithCoordinator() {
	job, err := actors.Start(context.Background(), buildJob(), cluster.WithCoordinator(cluster.Coordinator{
		Listen:  "127.0.0.1:7070",
		Workers: 2,
		Store:   "s3://snapflow/jobs?endpoint=127.0.0.1:9000",
	}))
	if err != nil {
		log.Fatal(err)
	}
	if err := job.Wait(); err != nil {
		log.Fatal(err)
	}
}

// A worker process of the cluster of ExampleWithCoordinator: it registers with
// the coordinator, runs the tasks placed on it, and returns when the job
// ends (an error wrapping ErrJobFailed when it failed).
func ExampleServeWorker() {
	err := cluster.ServeWorker(context.Background(), cluster.Worker{
		Join:  "127.0.0.1:7070",
		Slots: 4,
		Jobs:  []func() *topology.Graph{buildJob},
	})
	if err != nil {
		log.Fatal(err)
	}
}
