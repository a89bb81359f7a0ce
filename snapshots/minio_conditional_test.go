package snapshots_test

import (
	"errors"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

// credentialRegion finds the region in a SigV4 Authorization header.
var credentialRegion = regexp.MustCompile(`Credential=[^/]+/[0-9]+/([^/]+)/s3/aws4_request`)

// conditionStripper is an S3 endpoint that ignores conditional writes, as
// an S3-compatible server without them would: a reverse proxy in front of
// srv that drops If-None-Match and If-Match from every request and signs
// what it changed again with srv's credentials.
func conditionStripper(t *testing.T, srv *miniotest.Server) (endpoint string, stripped *atomic.Int64) {
	t.Helper()
	target := &url.URL{Scheme: "http", Host: srv.Endpoint()}
	stripped = new(atomic.Int64)
	proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
		pr.SetURL(target)
		pr.Out.Host = pr.In.Host // the client signed the proxy's host
		if pr.Out.Header.Get("If-None-Match") == "" && pr.Out.Header.Get("If-Match") == "" {
			return
		}
		stripped.Add(1)
		pr.Out.Header.Del("If-None-Match")
		pr.Out.Header.Del("If-Match")
		region := "us-east-1"
		if m := credentialRegion.FindStringSubmatch(pr.Out.Header.Get("Authorization")); m != nil {
			region = m[1]
		}
		pr.Out.Header.Del("Authorization")
		*pr.Out = *signer.SignV4(*pr.Out, srv.AccessKey(), srv.SecretKey(), "", region)
	}}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	return strings.TrimPrefix(ps.URL, "http://"), stripped
}

// TestOpenRefusesIgnoredConditionalWrites: a store whose endpoint ignores
// If-None-Match (a proxy in front of MinIO strips it) is refused when it
// opens, with an error wrapping ErrNoConditionalWrites that names the
// endpoint and the requirement; the same server without the proxy opens,
// and the proxy passes every other request (a store that ignores the
// conditions would have opened).
func TestOpenRefusesIgnoredConditionalWrites(t *testing.T) {
	srv := miniotest.Start(t)
	if srv.Secure() {
		t.Skip("the proxy speaks plain HTTP")
	}
	srv.Store(t, "cond", "direct") // no proxy: it opens

	endpoint, stripped := conditionStripper(t, srv)
	cfg := srv.Config("cond", "proxied")
	cfg.Endpoint = endpoint
	s, err := snapshots.NewMinIO(t.Context(), cfg)
	if err == nil {
		_ = s.Close()
		t.Fatalf("NewMinIO through an endpoint that ignores If-None-Match succeeded (%d requests stripped)", stripped.Load())
	}
	t.Logf("refusal: %v", err)
	if !errors.Is(err, snapshots.ErrNoConditionalWrites) {
		t.Fatalf("NewMinIO: %v, want ErrNoConditionalWrites", err)
	}
	for _, want := range []string{endpoint, "If-None-Match: *", "RELEASE.2024-05-07"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not name %q: %v", want, err)
		}
	}
	if stripped.Load() == 0 {
		t.Error("the proxy stripped no condition")
	}
	// The probe left nothing behind.
	keys, err := srv.Store(t, "cond", "").List(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("objects left in the bucket: %q", keys)
	}

	// Open by URL is refused the same way.
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	u := strings.Replace(srv.URL("cond", "url"), srv.Endpoint(), endpoint, 1)
	if s, err := snapshots.Open(t.Context(), u); !errors.Is(err, snapshots.ErrNoConditionalWrites) {
		if s != nil {
			_ = s.Close()
		}
		t.Errorf("Open(%s): %v, want ErrNoConditionalWrites", u, err)
	}
}
