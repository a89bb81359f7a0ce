package main

import (
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// sourceRecords is how many records the live job's source emits before
// it waits.
const sourceRecords = 100

// liveJob is a running job with a monitor and its HTTP server on a free
// loopback port.
type liveJob struct {
	job *actors.Job
	mon *monitor.Monitor
	url string
	// ids are the checkpoints taken, oldest first; the last is the
	// savepoint before-upgrade.
	ids []uint64
}

// startLiveJob starts a job (source -> double, parallelism 2 -> sink)
// whose source emits sourceRecords records and then waits without end,
// serves it with token (none when empty), takes three checkpoints and a
// savepoint, and waits until the monitor has seen them complete.
func startLiveJob(t *testing.T, token string) *liveJob {
	t.Helper()
	mon, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	gate := testsrc.NewGate(sourceRecords)
	g := topology.New("status-test")
	nums := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &testsrc.Gated{N: math.MaxInt64, Gate: gate}
	})
	doubled := topology.Map(nums, "double", func(v int64) int64 { return 2 * v }, topology.Parallelism(2))
	topology.Sink(doubled, "sink", func(int64) error { return nil })
	quiet := slog.New(slog.DiscardHandler)
	job, err := actors.Start(t.Context(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(quiet),
		actors.WithListener(mon.Listener()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = job.Stop() })
	mon.Attach(job)
	srv, err := web.Start(t.Context(), web.Config{Token: token, Logger: quiet}, mon, job)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	lj := &liveJob{job: job, mon: mon, url: srv.URL()}
	gate.WaitReached(t, sourceRecords)

	updates, unsubscribe := mon.Subscribe()
	defer unsubscribe()
	for range 3 {
		id, err := job.Checkpoint(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		lj.ids = append(lj.ids, id)
	}
	id, err := job.Savepoint(t.Context(), "before-upgrade")
	if err != nil {
		t.Fatal(err)
	}
	lj.ids = append(lj.ids, id)
	// The job answers before its listeners may have seen the completion.
	seen := map[uint64]bool{}
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for len(seen) < len(lj.ids) {
		select {
		case u := <-updates:
			if u.Checkpoint != nil && u.Checkpoint.Status == monitor.StatusCompleted {
				seen[u.Checkpoint.ID] = true
			}
		case <-timeout.C:
			t.Fatalf("the monitor saw checkpoints %v of %v complete", seen, lj.ids)
		}
	}
	return lj
}

// TestJobsStatus: jobs status prints the live job's state, its last
// checkpoint, counts and operators with their record counts, and one line
// per recent checkpoint, newest first; --limit bounds those.
func TestJobsStatus(t *testing.T) {
	lj := startLiveJob(t, "")
	r := runCLI("jobs", "status", "--addr", lj.url)
	r.want(t, exitOK)
	out := r.stdout
	sp := lj.ids[3]
	for _, re := range []string{
		`(?m)^job status-test: running, epoch 1, up \S+$`,
		`(?m)^last completed checkpoint: ` + itoa(sp) + ` \(savepoint "before-upgrade"\), \S+ ago$`,
		`(?m)^checkpoints: 4 completed, 0 aborted, 0 declined; task failures: 0; restores: 0$`,
		`(?m)^OPERATOR +KIND +PARALLELISM +RECORDS IN +RECORDS OUT +BACKPRESSURE +QUEUED BATCHES$`,
		`(?m)^source +source +1 +0 +100 +\S+ +\d+$`,
		`(?m)^double +operator +2 +100 +100 +\S+ +\d+$`,
		`(?m)^sink +sink +1 +100 +0 +\S+ +\d+$`,
		`(?m)^CHECKPOINT +STATUS +DURATION +SIZE +ALIGNMENT +SAVEPOINT +NOTE$`,
		`(?m)^` + itoa(sp) + ` +completed +\S+ +\d+(\.\d)?[KMG]?i?B +\S+ +before-upgrade *$`,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("jobs status lacks %s:\n%s", re, out)
		}
	}
	rows := regexp.MustCompile(`(?m)^(\d+) +completed `).FindAllStringSubmatch(out, -1)
	var got []string
	for _, m := range rows {
		got = append(got, m[1])
	}
	want := []string{itoa(lj.ids[3]), itoa(lj.ids[2]), itoa(lj.ids[1]), itoa(lj.ids[0])}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("checkpoint rows %v, want %v (newest first):\n%s", got, want, out)
	}

	r = runCLI("jobs", "status", "--addr", lj.url, "--limit", "2")
	r.want(t, exitOK)
	if n := len(regexp.MustCompile(`(?m)^\d+ +completed `).FindAllString(r.stdout, -1)); n != 2 {
		t.Errorf("--limit 2 printed %d checkpoint rows:\n%s", n, r.stdout)
	}

	// A bare host:port means http.
	runCLI("jobs", "status", "--addr", strings.TrimPrefix(lj.url, "http://")).want(t, exitOK)
}

// TestJobsStatusJSON: --json prints the API's two answers as one object.
func TestJobsStatusJSON(t *testing.T) {
	lj := startLiveJob(t, "")
	r := runCLI("jobs", "status", "--addr", lj.url, "--json", "--limit", "3")
	r.want(t, exitOK)
	var got struct {
		Job         monitor.JobStatus    `json:"job"`
		Checkpoints []monitor.Checkpoint `json:"checkpoints"`
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("--json printed what is not {job, checkpoints}: %v\n%s", err, r.stdout)
	}
	if got.Job.Name != "status-test" || got.Job.State != monitor.StateRunning || len(got.Job.Operators) != 3 || got.Job.Counts.Completed != 4 {
		t.Errorf("--json job: %+v", got.Job)
	}
	if len(got.Checkpoints) != 3 || got.Checkpoints[0].ID != lj.ids[3] || got.Checkpoints[0].Savepoint != "before-upgrade" {
		t.Errorf("--json checkpoints: %+v, want 3, the newest savepoint before-upgrade (%d)", got.Checkpoints, lj.ids[3])
	}
}

// TestJobsStatusToken: a server with a token refuses jobs status without
// it or with another, with a message that says where the token goes, and
// answers with it from --token or SNAPFLOW_TOKEN.
func TestJobsStatusToken(t *testing.T) {
	lj := startLiveJob(t, "s3cret")
	t.Setenv(tokenEnv, "")
	r := runCLI("jobs", "status", "--addr", lj.url)
	r.want(t, exitFailed, "snapflow: the server at "+lj.url+" wants a token (--token or SNAPFLOW_TOKEN)")
	if r.stdout != "" {
		t.Errorf("a refused request printed %q", r.stdout)
	}
	runCLI("jobs", "status", "--addr", lj.url, "--token", "wrong").want(t, exitFailed, "refused the token of --token")
	runCLI("jobs", "status", "--addr", lj.url, "--token", "s3cret").want(t, exitOK)

	t.Setenv(tokenEnv, "s3cret")
	r = runCLI("jobs", "status", "--addr", lj.url)
	r.want(t, exitOK)
	if !strings.HasPrefix(r.stdout, "job status-test: running") {
		t.Errorf("with SNAPFLOW_TOKEN: %q", r.stdout)
	}
	t.Setenv(tokenEnv, "wrong")
	runCLI("jobs", "status", "--addr", lj.url).want(t, exitFailed, "refused the token of SNAPFLOW_TOKEN")
}

// TestJobsStatusErrors: an address nothing listens on, one that answers
// 404 with the server's JSON error, and usage errors.
func TestJobsStatusErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	runCLI("jobs", "status", "--addr", dead).want(t, exitFailed, "snapflow: cannot reach the job at "+dead)

	lj := startLiveJob(t, "")
	r := runCLI("jobs", "status", "--addr", lj.url+"/nope")
	r.want(t, exitNotFound, "404 Not Found: web: no route", "is --addr the address the job serves its API on?")
	withPassword := strings.Replace(lj.url, "http://", "http://user:s3cretpw@", 1) + "/nope"
	r = runCLI("jobs", "status", "--addr", withPassword)
	r.want(t, exitNotFound, "404 Not Found")
	if strings.Contains(r.stderr, "s3cretpw") {
		t.Errorf("the error shows the password of --addr: %s", r.stderr)
	}

	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"jobs", "status"}, "--addr is required"},
		{[]string{"jobs", "status", "--addr", lj.url, "--limit", "0"}, "--limit 0: want 1 or more"},
		{[]string{"jobs", "status", "--addr", "ftp://host:21"}, `--addr "ftp://host:21": scheme "ftp": want http or https`},
		{[]string{"jobs", "status", "--addr", "http://"}, `--addr "http://": no host`},
		{[]string{"jobs", "status", "--addr", lj.url, "extra"}, `unexpected argument "extra"`},
		{[]string{"jobs", "status", "--store", "x"}, "flag provided but not defined: -store"},
		{[]string{"jobs"}, "jobs: missing subcommand (status)"},
		{[]string{"jobs", "frob"}, `jobs: unknown subcommand "frob"`},
	} {
		r := runCLI(tc.args...)
		r.want(t, exitUsage, "snapflow: "+tc.msg)
		if r.stdout != "" {
			t.Errorf("%q printed %q", tc.args, r.stdout)
		}
	}
	r = runCLI("jobs", "status", "-h")
	r.want(t, exitOK, "usage: "+statusSynopsis, "-limit")
	runCLI("help").want(t, exitOK, "jobs status --addr URL [--token TOKEN] [--json] [--limit N]")
}

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }

// TestStatusPrintsNoControlCharacters: names and errors from the server
// reach the terminal without their escape sequences.
func TestStatusPrintsNoControlCharacters(t *testing.T) {
	var out strings.Builder
	job := monitor.JobStatus{Name: "evil\x1b]0;owned\x07", State: "failed", Error: "boom\x1b[2J"}
	if err := printStatus(printable{&out}, job, []monitor.Checkpoint{{ID: 1, Status: "aborted", Error: "x\x1b[31m"}}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.ContainsAny(s, "\x1b\x07") || !strings.Contains(s, "job evil?]0;owned?: failed") {
		t.Fatalf("output:\n%q", s)
	}
}
