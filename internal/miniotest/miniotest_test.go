package miniotest_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/internal/miniotest"
)

func TestMain(m *testing.M) { leaktest.Main(m) }

func TestStartStopRestart(t *testing.T) {
	srv := miniotest.Start(t)
	ctx := t.Context()
	if !strings.HasPrefix(srv.Endpoint(), "127.0.0.1:") {
		t.Errorf("Endpoint = %s, want loopback", srv.Endpoint())
	}
	wantLive(t, "http://"+srv.Endpoint(), true)
	c := srv.Client(t)
	srv.MakeBucket(t, "keep")
	if _, err := c.PutObject(ctx, "keep", "obj", bytes.NewReader([]byte("data")), 4, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	srv.Stop() // idempotent
	wantLive(t, "http://"+srv.Endpoint(), false)
	srv.Restart(t)
	wantLive(t, "http://"+srv.Endpoint(), true)
	obj, err := c.GetObject(ctx, "keep", "obj", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Close()
	if data, err := io.ReadAll(obj); err != nil || string(data) != "data" {
		t.Errorf("after Restart, object = %q, %v; want the data from before", data, err)
	}
}

func wantLive(t *testing.T, base string, want bool) {
	t.Helper()
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(base + "/minio/health/live")
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		if cerr := resp.Body.Close(); err == nil {
			err = cerr
		}
	}
	if got := err == nil && resp.StatusCode == http.StatusOK; got != want {
		t.Errorf("live = %v (%v), want %v", got, err, want)
	}
}

func TestServersAreIndependent(t *testing.T) {
	a, b := miniotest.Start(t), miniotest.Start(t)
	if a.Endpoint() == b.Endpoint() || a.SecretKey() == b.SecretKey() || a.AccessKey() == b.AccessKey() {
		t.Errorf("two servers share an endpoint or credentials: %s, %s", a, b)
	}
}

func TestURLAndEnv(t *testing.T) {
	srv := miniotest.Start(t)
	if got, want := srv.URL("b", "p/q"), "s3://b/p/q?endpoint="+srv.Endpoint()+"&secure=false"; got != want {
		t.Errorf("URL = %s, want %s", got, want)
	}
	if got, want := srv.URL("b", ""), "s3://b?endpoint="+srv.Endpoint()+"&secure=false"; got != want {
		t.Errorf("URL = %s, want %s", got, want)
	}
	env := strings.Join(srv.Env(), "\n")
	want := fmt.Sprintf("AWS_ACCESS_KEY_ID=%s\nAWS_SECRET_ACCESS_KEY=%s", srv.AccessKey(), srv.SecretKey())
	if env != want {
		t.Errorf("Env = %q, want %q", env, want)
	}
	if strings.Contains(srv.URL("b", "p"), srv.SecretKey()) || strings.Contains(srv.String(), srv.SecretKey()) {
		t.Error("URL or String holds the secret")
	}
}

func TestTLS(t *testing.T) {
	srv := miniotest.Start(t, miniotest.WithTLS())
	if !srv.Secure() || srv.CAFile() == "" {
		t.Fatalf("Secure = %v, CAFile = %q", srv.Secure(), srv.CAFile())
	}
	if !strings.Contains(srv.URL("b", "p"), "&ca=") {
		t.Errorf("URL %s has no ca=", srv.URL("b", "p"))
	}
	srv.MakeBucket(t, "tls") // over HTTPS, trusting CAFile
}

// recorder is a testing.TB whose Fatalf and Skipf record and stop the
// goroutine, as the real ones do.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Skipf(format string, args ...any) {
	r.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func binary(t *testing.T) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		miniotest.Binary(r)
	}()
	<-done
	return r
}

func TestBinaryMissing(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "no-minio")
	t.Setenv("MINIO_BIN", missing)
	t.Setenv("CI", "")
	if r := binary(t); r.skip == "" || r.fatal != "" || !strings.Contains(r.skip, missing) {
		t.Errorf("without CI: skip %q, fatal %q; want a skip naming %s", r.skip, r.fatal, missing)
	}
	t.Setenv("CI", "true")
	if r := binary(t); r.fatal == "" || r.skip != "" {
		t.Errorf("with CI=true: skip %q, fatal %q; want a failure", r.skip, r.fatal)
	}
}

func TestBinaryFromEnv(t *testing.T) {
	bin := miniotest.Binary(t) // skips without a binary
	t.Setenv("MINIO_BIN", bin)
	if got := miniotest.Binary(t); got != bin {
		t.Errorf("Binary with MINIO_BIN=%s = %s", bin, got)
	}
}
