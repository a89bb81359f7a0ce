package snapshots_test

import (
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// errLoseResponse makes lossyProxy drop a response.
var errLoseResponse = errors.New("response lost")

// lossyProxy forwards requests to a MinIO server and loses the responses to
// manifest PUTs after the server has stored the object, as a network that
// fails at the wrong moment would; with failGets it also loses the
// responses to manifest GETs.
type lossyProxy struct {
	lostPuts atomic.Int64
	failGets atomic.Bool
}

func (p *lossyProxy) start(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse("http://" + target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host // the client signed the proxy's host
		},
		ModifyResponse: func(resp *http.Response) error {
			req := resp.Request
			if !strings.HasSuffix(req.URL.Path, "/_manifest") {
				return nil
			}
			switch {
			case req.Method == http.MethodPut && resp.StatusCode == http.StatusOK:
				p.lostPuts.Add(1)
				return errLoseResponse
			case req.Method == http.MethodGet && p.failGets.Load():
				return errLoseResponse
			}
			return nil
		},
		ErrorHandler: func(http.ResponseWriter, *http.Request, error) {
			panic(http.ErrAbortHandler) // close the connection without an answer
		},
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestMinIOManifestResponseLost writes manifests through a proxy that loses
// the PUT's response after MinIO has stored the object. PutManifest must
// find the manifest in place and report the checkpoint complete, and,
// when reading back fails too, report it in doubt.
func TestMinIOManifestResponseLost(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	srv.Store(t, "doubt", "") // creates the bucket
	var proxy lossyProxy
	cfg := srv.Config("doubt", "p")
	cfg.Endpoint = proxy.start(t, srv.Endpoint())
	cfg.MaxRetries, cfg.RetryBackoff = 1, time.Millisecond
	s, err := snapshots.NewMinIO(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var logs bufLog
	c := snapshots.NewCheckpoints(s, "job", slog.New(slog.NewTextHandler(&logs, nil)))
	put := func(id uint64) error {
		h, err := c.PutTaskState(t.Context(), id, &messages.TaskState{Job: "job", TaskId: "a#0", CheckpointId: id})
		if err != nil {
			t.Fatal(err)
		}
		return c.PutManifest(t.Context(), &messages.Manifest{Job: "job", CheckpointId: id,
			Tasks: []*messages.TaskStateEntry{{TaskId: "a#0", State: h}}})
	}

	if err := put(1); err != nil {
		t.Fatalf("PutManifest = %v, want nil: the manifest is in place", err)
	}
	if proxy.lostPuts.Load() == 0 {
		t.Fatal("the proxy lost no PUT response")
	}
	if !strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("no warning logged:\n%s", logs.String())
	}
	r, err := snapshots.NewCheckpoints(srv.Store(t, "doubt", "p"), "job", nil).LoadLatest(t.Context())
	if err != nil || r.Manifest.GetCheckpointId() != 1 {
		t.Errorf("LoadLatest = %v, %v; want checkpoint 1", r, err)
	}

	proxy.failGets.Store(true)
	err = put(2)
	if !errors.Is(err, snapshots.ErrManifestInDoubt) {
		t.Fatalf("PutManifest with reads failing = %v, want ErrManifestInDoubt", err)
	}
	t.Log(err)
}
