package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// Serve a job's metrics, API and dashboard on a free port of 127.0.0.1.
func ExampleStart() {
	ctx := context.Background()
	g := topology.New("example")
	nums := topology.Generate(g, "numbers", -1, func(i int64) int64 { return i }) // unbounded
	topology.Sink(nums, "discard", func(int64) error { return nil })

	reg := prometheus.NewRegistry() // never the global one unless you pass it
	mon, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		panic(err)
	}
	job, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithListener(mon.Listener()))
	if err != nil {
		panic(err)
	}
	defer job.Stop()
	mon.Attach(job)

	srv, err := web.Start(ctx, web.Config{Token: "secret", Gatherer: reg, Logger: slog.New(slog.DiscardHandler)}, mon, job)
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	// The dashboard is at srv.URL() + "/?token=secret".

	req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/api/v1/checkpoints", nil)
	req.Header.Set("Authorization", "Bearer secret")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	var tr web.TriggerResponse
	if err := json.NewDecoder(res.Body).Decode(&tr); err != nil {
		panic(err)
	}
	cp, _ := mon.Checkpoint(tr.ID)
	fmt.Println(res.Status, cp.Status)
	// Output: 200 OK completed
}
