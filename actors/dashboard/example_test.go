package dashboard_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/dashboard"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// Serve a job's dashboard, metrics and API while it runs.
func ExampleStart() {
	ctx := context.Background()
	srv, err := dashboard.Start(ctx, dashboard.Config{Addr: "127.0.0.1:0", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	fmt.Println(strings.HasPrefix(srv.Banner(), "dashboard: http://127.0.0.1:"))

	g := topology.New("served")
	nums := topology.Generate(g, "numbers", 1000, func(i int64) int64 { return i })
	topology.Sink(nums, "discard", func(int64) error { return nil })
	job, err := actors.Start(ctx, g, append(srv.Options(), actors.WithStore(snapshots.NewMem()))...)
	if err != nil {
		panic(err)
	}
	srv.Attach(job)
	fmt.Println(job.Wait())

	res, err := http.Get(srv.URL() + "/metrics")
	if err != nil {
		panic(err)
	}
	res.Body.Close()
	fmt.Println(res.Status)
	// Output:
	// true
	// <nil>
	// 200 OK
}
