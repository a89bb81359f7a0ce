package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestMain fails the package if a goroutine outlives its tests: a closed
// server must end its connections, event streams and handlers.
func TestMain(m *testing.M) { leaktest.Main(m) }

// setup says how to start a job, its monitor and its server.
type setup struct {
	token    string
	interval time.Duration // periodic checkpoints (0: only those asked for)
	readOnly bool          // no Controller
	failAt   int64         // > 0: the "square" operator panics once, on the record failAt
	rate     float64       // records/s of the source (default 20000)
	sinkRate float64       // > 0: the sink takes at most this many records/s, like a slow external system
}

// env is a running job with a monitor and the real server on 127.0.0.1:0.
type env struct {
	t       *testing.T
	job     *actors.Job
	mon     *monitor.Monitor
	srv     *web.Server
	token   string
	running chan struct{} // closed at the job's first EventRunning
	client  *http.Client
}

// start starts a small unbounded job (a rated source, a keyed running sum,
// a sink) on a memory store, and the server; both stop when the test ends.
func start(t *testing.T, s setup) *env {
	t.Helper()
	if s.rate == 0 {
		s.rate = 20000
	}
	reg := prometheus.NewRegistry()
	mon, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, mon: mon, token: s.token, running: make(chan struct{}), client: &http.Client{}}
	var once sync.Once
	opts := []actors.Option{
		actors.WithStore(snapshots.NewMem()),
		actors.WithCheckpointInterval(s.interval),
		actors.WithListener(mon.Listener()),
		actors.WithListener(func(ev actors.Event) {
			if ev.Kind == actors.EventRunning {
				once.Do(func() { close(e.running) })
			}
		}),
	}
	ctx := context.Background()
	e.job, err = actors.Start(ctx, graph(s), opts...)
	if err != nil {
		t.Fatal(err)
	}
	mon.Attach(e.job)
	t.Cleanup(func() {
		if err := e.job.Stop(); err != nil && !errors.Is(err, actors.ErrStopped) {
			t.Errorf("stopping the job: %v", err)
		}
	})
	var ctl web.Controller
	if !s.readOnly {
		ctl = e.job
	}
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	e.srv, err = web.Start(ctx, web.Config{Token: s.token, Gatherer: reg, Logger: logger}, mon, ctl)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.srv.Close(); err != nil {
			t.Errorf("closing the server: %v", err)
		}
		e.client.CloseIdleConnections()
	})
	return e
}

// graph is numbers (2 tasks) -> square (2) -> keyBy -> sum (2, keyed) -> sink (1).
func graph(s setup) *topology.Graph {
	g := topology.New("webtest")
	rate := s.rate
	nums := topology.FromSource(g, "numbers", func(subtask, parallelism int) topology.Source[int64] {
		return testsrc.NewRated(func(i int64) int64 { return i }, math.MaxInt64, int64(subtask), int64(parallelism), rate/float64(parallelism))
	}, topology.Parallelism(2))
	var failed atomic.Bool
	sq := topology.Map(nums, "square", func(i int64) int64 {
		if s.failAt > 0 && i == s.failAt && failed.CompareAndSwap(false, true) {
			panic("webtest: the injected failure of square")
		}
		return i % 1000 * (i % 1000)
	}, topology.Parallelism(2))
	sums := topology.Process(topology.KeyBy(sq, func(v int64) int64 { return v % 16 }), "sum",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			total := topology.Value[int64](ks, "total")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				c, _ := total.Get()
				total.Set(c + v)
				out.Emit(c + v)
				return nil
			}
		}, topology.Parallelism(2))
	topology.Sink(sums, "sink", slowSink(s.sinkRate))
	return g
}

// slowSink writes at most rate records/s (unbounded when rate is 0), as a
// sink to a slow system would: it blocks when it is ahead.
func slowSink(rate float64) func(int64) error {
	if rate <= 0 {
		return func(int64) error { return nil }
	}
	var start time.Time
	var n float64
	return func(int64) error {
		if start.IsZero() {
			start = time.Now()
		}
		n++
		if ahead := time.Duration(n/rate*float64(time.Second)) - time.Since(start); ahead > 0 {
			time.Sleep(ahead) // the slow system's latency, not a test's synchronisation
		}
		return nil
	}
}

// waitRunning waits for the job's first EventRunning.
func (e *env) waitRunning(ctx context.Context) {
	e.t.Helper()
	select {
	case <-e.running:
	case <-ctx.Done():
		e.t.Fatalf("the job did not run: %v", ctx.Err())
	}
}

// request is one HTTP request to the server.
type request struct {
	method, path string
	body         string
	header       map[string]string
	host         string // the Host header ("": the server's address)
	noToken      bool   // send no Authorization header even if the env has a token
}

// do sends r and returns the status and body.
func (e *env) do(ctx context.Context, r request) (int, http.Header, []byte) {
	e.t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, e.srv.URL()+r.path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if e.token != "" && !r.noToken {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	if r.host != "" {
		req.Host = r.host
	}
	for k, v := range r.header {
		req.Header.Set(k, v)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("%s %s: reading the body: %v", r.method, r.path, err)
	}
	return res.StatusCode, res.Header, b
}

// get GETs path, wants 200 and decodes the JSON body into v.
func (e *env) get(ctx context.Context, path string, v any) {
	e.t.Helper()
	code, _, b := e.do(ctx, request{method: http.MethodGet, path: path})
	if code != http.StatusOK {
		e.t.Fatalf("GET %s: %d %s", path, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		e.t.Fatalf("GET %s: %v in %s", path, err, b)
	}
}

// wantError checks an error answer: the status and a JSON {"error": ...}
// that mentions every one of words.
func wantError(t *testing.T, what string, code int, hdr http.Header, b []byte, want int, words ...string) {
	t.Helper()
	if code != want {
		t.Errorf("%s: status %d, want %d (%s)", what, code, want, b)
		return
	}
	if ct := hdr.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("%s: Content-Type %q, want JSON", what, ct)
	}
	var er web.ErrorResponse
	if err := json.Unmarshal(b, &er); err != nil || er.Error == "" {
		t.Errorf("%s: body %q is not a JSON error (%v)", what, b, err)
		return
	}
	for _, w := range words {
		if !strings.Contains(er.Error, w) {
			t.Errorf("%s: error %q does not mention %q", what, er.Error, w)
		}
	}
}

// stream is an open /api/v1/events.
type stream struct {
	res   *http.Response
	lines *bufio.Scanner
}

// events opens the event stream (with the token as ?token= when query is
// set, else as a header) and returns once the server says it is
// subscribed: every update from then on reaches it.
func (e *env) events(ctx context.Context, query bool) *stream {
	e.t.Helper()
	url := e.srv.URL() + "/api/v1/events"
	if query && e.token != "" {
		url += "?token=" + e.token
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	if !query && e.token != "" {
		req.Header.Set("Authorization", "Bearer "+e.token)
	}
	res, err := e.client.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		b, _ := io.ReadAll(res.Body)
		e.t.Fatalf("GET /api/v1/events: %d %q %s", res.StatusCode, res.Header.Get("Content-Type"), b)
	}
	s := &stream{res: res, lines: bufio.NewScanner(res.Body)}
	s.lines.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for s.lines.Scan() {
		if s.lines.Text() == ": subscribed" {
			return s
		}
	}
	e.t.Fatalf("the event stream ended before it said subscribed: %v", s.lines.Err())
	return nil
}

// next returns the next update, or false when the stream ends.
func (s *stream) next(t *testing.T) (monitor.Update, bool) {
	t.Helper()
	for s.lines.Scan() {
		data, ok := strings.CutPrefix(s.lines.Text(), "data: ")
		if !ok {
			continue
		}
		var u monitor.Update
		if err := json.Unmarshal([]byte(data), &u); err != nil {
			t.Fatalf("an event that is not an update: %q: %v", data, err)
		}
		return u, true
	}
	return monitor.Update{}, false
}

// waitCheckpoint reads updates until checkpoint id is completed.
func (s *stream) waitCheckpoint(t *testing.T, id uint64) monitor.Checkpoint {
	t.Helper()
	for {
		u, ok := s.next(t)
		if !ok {
			t.Fatalf("the event stream ended before checkpoint %d completed", id)
		}
		if u.Kind == monitor.UpdateCheckpoint && u.Checkpoint != nil && u.Checkpoint.ID == id && u.Checkpoint.Status == monitor.StatusCompleted {
			return *u.Checkpoint
		}
	}
}
