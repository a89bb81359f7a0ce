package snapshots_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

// notS3Config returns the config of a MinIO store whose endpoint is an
// HTTP server that is not S3: it answers every request with handler.
func notS3Config(t *testing.T, handler http.HandlerFunc) snapshots.MinIOConfig {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return snapshots.MinIOConfig{
		Endpoint:  strings.TrimPrefix(srv.URL, "http://"),
		Bucket:    "bkt",
		Prefix:    "p",
		AccessKey: "user",
		SecretKey: "secret-password",
		// Any retry would only repeat the same answer.
		MaxRetries: -1,
	}
}

// TestNewMinIONotS3 points the store at HTTP servers that are not S3 and
// expects Check to say so, rather than report a missing bucket or wrong
// credentials, and never to suggest create=true when it is already set.
func TestNewMinIONotS3(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		status  string
	}{
		{"404 page", func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) }, "HTTP 404"},
		{"403 page", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "forbidden", http.StatusForbidden)
		}, "HTTP 403"},
		{"405 page", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", http.StatusMethodNotAllowed)
		}, "HTTP 405"},
		{"200 to everything", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, "<html>hello</html>")
		}, "HTTP 200"},
		{"S3 headers, but objects do not read back", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("X-Amz-Request-Id", "1")
			w.Header().Set("Last-Modified", "Mon, 02 Jan 2006 15:04:05 GMT")
			w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
			_, _ = io.WriteString(w, "<html>hello</html>")
		}, "not what was written"},
	} {
		for _, create := range []bool{false, true} {
			name := tc.name
			if create {
				name += " create=true"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				cfg := notS3Config(t, tc.handler)
				cfg.CreateBucket = create
				s, err := snapshots.NewMinIO(t.Context(), cfg)
				if err == nil {
					_ = s.Close()
					t.Fatal("NewMinIO succeeded against a server that is not S3")
				}
				t.Log(err)
				msg := err.Error()
				if !errors.Is(err, snapshots.ErrNotS3) {
					t.Errorf("error %v does not wrap ErrNotS3", err)
				}
				if errors.Is(err, snapshots.ErrNoBucket) || errors.Is(err, snapshots.ErrAccessDenied) {
					t.Errorf("error %v blames the bucket or the credentials", err)
				}
				for _, want := range []string{"endpoint " + cfg.Endpoint, tc.status, "is it an S3/MinIO server?"} {
					if !strings.Contains(msg, want) {
						t.Errorf("error %q does not say %q", msg, want)
					}
				}
				if strings.Contains(msg, "create=true") || strings.Contains(msg, "CreateBucket") {
					t.Errorf("error %q suggests creating the bucket", msg)
				}
				noSecret(t, msg, cfg.SecretKey)
			})
		}
	}
}

// TestMinIOBucketGoneWithCreate checks that a store opened with
// CreateBucket, whose bucket is deleted later, reports the missing bucket
// without suggesting create=true, which is already set.
//
// It reads (Get, List): a write is no probe here, because MinIO may
// accept an object into a bucket removed a moment before (seen twice in CI,
// once after HeadBucket had said the bucket was gone).
func TestMinIOBucketGoneWithCreate(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	s := srv.Store(t, "gone", "") // CreateBucket is set
	if err := s.Put(t.Context(), "k", []byte("x")); err != nil {
		t.Fatal(err)
	}
	client := srv.Client(t)
	if err := client.RemoveBucketWithOptions(t.Context(), "gone", minio.RemoveBucketOptions{ForceDelete: true}); err != nil {
		t.Fatal(err)
	}
	// A forced removal can return before the bucket is gone from every
	// read path of the server: wait until MinIO itself says it is gone.
	for deadline := time.Now().Add(30 * time.Second); ; {
		exists, err := client.BucketExists(t.Context(), "gone")
		if err == nil && !exists {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the bucket still exists 30s after its removal (BucketExists = %v, %v)", exists, err)
		}
		runtime.Gosched()
	}
	ops := map[string]func() error{
		"Get":  func() error { _, err := s.Get(t.Context(), "k"); return err },
		"List": func() error { _, err := s.List(t.Context(), ""); return err },
	}
	for name, op := range ops {
		err := op()
		// MinIO's listing can still answer from the removed bucket's
		// metadata for a moment after BucketExists says it is gone (seen
		// once under load: List = nil): a nil error is asked again, any
		// other answer is judged.
		for deadline := time.Now().Add(30 * time.Second); err == nil && time.Now().Before(deadline); err = op() {
			runtime.Gosched()
		}
		if !errors.Is(err, snapshots.ErrNoBucket) {
			t.Errorf("%s = %v, want ErrNoBucket", name, err)
			continue
		}
		if strings.Contains(err.Error(), "create=true") || strings.Contains(err.Error(), "CreateBucket") {
			t.Errorf("%s: error %q suggests create=true, which is set", name, err)
		}
	}
}
