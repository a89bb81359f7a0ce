package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
)

// seed is SNAPFLOW_SEED, or the clock's; logged so that a failure can be
// replayed.
func seed(t *testing.T) uint64 {
	t.Helper()
	s := uint64(time.Now().UnixNano())
	if v := os.Getenv("SNAPFLOW_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SNAPFLOW_SEED: %v", err)
		}
		s = n
	}
	t.Logf("seed %d (replay with SNAPFLOW_SEED=%d)", s, s)
	return s
}

// TestRandomRequestsLeaveTheJobRunning throws random methods, paths,
// queries, headers and bodies at the server, through an HTTP client and
// as raw bytes on TCP. No answer is a 500, every error the server writes is
// JSON, and the job and the server keep working. (Only a savepoint with
// "stop": true may stop the job; the bodies never ask for it.)
func TestRandomRequestsLeaveTheJobRunning(t *testing.T) {
	const token = "fuzz-token"
	e := start(t, setup{token: token})
	ctx := testContext(t)
	e.waitRunning(ctx)
	rng := rand.New(rand.NewPCG(seed(t), 12))

	statuses := map[int]int{}
	for i := range 400 {
		method, target, body, hdr := randomRequest(rng, token)
		req, err := http.NewRequestWithContext(ctx, method, e.srv.URL()+target, strings.NewReader(body))
		if err != nil {
			continue // not a URL the client can send; the raw part below covers those
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := e.client.Do(req)
		if err != nil {
			t.Fatalf("request %d %s %q (body %d bytes %.40q, headers %v): %v", i, method, target, len(body), body, hdr, err)
		}
		statuses[res.StatusCode]++
		if res.Header.Get("Content-Type") == "text/event-stream" {
			res.Body.Close() // the stream never ends by itself
			continue
		}
		b, err := io.ReadAll(io.LimitReader(res.Body, 4<<20))
		res.Body.Close()
		if err != nil {
			t.Fatalf("request %d %s %q: reading: %v", i, method, target, err)
		}
		control := method == http.MethodPost && (strings.HasPrefix(target, "/api/v1/checkpoints") || strings.HasPrefix(target, "/api/v1/savepoints"))
		switch {
		case res.StatusCode >= 500 && !(control && res.StatusCode == http.StatusServiceUnavailable):
			t.Errorf("request %d %s %q (body %.80q): %d %s", i, method, target, body, res.StatusCode, b)
		case res.StatusCode >= 400 && method != http.MethodHead:
			var er web.ErrorResponse
			if err := json.Unmarshal(b, &er); err != nil || er.Error == "" {
				t.Errorf("request %d %s %q: %d with a body that is not a JSON error: %.200q", i, method, target, res.StatusCode, b)
			}
		}
	}
	t.Logf("statuses: %v", statuses)

	for i := range 60 {
		raw := randomRaw(rng)
		if err := sendRaw(ctx, e.srv.Addr(), raw); err != nil {
			t.Fatalf("raw request %d %.120q: %v", i, raw, err)
		}
	}

	select {
	case <-e.job.Done():
		t.Fatalf("the job ended: %v", e.job.Wait())
	default:
	}
	code, _, b := e.do(ctx, request{method: http.MethodPost, path: "/api/v1/checkpoints"})
	if code != http.StatusOK {
		t.Fatalf("a checkpoint after the random requests: %d %s", code, b)
	}
	var job monitor.JobStatus
	e.get(ctx, "/api/v1/job", &job)
	if job.State != monitor.StateRunning {
		t.Errorf("the job is %s after the random requests", job.State)
	}
}

var (
	fuzzMethods  = []string{"GET", "GET", "GET", "HEAD", "POST", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "BREW"}
	fuzzSegments = []string{"", "api", "v1", "v2", "job", "checkpoints", "savepoints", "timeline", "events", "metrics",
		"..", ".", "%2e%2e", "%2F", "%00", "1", "0", "-1", "18446744073709551615", "18446744073709551616", "1e3", "0x10",
		"%F0%9F%98%80", "index.html", "app.js", "favicon.ico", strings.Repeat("a", 300)}
	fuzzQueries = []string{"", "limit=", "limit=1", "limit=0", "limit=-5", "limit=999999999999999999999", "limit=1&limit=2",
		"limit=%00", "token=fuzz-token", "token=", "token=x&token=y", "%zz", "a=b;c=d", "limit=3&x=" + strings.Repeat("y", 2000)}
	fuzzBodies = []string{"", "{}", "[]", "null", "0", `"x"`, "{", "}", `{"name":""}`, `{"name":"fuzz"}`, `{"name":"a/b"}`,
		`{"name":".."}`, `{"name":"_tmp"}`, `{"name":"ok-1","extra":1}`, `{"name":1}`, `{"name":"x"}{"name":"y"}`,
		`{"stop":false}`, `{"name":"\u0000"}`, `{"name":"` + strings.Repeat("n", 300) + `"}`,
		strings.Repeat("[", 10000), strings.Repeat("x", 70<<10), "\xff\xfe\xfd"}
)

// randomRequest picks a method, a target (path and query), a body and
// headers; the token is right, wrong or missing.
func randomRequest(rng *rand.Rand, token string) (string, string, string, map[string]string) {
	method := fuzzMethods[rng.IntN(len(fuzzMethods))]
	var path strings.Builder
	for range rng.IntN(5) + 1 {
		path.WriteString("/" + fuzzSegments[rng.IntN(len(fuzzSegments))])
	}
	if rng.IntN(2) == 0 { // mostly real routes, so that the handlers see the junk
		path.Reset()
		path.WriteString([]string{"/", "/metrics", "/api/v1/job", "/api/v1/checkpoints", "/api/v1/timeline",
			"/api/v1/events", "/api/v1/savepoints", "/api/v1/checkpoints/" + fuzzSegments[rng.IntN(len(fuzzSegments))]}[rng.IntN(8)])
	}
	if q := fuzzQueries[rng.IntN(len(fuzzQueries))]; q != "" {
		path.WriteString("?" + q)
	}
	body := fuzzBodies[rng.IntN(len(fuzzBodies))]
	if rng.IntN(4) == 0 {
		b := make([]byte, rng.IntN(512))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		body = string(b)
	}
	hdr := map[string]string{}
	switch rng.IntN(4) {
	case 0:
	case 1:
		hdr["Authorization"] = "Bearer wrong"
	default:
		hdr["Authorization"] = "Bearer " + token
	}
	switch rng.IntN(5) {
	case 0:
		hdr["Content-Type"] = "application/json"
	case 1:
		hdr["Content-Type"] = "text/plain"
	case 2:
		hdr["Content-Type"] = "application/json; charset=utf-8; x"
	case 3:
		hdr["Content-Type"] = ";;;"
	}
	if rng.IntN(8) == 0 {
		hdr["Origin"] = "http://evil.example"
		hdr["Sec-Fetch-Site"] = "cross-site"
	}
	return method, path.String(), body, hdr
}

// randomRaw is a request line, headers and body as bytes, often malformed.
func randomRaw(rng *rand.Rand) string {
	lines := []string{
		"GET /api/v1/job HTTP/1.1", "GET /../../../etc/passwd HTTP/1.1", "POST /api/v1/checkpoints HTTP/1.0",
		"GET /api/v1/checkpoints/%ff%fe HTTP/1.1", "GET  HTTP/1.1", "HELLO", "GET / HTTP/9.9", "\x00\x01\x02",
		"GET /" + strings.Repeat("x", 70<<10) + " HTTP/1.1", "POST /api/v1/savepoints HTTP/1.1",
	}
	headers := []string{
		"Host: 127.0.0.1", "Authorization: Bearer fuzz-token", "Content-Length: 5", "Content-Length: -1",
		"Content-Length: 99999999999999999999", "Transfer-Encoding: chunked", "Transfer-Encoding: gzip, chunked",
		"X-" + strings.Repeat("h", 70<<10) + ": 1", "Bad Header", "Content-Type: application/json",
	}
	var b strings.Builder
	b.WriteString(lines[rng.IntN(len(lines))] + "\r\n")
	for range rng.IntN(4) {
		b.WriteString(headers[rng.IntN(len(headers))] + "\r\n")
	}
	b.WriteString("Connection: close\r\n\r\n")
	b.WriteString([]string{"", "{}", "0\r\n\r\n", "zzzzz", "5\r\nhello\r\n0\r\n\r\n"}[rng.IntN(5)])
	return b.String()
}

// sendRaw writes raw to the server, closes its side, and reads until the
// first line of an answer or the server's close: either shows that the
// server handled it rather than hung.
func sendRaw(ctx context.Context, addr, raw string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	go func() {
		// The server may close before it has read everything: errors are expected.
		_, _ = io.WriteString(conn, raw)
		_ = conn.(*net.TCPConn).CloseWrite()
	}()
	_, _ = bufio.NewReader(conn).ReadString('\n')
	if ctx.Err() != nil {
		return fmt.Errorf("no answer and no close: %w", ctx.Err())
	}
	return nil
}
