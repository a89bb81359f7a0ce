package dashboard

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

var quiet = slog.New(slog.DiscardHandler)

// startJob starts a job called served whose source never ends, on store,
// fed to srv's monitor, and attaches it.
func startJob(t *testing.T, srv *Server, store snapshots.Store) *actors.Job {
	t.Helper()
	gate := testsrc.NewGate(math.MaxInt64)
	g := topology.New("served")
	nums := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &testsrc.Gated{N: math.MaxInt64, Gate: gate}
	})
	topology.Sink(nums, "sink", func(int64) error { return nil })
	opts := append(srv.Options(), actors.WithStore(store), actors.WithLogger(quiet))
	job, err := actors.Start(t.Context(), g, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = job.Stop() })
	srv.Attach(job)
	return job
}

// get GETs path and decodes its JSON body into v (when not nil); it
// returns the status.
func get(t *testing.T, url, token string, v any) int {
	t.Helper()
	return do(t, http.MethodGet, url, token, v)
}

func do(t *testing.T, method, url, token string, v any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("%s %s: %d %q: %v", method, url, resp.StatusCode, body, err)
		}
	}
	return resp.StatusCode
}

// TestNoAddress: without an address nothing is served, and the nil Server
// does nothing.
func TestNoAddress(t *testing.T) {
	srv, err := Start(t.Context(), Config{Logger: quiet})
	if srv != nil || err != nil {
		t.Fatalf("Start with no address: %v, %v; want nil, nil", srv, err)
	}
	srv.Attach(nil)
	if srv.Options() != nil || srv.URL() != "" || srv.Close() != nil || srv.Banner() != "" {
		t.Fatalf("the nil Server did something: options %v, URL %q, banner %q", srv.Options(), srv.URL(), srv.Banner())
	}
}

// TestServesAttachedJobs: the server prints its URL, answers before any
// job, shows and controls the attached job, and after a restart of the
// job (a second Attach) controls the new one.
func TestServesAttachedJobs(t *testing.T) {
	srv, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	}()
	base := srv.URL()
	if want := "dashboard: " + base + "/"; srv.Banner() != want || !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("Banner = %q, want %q", srv.Banner(), want)
	}

	var st monitor.JobStatus
	if code := get(t, base+"/api/v1/job", "", &st); code != http.StatusOK || st.State != monitor.StateStarting {
		t.Fatalf("GET /api/v1/job before any job: %d, state %q; want 200, %q", code, st.State, monitor.StateStarting)
	}
	var e struct{ Error string }
	if code := do(t, http.MethodPost, base+"/api/v1/checkpoints", "", &e); code != http.StatusServiceUnavailable || !strings.Contains(e.Error, ErrNoJob.Error()) {
		t.Fatalf("POST /api/v1/checkpoints before any job: %d %q; want 503 naming %q", code, e.Error, ErrNoJob)
	}

	store := snapshots.NewMem()
	first := startJob(t, srv, store)
	updates, unsubscribe := srv.mon.Subscribe()
	defer unsubscribe()
	var trig struct{ ID uint64 }
	if code := do(t, http.MethodPost, base+"/api/v1/checkpoints", "", &trig); code != http.StatusOK || trig.ID == 0 {
		t.Fatalf("POST /api/v1/checkpoints: %d, id %d", code, trig.ID)
	}
	awaitCompleted(t, updates, trig.ID)
	st = monitor.JobStatus{}
	get(t, base+"/api/v1/job", "", &st)
	if st.Name != "served" || len(st.Operators) != 2 || st.LastCheckpoint == nil || st.LastCheckpoint.ID != trig.ID {
		t.Fatalf("GET /api/v1/job: %+v; want job served, 2 operators, last checkpoint %d", st, trig.ID)
	}
	metrics := fetchText(t, base+"/metrics")
	if want := `snapflow_last_checkpoint_id{job_name="served"} ` + strconv.FormatUint(trig.ID, 10); !strings.Contains(metrics, want) {
		t.Fatalf("/metrics lacks %q:\n%s", want, metrics)
	}

	if err := first.Stop(); !errors.Is(err, actors.ErrStopped) {
		t.Fatal(err)
	}
	startJob(t, srv, store)
	var again struct{ ID uint64 }
	if code := do(t, http.MethodPost, base+"/api/v1/checkpoints", "", &again); code != http.StatusOK || again.ID <= trig.ID {
		t.Fatalf("POST /api/v1/checkpoints to the second job: %d, id %d; want 200 and an id above %d", code, again.ID, trig.ID)
	}
}

// TestToken: with a token the server wants it, and its banner says so.
func TestToken(t *testing.T) {
	srv, err := Start(t.Context(), Config{Addr: "127.0.0.1:0", Token: "s3cret", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	if !strings.Contains(srv.Banner(), "token") {
		t.Errorf("Banner = %q, which does not say that a token is needed", srv.Banner())
	}
	if code := get(t, srv.URL()+"/api/v1/job", "", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/job without the token: %d, want 401", code)
	}
	if code := get(t, srv.URL()+"/api/v1/job", "s3cret", nil); code != http.StatusOK {
		t.Errorf("GET /api/v1/job with the token: %d, want 200", code)
	}
}

// awaitCompleted waits for the update that says checkpoint id completed.
func awaitCompleted(t *testing.T, updates <-chan monitor.Update, id uint64) {
	t.Helper()
	timeout := time.NewTimer(2 * time.Minute)
	defer timeout.Stop()
	for {
		select {
		case u := <-updates:
			if u.Checkpoint != nil && u.Checkpoint.ID == id && u.Checkpoint.Status == monitor.StatusCompleted {
				return
			}
		case <-timeout.C:
			t.Fatalf("no update says checkpoint %d completed", id)
		}
	}
}

func fetchText(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}
