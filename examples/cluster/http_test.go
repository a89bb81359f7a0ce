//go:build unix

package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/internal/testhttp"
)

// TestHTTP: a coordinator with -http prints its dashboard's URL and, while
// the job runs (its sources hold halfway), serves the job's status with
// the workers and where each task runs, and /metrics; the job then ends
// exactly once.
func TestHTTP(t *testing.T) {
	c := newTestCluster(t)
	// A heartbeat timeout that a loaded machine does not reach: a false
	// loss would change the state and the nodes the test checks.
	coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 2, "-http", "127.0.0.1:0", "-heartbeat-timeout", "1m")
	_, line := c.await(coord, 0, "the dashboard line", func(l string) bool { return strings.HasPrefix(l, dashboardPrefix) })
	base := strings.TrimSuffix(strings.TrimPrefix(line, dashboardPrefix), "/")
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("dashboard line %q", line)
	}
	w1, _ := c.startWorker("worker 1", addr)
	w2, _ := c.startWorker("worker 2", addr)
	c.awaitEvent(coord, 0, "running", nil)

	ctx, cancel := context.WithTimeout(t.Context(), awaitDeadline)
	defer cancel()
	var st monitor.JobStatus
	if err := testhttp.GetJSON(ctx, base+"/api/v1/job", &st); err != nil {
		t.Fatal(err)
	}
	up := 0
	for _, n := range st.Nodes {
		if n.State == "up" {
			up++
		}
	}
	unplaced := slices.ContainsFunc(st.Tasks, func(tk monitor.Task) bool { return tk.Node == "" })
	if st.Name != jobName || st.State != monitor.StateRunning || up != 2 || len(st.Tasks) == 0 || unplaced {
		t.Errorf("GET /api/v1/job while the job runs: job %q, state %q, nodes %+v, tasks %+v; want %q running on 2 workers, every task placed",
			st.Name, st.State, st.Nodes, st.Tasks, jobName)
	}
	metrics, err := testhttp.Get(ctx, base+"/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(metrics), "snapflow_operator_records_in_total{") {
		t.Errorf("/metrics has no snapflow_operator_records_in_total:\n%s", metrics)
	}
	c.release()
	c.expectExact(coord, w1, w2)
}

// TestHTTPFlag: only the coordinator serves: a worker refuses -http, and
// the demo passes it to its coordinator child alone.
func TestHTTPFlag(t *testing.T) {
	_, err := parseFlags([]string{"-role", "worker", "-join", "127.0.0.1:1", "-http", "127.0.0.1:0"}, io.Discard)
	if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "-http is for the coordinator") {
		t.Errorf("a worker with -http: %v, want a usage error", err)
	}
	o, err := parseFlags([]string{"-http", "127.0.0.1:0"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	d := &demo{o: o, store: "store", hold: "hold"}
	if args := d.coordinatorArgs(); !slices.Contains(args, "-http") || args[slices.Index(args, "-http")+1] != "127.0.0.1:0" {
		t.Errorf("the demo's coordinator arguments %q lack -http 127.0.0.1:0", args)
	}
	if slices.Contains(d.jobArgs(), "-http") {
		t.Errorf("the demo's workers would get -http: %q", d.jobArgs())
	}
}
