package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/internal/testhttp"
	"github.com/snapflow/snapflow/snapshots"
)

// TestParitySum runs the example as a user would and checks its story: the
// lecture's cut read back from the store, one failure, one rollback, and the
// exact final sums.
func TestParitySum(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-n", "100000", "-store", t.TempDir()}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, re := range []string{
		`(?m)^checkpoint \d+: source=5 sum_even=6 sum_odd=9$`,
		`(?m)^  sum#1 +-> sum_odd +   = 9 `,
		`task sum#1 failed in epoch 1: .*injected failure on record 7`,
		`rolling back to checkpoint \d+ in epoch 2`,
		`(?m)^final sums: sum_even=2500050000 sum_odd=2500000000 `,
		`(?m)^exactly-once: OK$`,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("output lacks %s:\n%s", re, s)
		}
	}
}

// TestParitySumRunsAgain: every run on the same store tells the whole
// story again (a second run must not find the first one's final checkpoint
// and end at once).
func TestParitySumRunsAgain(t *testing.T) {
	store := t.TempDir()
	for i := range 2 {
		var out strings.Builder
		if err := run([]string{"-n", "20000", "-store", store}, &out); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out.String())
		}
		if !strings.Contains(out.String(), "source=5 sum_even=6 sum_odd=9") || !strings.Contains(out.String(), "exactly-once: OK") {
			t.Fatalf("run %d:\n%s", i+1, out.String())
		}
	}
}

// TestParitySumDefaultStore: without -store the job uses the embedded
// default store, snapflow-data in the working directory, and leaves nothing
// else behind.
func TestParitySumDefaultStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var out strings.Builder
	if err := run([]string{"-n", "10000"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != snapshots.DefaultDir {
		t.Fatalf("the working directory holds %v, want only %s", entries, snapshots.DefaultDir)
	}
}

func TestParitySumExitCodes(t *testing.T) {
	var out, stderr strings.Builder
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-n", "3"}, 2},
		{[]string{"-no-such-flag"}, 2},
		{[]string{"-store", "ftp://nope"}, 1},
	} {
		if got := exitCode(run(c.args, &out), &stderr); got != c.code {
			t.Errorf("%v: exit code %d, want %d", c.args, got, c.code)
		}
	}
}

func TestParitySumRejectsBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-n", "3"}, &out); err == nil {
		t.Fatal("n below the cut was accepted")
	}
	if err := run([]string{"-store", "ftp://nope"}, &out); err == nil || !strings.Contains(err.Error(), "unsupported store URL") {
		t.Fatalf("bad store URL: %v", err)
	}
}

// TestParitySumUnbounded: with -n 0 the source has no end; an interrupt
// takes a last checkpoint, stops the job, and checks the sums that
// checkpoint holds against the records its source had emitted.
func TestParitySumUnbounded(t *testing.T) {
	o, err := parseFlags([]string{"-n", "0", "-store", t.TempDir(), "-interval", "5ms"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	o.waiting = interrupt
	var out strings.Builder
	if err := runJob(ctx, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	m := regexp.MustCompile(`(?m)^last checkpoint \d+: the source had emitted 1\.\.(\d+); `).FindStringSubmatch(s)
	if m == nil || !strings.Contains(s, "exactly-once: OK") {
		t.Fatalf("output:\n%s", s)
	}
	if n, _ := strconv.ParseInt(m[1], 10, 64); n < 5 {
		t.Fatalf("the last checkpoint's source had emitted %d records, fewer than the cut's 5:\n%s", n, s)
	}
}

// TestClosedFormWraps: past the int64 range the closed form wraps as the
// job's running sums do.
func TestClosedFormWraps(t *testing.T) {
	for _, n := range []int64{1, 2, 7, 100, 10_000_001} {
		var even, odd int64
		for v := int64(1); v <= n; v++ {
			if v%2 == 0 {
				even += v
			} else {
				odd += v
			}
		}
		if e, o := closedForm(n); e != even || o != odd {
			t.Fatalf("closedForm(%d) = %d, %d; summed %d, %d", n, e, o, even, odd)
		}
	}
	// Past some 6.07e9 records sum_even wraps past the int64 range. The
	// job's sums grow by v at record v, wrapping; so does the closed form,
	// step by step, across the wrap: by induction from the small n above,
	// they stay equal.
	wrapped := false
	for n := int64(6_074_000_990); n < 6_074_001_010; n++ {
		e0, o0 := closedForm(n - 1)
		e1, o1 := closedForm(n)
		if e0 > 0 && e1 < 0 {
			wrapped = true
		}
		de, do := e1-e0, o1-o0
		if n%2 == 0 && (de != n || do != 0) || n%2 == 1 && (do != n || de != 0) {
			t.Fatalf("closedForm(%d) - closedForm(%d) = %d, %d; want record %d added to one sum", n, n-1, de, do, n)
		}
	}
	if !wrapped {
		t.Fatal("the window does not cross sum_even's wrap")
	}
}

// TestParitySumHTTP: with -n 0 and -http, the dashboard, the JSON API and
// /metrics are served while the job runs, and no longer once it has
// stopped.
func TestParitySumHTTP(t *testing.T) {
	o, err := parseFlags([]string{"-n", "0", "-store", t.TempDir(), "-interval", "5ms", "-http", "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	var out strings.Builder
	var base string
	var checked error
	o.waiting = func() {
		// On runJob's goroutine, which alone writes to out.
		defer interrupt()
		m := regexp.MustCompile(`(?m)^dashboard: (http://127\.0\.0\.1:\d+)/$`).FindStringSubmatch(out.String())
		if m == nil {
			checked = fmt.Errorf("no dashboard line in the output:\n%s", out.String())
			return
		}
		base = m[1]
		checked = checkServed(t.Context(), base)
	}
	if err := runJob(ctx, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if checked != nil {
		t.Fatal(checked)
	}
	if !strings.Contains(out.String(), "exactly-once: OK") {
		t.Fatalf("output:\n%s", out.String())
	}
	if resp, err := http.Get(base + "/api/v1/job"); err == nil {
		resp.Body.Close()
		t.Fatalf("the server still answers (%s) after the run", resp.Status)
	}
}

// checkServed checks what the server at base serves while the job runs:
// once the event stream says a checkpoint completed, the job's status has
// its operators and last checkpoint, /metrics its counters, and / the
// dashboard.
func checkServed(ctx context.Context, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := awaitCheckpointEvent(ctx, base); err != nil {
		return err
	}
	body, err := testhttp.Get(ctx, base+"/api/v1/job")
	if err != nil {
		return err
	}
	var st monitor.JobStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return fmt.Errorf("/api/v1/job: %w: %s", err, body)
	}
	par := map[string]int{}
	for _, op := range st.Operators {
		par[op.Name] = op.Parallelism
	}
	switch {
	case st.Name != "paritysum":
		return fmt.Errorf("/api/v1/job: name %q, want paritysum", st.Name)
	case st.State != monitor.StateRunning && st.State != monitor.StateRestoring:
		return fmt.Errorf("/api/v1/job: state %q while the job runs", st.State)
	case par["source"] != 1 || par["sum"] != 2 || par["sink"] != 1:
		return fmt.Errorf("/api/v1/job: operators %+v, want source (1), sum (2), sink (1)", st.Operators)
	case st.LastCheckpoint == nil || st.Counts.Completed == 0:
		return fmt.Errorf("/api/v1/job: no completed checkpoint after the event stream reported one: %s", body)
	}
	metrics, err := testhttp.Get(ctx, base+"/metrics")
	if err != nil {
		return err
	}
	for _, re := range []string{
		`(?m)^snapflow_checkpoints_total\{[^}]*result="completed"[^}]*\} [1-9]`,
		`(?m)^snapflow_last_checkpoint_id\{job_name="paritysum"\} [1-9]`,
		`(?m)^snapflow_operator_records_in_total\{[^}]*operator="sum"[^}]*\} `,
	} {
		if !regexp.MustCompile(re).Match(metrics) {
			return fmt.Errorf("/metrics lacks %s:\n%s", re, metrics)
		}
	}
	page, err := testhttp.Get(ctx, base+"/")
	if err != nil {
		return err
	}
	if !strings.Contains(strings.ToLower(string(page)), "<html") {
		return fmt.Errorf("/ is not the dashboard: %.200s", page)
	}
	return nil
}

// awaitCheckpointEvent reads the server's event stream until it reports a
// completed checkpoint.
func awaitCheckpointEvent(ctx context.Context, base string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/events", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/api/v1/events: %s", resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var u monitor.Update
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			return fmt.Errorf("/api/v1/events: %w: %s", err, data)
		}
		if u.Checkpoint != nil && u.Checkpoint.Status == monitor.StatusCompleted {
			return nil
		}
	}
	return fmt.Errorf("/api/v1/events ended without a completed checkpoint: %w", errors.Join(sc.Err(), ctx.Err()))
}
