package web_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/coordinator"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
)

// deadline bounds a test's waits: generous, so that a loaded machine
// passes; a hang still fails.
const deadline = 3 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), deadline)
	t.Cleanup(cancel)
	return ctx
}

func TestJobShowsThePlan(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	e.waitRunning(ctx)

	var job monitor.JobStatus
	e.get(ctx, "/api/v1/job", &job)
	if job.Name != "webtest" || job.State != monitor.StateRunning {
		t.Errorf("job %q in state %q, want webtest running", job.Name, job.State)
	}
	want := map[string]struct {
		kind  string
		par   int
		keyed bool
	}{
		"numbers": {"source", 2, false}, "square": {"operator", 2, false},
		"sum": {"operator", 2, true}, "sink": {"sink", 1, false},
	}
	if len(job.Operators) != len(want) {
		t.Errorf("operators %+v, want %d", job.Operators, len(want))
	}
	for _, op := range job.Operators {
		w, ok := want[op.ID]
		if !ok || op.Kind != w.kind || op.Parallelism != w.par || op.Keyed != w.keyed {
			t.Errorf("operator %+v, want %+v", op, w)
		}
	}
	if len(job.Tasks) != 7 {
		t.Errorf("%d tasks, want 7: %+v", len(job.Tasks), job.Tasks)
	}
	var edges []string
	for _, ed := range job.Edges {
		edges = append(edges, ed.From+">"+ed.To+":"+ed.Partitioning)
	}
	slices.Sort(edges)
	if w := []string{"numbers>square:forward", "square>sum:hash", "sum>sink:rebalance"}; !slices.Equal(edges, w) {
		t.Errorf("edges %v, want %v", edges, w)
	}
}

func TestCheckpointsOfTheJobAppear(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	e.waitRunning(ctx)

	var before web.CheckpointsResponse
	e.get(ctx, "/api/v1/checkpoints", &before)
	if len(before.Checkpoints) != 0 {
		t.Fatalf("checkpoints before any was taken: %+v", before.Checkpoints)
	}
	s := e.events(ctx, false)
	var ids []uint64
	for range 3 {
		id, err := e.job.Checkpoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s.waitCheckpoint(t, id)
		ids = append(ids, id)
	}
	var all web.CheckpointsResponse
	e.get(ctx, "/api/v1/checkpoints", &all)
	var got []uint64
	for _, cp := range all.Checkpoints {
		got = append(got, cp.ID)
	}
	slices.Reverse(ids) // newest first
	if !slices.Equal(got, ids) {
		t.Fatalf("checkpoints %v, want %v", got, ids)
	}
	var two web.CheckpointsResponse
	e.get(ctx, "/api/v1/checkpoints?limit=2", &two)
	if len(two.Checkpoints) != 2 || two.Checkpoints[0].ID != ids[0] {
		t.Errorf("limit=2: %+v", two.Checkpoints)
	}
	var cp monitor.Checkpoint
	e.get(ctx, fmt.Sprintf("/api/v1/checkpoints/%d", ids[0]), &cp)
	if cp.Status != monitor.StatusCompleted || cp.ID != ids[0] || len(cp.Tasks) != 7 {
		t.Errorf("checkpoint %d: %+v, want completed with 7 tasks", ids[0], cp)
	}
	for _, task := range cp.Tasks {
		if !strings.Contains(task.Task, "#") {
			t.Errorf("task figures %+v: not a task id", task)
		}
	}
}

func TestTriggerFromTheAPI(t *testing.T) {
	e := start(t, setup{token: "s3cret"})
	ctx := testContext(t)
	e.waitRunning(ctx)

	code, _, b := e.do(ctx, request{method: http.MethodPost, path: "/api/v1/checkpoints"})
	if code != http.StatusOK {
		t.Fatalf("POST /api/v1/checkpoints: %d %s", code, b)
	}
	var tr web.TriggerResponse
	if err := json.Unmarshal(b, &tr); err != nil || tr.ID == 0 {
		t.Fatalf("POST /api/v1/checkpoints: %s (%v)", b, err)
	}
	var cp monitor.Checkpoint
	e.get(ctx, fmt.Sprintf("/api/v1/checkpoints/%d", tr.ID), &cp)
	if cp.ID != tr.ID || cp.Status != monitor.StatusCompleted {
		t.Errorf("checkpoint %d after its POST: %+v", tr.ID, cp)
	}

	// A body, when given, is an empty JSON object.
	code, _, b = e.do(ctx, request{method: http.MethodPost, path: "/api/v1/checkpoints", body: "{}",
		header: map[string]string{"Content-Type": "application/json"}})
	if err := json.Unmarshal(b, &tr); code != http.StatusOK || err != nil || tr.ID <= cp.ID {
		t.Errorf("second POST: %d %s, want a newer id than %d", code, b, cp.ID)
	}
}

func TestSavepointFromTheAPI(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	e.waitRunning(ctx)

	post := func(body string) (int, http.Header, []byte) {
		return e.do(ctx, request{method: http.MethodPost, path: "/api/v1/savepoints", body: body,
			header: map[string]string{"Content-Type": "application/json"}})
	}
	code, _, b := post(`{"name":"before-upgrade"}`)
	if code != http.StatusOK {
		t.Fatalf("POST /api/v1/savepoints: %d %s", code, b)
	}
	var sp web.SavepointResponse
	if err := json.Unmarshal(b, &sp); err != nil || sp.ID == 0 || sp.Name != "before-upgrade" || sp.Stopped {
		t.Fatalf("savepoint answer %s (%v)", b, err)
	}
	var cp monitor.Checkpoint
	e.get(ctx, fmt.Sprintf("/api/v1/checkpoints/%d", sp.ID), &cp)
	if cp.Savepoint != "before-upgrade" || cp.Status != monitor.StatusCompleted {
		t.Errorf("savepoint %d in the history: %+v", sp.ID, cp)
	}

	code, hdr, b := post(`{"name":"before-upgrade"}`)
	wantError(t, "the same name again", code, hdr, b, http.StatusConflict, "exists")
	code, hdr, b = post(`{"name":"a/b"}`)
	wantError(t, "a bad name", code, hdr, b, http.StatusBadRequest, "a/b")
	code, hdr, b = post(`{"stop":true}`)
	wantError(t, "no name", code, hdr, b, http.StatusBadRequest, "empty")
	code, hdr, b = post(``)
	wantError(t, "no body", code, hdr, b, http.StatusBadRequest, "body")
	select {
	case <-e.job.Done():
		t.Fatal("the job ended after refused savepoints")
	default:
	}

	// Stop with a savepoint: the job stops.
	code, _, b = post(`{"name":"last","stop":true}`)
	if err := json.Unmarshal(b, &sp); code != http.StatusOK || err != nil || !sp.Stopped || sp.Name != "last" {
		t.Fatalf("stop with savepoint: %d %s", code, b)
	}
	select {
	case <-e.job.Done():
	case <-ctx.Done():
		t.Fatal("the job did not stop after a stop-with-savepoint")
	}
	code, hdr, b = e.do(ctx, request{method: http.MethodPost, path: "/api/v1/checkpoints"})
	wantError(t, "a checkpoint of a stopped job", code, hdr, b, http.StatusConflict)
}

func TestReadOnlyServerRefusesControl(t *testing.T) {
	e := start(t, setup{readOnly: true})
	ctx := testContext(t)
	for _, path := range []string{"/api/v1/checkpoints", "/api/v1/savepoints"} {
		code, hdr, b := e.do(ctx, request{method: http.MethodPost, path: path, body: `{"name":"x"}`})
		wantError(t, "POST "+path, code, hdr, b, http.StatusForbidden, "read-only")
	}
	var job monitor.JobStatus
	e.get(ctx, "/api/v1/job", &job)
}

// TestHostNamesRefusedWithoutToken: without a token, a request whose Host
// is another name than localhost (a page of another site rebinding its
// name to 127.0.0.1, with a matching Origin) can neither read the API nor
// control the job; localhost and IP addresses are served, and with a
// token any name is (the token protects).
func TestHostNamesRefusedWithoutToken(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	port := e.srv.Addr()[strings.LastIndex(e.srv.Addr(), ":"):]
	evil := "rebind.attacker.example" + port
	for _, r := range []request{
		{method: http.MethodGet, path: "/api/v1/job", host: evil},
		{method: http.MethodGet, path: "/", host: evil},
		{method: http.MethodPost, path: "/api/v1/savepoints", host: evil, body: `{"name":"pwn","stop":true}`,
			header: map[string]string{"Content-Type": "application/json", "Origin": "http://" + evil, "Sec-Fetch-Site": "same-origin"}},
	} {
		code, hdr, b := e.do(ctx, r)
		wantError(t, r.method+" "+r.path+" as "+evil, code, hdr, b, http.StatusMisdirectedRequest, "without a token")
	}
	for _, host := range []string{"localhost" + port, "127.0.0.1" + port, "[::1]" + port, "LOCALHOST" + port} {
		if code, _, b := e.do(ctx, request{method: http.MethodGet, path: "/api/v1/job", host: host}); code != http.StatusOK {
			t.Errorf("GET /api/v1/job as %s: %d %s", host, code, b)
		}
	}
	select {
	case <-e.job.Done():
		t.Fatal("the refused stop-with-savepoint stopped the job")
	default:
	}
	withToken := start(t, setup{token: "s3cret"})
	port = withToken.srv.Addr()[strings.LastIndex(withToken.srv.Addr(), ":"):]
	if code, _, b := withToken.do(ctx, request{method: http.MethodGet, path: "/api/v1/job", host: "dashboard.example" + port}); code != http.StatusOK {
		t.Errorf("with a token, GET /api/v1/job as dashboard.example: %d %s", code, b)
	}
}

func TestBadRequests(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	e.waitRunning(ctx)
	id, err := e.job.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	json := map[string]string{"Content-Type": "application/json"}
	for _, c := range []struct {
		name  string
		req   request
		want  int
		words []string
	}{
		{"limit not a number", request{method: "GET", path: "/api/v1/checkpoints?limit=ten"}, 400, []string{"limit", "ten"}},
		{"limit zero", request{method: "GET", path: "/api/v1/checkpoints?limit=0"}, 400, []string{"limit"}},
		{"limit negative", request{method: "GET", path: "/api/v1/timeline?limit=-3"}, 400, []string{"limit"}},
		{"limit twice", request{method: "GET", path: "/api/v1/timeline?limit=1&limit=2"}, 400, []string{"limit"}},
		{"id not a number", request{method: "GET", path: "/api/v1/checkpoints/abc"}, 400, []string{"abc"}},
		{"id negative", request{method: "GET", path: "/api/v1/checkpoints/-1"}, 400, []string{"-1"}},
		{"id too large", request{method: "GET", path: "/api/v1/checkpoints/99999999999999999999999"}, 400, nil},
		{"unknown id", request{method: "GET", path: fmt.Sprintf("/api/v1/checkpoints/%d", id+1000)}, 404, []string{fmt.Sprint(id + 1000)}},
		{"unknown route", request{method: "GET", path: "/api/v2/job"}, 404, []string{"/api/v2/job"}},
		{"unknown api route", request{method: "GET", path: "/api/v1/checkpoints/1/tasks"}, 404, nil},
		{"wrong method", request{method: "DELETE", path: "/api/v1/job"}, 405, []string{"DELETE"}},
		{"wrong method on a checkpoint", request{method: "POST", path: fmt.Sprintf("/api/v1/checkpoints/%d", id)}, 405, nil},
		{"GET savepoints", request{method: "GET", path: "/api/v1/savepoints"}, 405, nil},
		{"PUT the page", request{method: "PUT", path: "/"}, 405, nil},
		{"bad JSON", request{method: "POST", path: "/api/v1/savepoints", body: `{"name":`, header: json}, 400, []string{"JSON"}},
		{"not an object", request{method: "POST", path: "/api/v1/savepoints", body: `["x"]`, header: json}, 400, []string{"JSON"}},
		{"unknown field", request{method: "POST", path: "/api/v1/savepoints", body: `{"name":"x","force":true}`, header: json}, 400, []string{"force"}},
		{"unknown field in a trigger", request{method: "POST", path: "/api/v1/checkpoints", body: `{"savepoint":"x"}`, header: json}, 400, []string{"savepoint"}},
		{"two values", request{method: "POST", path: "/api/v1/savepoints", body: `{"name":"x"} {"name":"y"}`, header: json}, 400, nil},
		{"wrong type", request{method: "POST", path: "/api/v1/savepoints", body: `{"name":3}`, header: json}, 400, nil},
		{"not JSON", request{method: "POST", path: "/api/v1/checkpoints", body: "id=1", header: map[string]string{"Content-Type": "application/x-www-form-urlencoded"}}, 415, nil},
		{"oversize body", request{method: "POST", path: "/api/v1/savepoints", body: `{"name":"` + strings.Repeat("x", 100<<10) + `"}`, header: json}, 413, nil},
		{"cross-origin POST", request{method: "POST", path: "/api/v1/checkpoints", header: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}}, 403, []string{"cross-origin"}},
	} {
		code, hdr, b := e.do(ctx, c.req)
		wantError(t, c.name, code, hdr, b, c.want, c.words...)
		if code == 405 && hdr.Get("Allow") == "" {
			t.Errorf("%s: 405 without Allow", c.name)
		}
	}
	// None of that took a checkpoint or stopped the job.
	var all web.CheckpointsResponse
	e.get(ctx, "/api/v1/checkpoints", &all)
	if len(all.Checkpoints) != 1 || all.Checkpoints[0].ID != id {
		t.Errorf("checkpoints after bad requests: %+v, want only %d", all.Checkpoints, id)
	}
	if _, err := e.job.Checkpoint(ctx); err != nil {
		t.Errorf("the job after bad requests: %v", err)
	}
}

func TestTokenIsRequiredEverywhere(t *testing.T) {
	const token = "correct-horse-battery-staple"
	e := start(t, setup{token: token})
	ctx := testContext(t)
	e.waitRunning(ctx)
	routes := []request{
		{method: "GET", path: "/"},
		{method: "GET", path: "/metrics"},
		{method: "GET", path: "/api/v1/job"},
		{method: "GET", path: "/api/v1/checkpoints"},
		{method: "GET", path: "/api/v1/checkpoints/1"},
		{method: "GET", path: "/api/v1/timeline"},
		{method: "GET", path: "/api/v1/events"},
		{method: "POST", path: "/api/v1/checkpoints"},
		{method: "POST", path: "/api/v1/savepoints", body: `{"name":"x"}`},
		{method: "GET", path: "/nowhere"},
		{method: "DELETE", path: "/api/v1/job"},
	}
	for _, r := range routes {
		for _, auth := range []map[string]string{
			nil,
			{"Authorization": "Bearer wrong"},
			{"Authorization": "Bearer " + token + "x"},
			{"Authorization": "Basic " + token},
			{"Authorization": "Bearer"},
			{"Authorization": token},
		} {
			r := r
			r.noToken, r.header = true, auth
			code, hdr, b := e.do(ctx, r)
			wantError(t, fmt.Sprintf("%s %s with %v", r.method, r.path, auth), code, hdr, b, http.StatusUnauthorized, "token")
			if code == http.StatusUnauthorized && !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("%s %s: 401 without WWW-Authenticate: Bearer", r.method, r.path)
			}
		}
		// ?token= counts only where a browser cannot send a header (the
		// page and the stream, checked below).
		if r.method == "GET" && (r.path == "/" || r.path == "/api/v1/events") {
			continue
		}
		q := r
		q.noToken, q.path = true, r.path+"?token="+token
		code, hdr, b := e.do(ctx, q)
		wantError(t, fmt.Sprintf("%s %s?token=", r.method, r.path), code, hdr, b, http.StatusUnauthorized, "token")
	}
	// With the token: the page, the metrics, the API and the stream.
	code, hdr, b := e.do(ctx, request{method: "GET", path: "/"})
	if code != 200 || !strings.Contains(string(b), "<svg id=\"topology\"") || hdr.Get("Content-Security-Policy") == "" {
		t.Errorf("GET / with the token: %d %q", code, hdr.Get("Content-Security-Policy"))
	}
	code, _, b = e.do(ctx, request{method: "GET", path: "/?token=" + token, noToken: true})
	if code != 200 || !strings.Contains(string(b), "snapflow") {
		t.Errorf("GET /?token=: %d", code)
	}
	code, _, b = e.do(ctx, request{method: "GET", path: "/metrics"})
	if code != 200 || !strings.Contains(string(b), "snapflow_") {
		t.Errorf("GET /metrics with the token: %d %.200s", code, b)
	}
	s := e.events(ctx, true)
	id, err := e.job.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCheckpoint(t, id)
}

func TestEventsDeliverCheckpoints(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	e.waitRunning(ctx)
	s := e.events(ctx, false)
	code, _, b := e.do(ctx, request{method: http.MethodPost, path: "/api/v1/checkpoints"})
	var tr web.TriggerResponse
	if err := json.Unmarshal(b, &tr); code != 200 || err != nil {
		t.Fatalf("POST: %d %s", code, b)
	}
	cp := s.waitCheckpoint(t, tr.ID)
	if cp.Triggered.IsZero() || cp.Ended.Before(cp.Triggered) || cp.DurationSeconds <= 0 || len(cp.Tasks) != 7 {
		t.Errorf("the update of checkpoint %d: %+v", tr.ID, cp)
	}
}

func TestCloseEndsEventStreams(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	s := e.events(ctx, false)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if _, ok := s.next(t); !ok {
				return
			}
		}
	}()
	if err := e.srv.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("an event stream outlived Close")
	}
	if err := e.srv.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	select {
	case <-e.job.Done():
		t.Fatal("closing the server ended the job")
	default:
	}
}

func TestContextEndClosesTheServer(t *testing.T) {
	e := start(t, setup{})
	ctx, cancel := context.WithCancel(t.Context())
	mon, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.Start(ctx, web.Config{}, mon, e.job)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(srv.URL() + "/api/v1/job")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	cancel()
	if err := srv.Close(); err != nil { // waits for the closing that the context started
		t.Fatal(err)
	}
	if _, err := http.Get(srv.URL() + "/api/v1/job"); err == nil {
		t.Error("the server answers after its context ended")
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestStartRefusesBadConfig(t *testing.T) {
	mon, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cfg web.Config
		mon *monitor.Monitor
	}{
		{web.Config{}, nil},
		{web.Config{Addr: "no-port"}, mon},
		{web.Config{RequestTimeout: -time.Second}, mon},
	} {
		if s, err := web.Start(t.Context(), c.cfg, c.mon, nil); err == nil {
			s.Close()
			t.Errorf("Start(%+v, %v) did not fail", c.cfg, c.mon)
		} else if !errors.Is(err, web.ErrConfig) {
			t.Errorf("Start(%+v): %v does not wrap ErrConfig", c.cfg, err)
		}
	}
}

func TestAddressDefaultsToLoopback(t *testing.T) {
	mon, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"", ":0", "127.0.0.1:0"} {
		s, err := web.Start(t.Context(), web.Config{Addr: addr}, mon, nil)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || strings.HasSuffix(s.Addr(), ":0") {
			t.Errorf("Addr %q gives %s, want 127.0.0.1 and a port", addr, s.Addr())
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// An event stream stays open past the server's read and write timeouts,
// which bound every other request.
func TestEventStreamOutlivesTimeouts(t *testing.T) {
	defer web.SetTimeouts(50*time.Millisecond, 50*time.Millisecond)()
	e := start(t, setup{})
	ctx := testContext(t)
	e.waitRunning(ctx)
	s := e.events(ctx, false)
	<-time.After(300 * time.Millisecond) // well past both timeouts
	id, err := e.job.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s.waitCheckpoint(t, id)
}

// A panic in a handler (here in the Controller) answers 500 with a JSON
// error; the server and the job go on.
func TestHandlerPanicIsContained(t *testing.T) {
	e := start(t, setup{readOnly: true})
	ctx := testContext(t)
	srv, err := web.Start(ctx, web.Config{Logger: discard()}, e.mon, panicky{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	res, err := http.Post(srv.URL()+"/api/v1/checkpoints", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	wantError(t, "a panicking controller", res.StatusCode, res.Header, b, http.StatusInternalServerError, "internal")
	res, err = http.Get(srv.URL() + "/api/v1/job")
	if err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("after the panic: %v %v", res, err)
	}
	res.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	select {
	case <-e.job.Done():
		t.Fatal("the job ended")
	default:
	}
}

type panicky struct{}

func (panicky) Checkpoint(context.Context) (uint64, error) {
	panic("web test: a controller that panics")
}
func (panicky) Savepoint(context.Context, string) (uint64, error) {
	panic("web test: a controller that panics")
}
func (panicky) StopWithSavepoint(context.Context, string) (uint64, error) {
	panic("web test: a controller that panics")
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// HEAD on the event stream answers the headers and ends: the client reuses
// the connection for its next request, which a handler still streaming
// would never read.
func TestHeadOfTheEventStreamEnds(t *testing.T) {
	e := start(t, setup{})
	ctx := testContext(t)
	code, hdr, _ := e.do(ctx, request{method: http.MethodHead, path: "/api/v1/events"})
	if code != http.StatusOK || hdr.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("HEAD /api/v1/events: %d %q", code, hdr.Get("Content-Type"))
	}
	var job monitor.JobStatus
	e.get(ctx, "/api/v1/job", &job) // on the same connection
}

// finishingController answers every request as a job whose sources have
// ended answers a savepoint.
type finishingController struct{}

func (finishingController) Checkpoint(context.Context) (uint64, error) {
	return 0, fmt.Errorf("checkpoint: %w", coordinator.ErrFinishing)
}
func (finishingController) Savepoint(context.Context, string) (uint64, error) {
	return 0, fmt.Errorf("savepoint: %w", coordinator.ErrFinishing)
}
func (finishingController) StopWithSavepoint(context.Context, string) (uint64, error) {
	return 0, fmt.Errorf("savepoint: %w", coordinator.ErrFinishing)
}

// TestFinishingJobConflicts: a request the job can never take (its sources
// ended) is a 409, not a 503 that invites a retry.
func TestFinishingJobConflicts(t *testing.T) {
	m, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := web.Start(t.Context(), web.Config{Logger: slog.New(slog.DiscardHandler)}, m, finishingController{})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, srv.URL()+"/api/v1/savepoints", strings.NewReader(`{"name":"late"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	wantError(t, "POST /api/v1/savepoints to a finishing job", res.StatusCode, res.Header, b, http.StatusConflict, "finishing")
}

// blockingController holds every checkpoint request until release closes.
type blockingController struct {
	entered chan struct{}
	release chan struct{}
}

func (c blockingController) Checkpoint(ctx context.Context) (uint64, error) {
	c.entered <- struct{}{}
	select {
	case <-c.release:
		return 7, nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}
func (c blockingController) Savepoint(ctx context.Context, _ string) (uint64, error) {
	return c.Checkpoint(ctx)
}
func (c blockingController) StopWithSavepoint(ctx context.Context, _ string) (uint64, error) {
	return c.Checkpoint(ctx)
}

// TestRequestsAreBounded: past Config.MaxEventStreams open streams and
// Config.MaxControlRequests waiting control requests, a request gets 503
// with Retry-After; a slot given back serves the next.
func TestRequestsAreBounded(t *testing.T) {
	m, err := monitor.New(monitor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctl := blockingController{entered: make(chan struct{}, 1), release: make(chan struct{})}
	srv, err := web.Start(t.Context(), web.Config{Logger: slog.New(slog.DiscardHandler), MaxEventStreams: 2, MaxControlRequests: 1}, m, ctl)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ctx := testContext(t)
	open := func() (*http.Response, context.CancelFunc) {
		sctx, cancel := context.WithCancel(ctx)
		req, err := http.NewRequestWithContext(sctx, http.MethodGet, srv.URL()+"/api/v1/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res, cancel
	}
	var cancels []context.CancelFunc
	for range 2 {
		res, cancel := open()
		cancels = append(cancels, cancel)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("stream: %s", res.Status)
		}
		defer res.Body.Close()
	}
	res, cancel := open()
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	cancel()
	wantError(t, "a third stream", res.StatusCode, res.Header, b, http.StatusServiceUnavailable, "too many event streams")
	if res.Header.Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
	cancels[0]()
	for {
		res, cancel := open()
		if res.StatusCode == http.StatusOK {
			res.Body.Close()
			cancel()
			break
		}
		res.Body.Close()
		cancel()
		if ctx.Err() != nil {
			t.Fatal("a closed stream's slot never came back")
		}
	}

	post := func() (int, []byte) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL()+"/api/v1/checkpoints", nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	first := make(chan int, 1)
	go func() { code, _ := post(); first <- code }()
	<-ctl.entered
	if code, b := post(); code != http.StatusServiceUnavailable || !strings.Contains(string(b), "too many checkpoint and savepoint requests") {
		t.Errorf("a second control request while one waits: %d %s", code, b)
	}
	close(ctl.release)
	if code := <-first; code != http.StatusOK {
		t.Errorf("the waiting request: %d", code)
	}
}
