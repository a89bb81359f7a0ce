package miniotest

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/snapflow/snapflow/snapshots"
)

// Endpoint returns the server's API address, 127.0.0.1:PORT.
func (s *Server) Endpoint() string { return s.addr }

// AccessKey returns the root user.
func (s *Server) AccessKey() string { return s.user }

// SecretKey returns the root password.
func (s *Server) SecretKey() string { return s.password }

// Secure reports whether the server speaks HTTPS (WithTLS).
func (s *Server) Secure() bool { return s.caFile != "" }

// CAFile returns the PEM file of the server's self-signed certificate, or
// "" without TLS.
func (s *Server) CAFile() string { return s.caFile }

// Env returns AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the server,
// as KEY=VALUE, to append to a child process's environment.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.user, "AWS_SECRET_ACCESS_KEY=" + s.password}
}

// URL returns the store URL of bucket and prefix on the server,
// s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false (with ca= instead
// of secure=false under TLS). It holds no credentials: see Env.
func (s *Server) URL(bucket, prefix string) string {
	u := "s3://" + bucket
	if prefix != "" {
		u += "/" + prefix
	}
	u += "?endpoint=" + s.addr
	if s.Secure() {
		return u + "&ca=" + url.QueryEscape(s.caFile)
	}
	return u + "&secure=false"
}

// Config returns a store configuration for bucket and prefix on the
// server, with the root credentials as static keys and CreateBucket set.
func (s *Server) Config(bucket, prefix string) snapshots.MinIOConfig {
	return snapshots.MinIOConfig{
		Endpoint:     s.addr,
		Bucket:       bucket,
		Prefix:       prefix,
		Secure:       s.Secure(),
		CAFile:       s.caFile,
		AccessKey:    s.user,
		SecretKey:    s.password,
		CreateBucket: true,
	}
}

// Store opens the store of Config(bucket, prefix), creating the bucket if
// needed, and closes it when the test ends.
func (s *Server) Store(t testing.TB, bucket, prefix string) *snapshots.MinIO {
	t.Helper()
	st, err := snapshots.NewMinIO(t.Context(), s.Config(bucket, prefix))
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("miniotest: close %s: %v", st, err)
		}
	})
	return st
}

// Client returns a minio-go client with the root credentials, for
// tests that reach past a store, and releases its connections when the
// test ends.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	tr, err := s.transport()
	if err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	t.Cleanup(tr.CloseIdleConnections)
	c, err := minio.New(s.addr, &minio.Options{
		Creds:     credentials.NewStaticV4(s.user, s.password, ""),
		Secure:    s.Secure(),
		Transport: tr,
	})
	if err != nil {
		t.Fatalf("miniotest: client: %v", err)
	}
	return c
}

// MakeBucket creates a bucket.
func (s *Server) MakeBucket(t testing.TB, name string) {
	t.Helper()
	if err := s.Client(t).MakeBucket(t.Context(), name, minio.MakeBucketOptions{}); err != nil {
		t.Fatalf("miniotest: make bucket %s: %v", name, err)
	}
}

// String describes the server for logs; it holds no secret.
func (s *Server) String() string { return fmt.Sprintf("minio %s (data %s)", s.addr, s.dataDir) }
