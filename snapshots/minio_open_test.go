package snapshots_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

// TestOpenS3 opens MinIO stores by URL with credentials from the
// environment.
func TestOpenS3(t *testing.T) {
	srv := miniotest.Start(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	ctx := t.Context()
	missing := srv.URL("opened", "jobs")
	if s, err := snapshots.Open(ctx, missing); !errors.Is(err, snapshots.ErrNoBucket) ||
		!strings.Contains(err.Error(), "create=true") {
		t.Errorf("Open(%s) = %v, %v; want ErrNoBucket suggesting create=true", missing, s, err)
	}
	s, err := snapshots.Open(ctx, missing+"&create=true&region=us-east-1")
	if err != nil {
		t.Fatal(err)
	}
	want := "s3://opened/jobs?endpoint=" + srv.Endpoint() + "&secure=false&region=us-east-1"
	if s.String() != want {
		t.Errorf("String = %s, want %s", s, want)
	}
	if err := s.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	again, err := snapshots.Open(ctx, s.String()) // String is an URL that Open takes
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Errorf("Get through Open(String()) = %q, %v", got, err)
	}
	for _, st := range []snapshots.Store{s, again} {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret")
	if _, err := snapshots.Open(ctx, missing); !errors.Is(err, snapshots.ErrAccessDenied) {
		t.Errorf("Open with a wrong secret in the environment: %v, want ErrAccessDenied", err)
	} else {
		noSecret(t, err.Error(), "wrong-secret", srv.SecretKey())
	}
}

func TestOpenS3TLS(t *testing.T) {
	srv := miniotest.Start(t, miniotest.WithTLS())
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	s, err := snapshots.Open(t.Context(), srv.URL("tls", "p")+"&create=true")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.String(), "&ca=") || strings.Contains(s.String(), "secure=false") {
		t.Errorf("String = %s, want ca= and no secure=false", s)
	}
	again, err := snapshots.Open(t.Context(), s.String())
	if err != nil {
		t.Fatalf("Open(String()): %v", err)
	}
	for _, st := range []snapshots.Store{s, again} {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}
}
