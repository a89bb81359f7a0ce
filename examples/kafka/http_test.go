package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/internal/testhttp"
)

// TestHTTP: with -phase run and -http, the job's API answers while the
// job runs (it waits for input, which the test writes only once it has
// asked), with the job's operators; the run then ends exactly once.
func TestHTTP(t *testing.T) {
	const records, customers = 200, 5
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders", "totals"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	p := startProc(t, "http", "-phase", "run", "-brokers", strings.Join(brokers, ","), "-store", t.TempDir(),
		"-records", fmt.Sprint(records), "-customers", fmt.Sprint(customers), "-restart", "none", "-faults", "0",
		"-http", "127.0.0.1:0")
	base := p.AwaitLine(regexp.MustCompile(`^dashboard: (http://127\.0\.0\.1:\d+)/$`))[1]
	p.AwaitLine(regexp.MustCompile(`^job "kafka-totals" running `))

	ctx, cancel := context.WithTimeout(t.Context(), waitFor)
	defer cancel()
	st, err := jobStatus(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, op := range st.Operators {
		names = append(names, op.Name)
	}
	if st.Name != jobName || st.State != monitor.StateRunning || strings.Join(names, ",") != "orders,decode,totals,out" {
		t.Errorf("GET /api/v1/job: job %q, state %q, operators %v; want %q running with orders, decode, totals, out",
			st.Name, st.State, names, jobName)
	}

	if err := fillRange(ctx, brokers, "orders", 0, records, customers); err != nil {
		t.Fatal(err)
	}
	if code := p.Exit(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	p.MustFind(regexp.MustCompile(`^stopped with savepoint "final-1"`))
}

// TestHTTPNeedsARun: -http with a phase that runs no job is a usage error.
func TestHTTPNeedsARun(t *testing.T) {
	for _, phase := range []string{phaseFill, phaseVerify} {
		_, err := parseFlags([]string{"-brokers", "a:1", "-phase", phase, "-http", "127.0.0.1:0"}, io.Discard)
		if err == nil || !strings.Contains(err.Error(), "-http serves a running job") {
			t.Errorf("-phase %s -http: %v, want a usage error", phase, err)
		}
	}
}

// jobStatus GETs base/api/v1/job.
func jobStatus(ctx context.Context, base string) (monitor.JobStatus, error) {
	var st monitor.JobStatus
	return st, testhttp.GetJSON(ctx, base+"/api/v1/job", &st)
}
