package main

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
	"github.com/snapflow/snapflow/internal/proctest"
	"github.com/snapflow/snapflow/internal/testhttp"
)

// TestHTTP: with -http the server spans the phases: while the second
// phase holds, the API shows that phase's job (totals at parallelism 1)
// and, in the checkpoint history, the savepoint the first phase stopped
// with.
func TestHTTP(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	p := startProc(t, "http", nil, storeArgs(store, "-phases", "2,1", "-hold", "-http", "127.0.0.1:0")...)
	base := p.AwaitLine(regexp.MustCompile(`^dashboard: (http://127\.0\.0\.1:\d+)/$`))[1]
	p.AwaitLine(regexp.MustCompile(`^phase 2: parallelism 1, from savepoint "sp-1" .*; holding at `))

	var st monitor.JobStatus
	getJSON(t, base+"/api/v1/job", &st)
	par := map[string]int{}
	for _, op := range st.Operators {
		par[op.Name] = op.Parallelism
	}
	// The first phase's job stopped; the second's runs.
	if st.State != monitor.StateRunning {
		t.Errorf("GET /api/v1/job while phase 2 holds: state %q, want running", st.State)
	}
	if st.Name != jobName || par["totals"] != 1 || par["web"] != 1 || par["shop"] != 1 {
		t.Errorf("GET /api/v1/job while phase 2 holds: job %q, operators %+v; want %q with every operator at parallelism 1",
			st.Name, st.Operators, jobName)
	}
	var cps web.CheckpointsResponse
	getJSON(t, base+"/api/v1/checkpoints", &cps)
	found := false
	for _, cp := range cps.Checkpoints {
		found = found || cp.Savepoint == "sp-1" && cp.Status == monitor.StatusCompleted
	}
	if !found {
		t.Errorf("GET /api/v1/checkpoints while phase 2 holds: no completed savepoint sp-1 in %+v", cps.Checkpoints)
	}
	killed(t, p)
}

// getJSON GETs url and decodes its 200 answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), proctest.WaitFor)
	defer cancel()
	if err := testhttp.GetJSON(ctx, url, v); err != nil {
		t.Fatal(err)
	}
}
