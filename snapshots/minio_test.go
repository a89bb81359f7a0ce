package snapshots_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
)

// TestMinIO runs the conformance suite against a real MinIO server: once
// with every store under a fresh prefix of one bucket, once with every
// store at the root of a fresh bucket.
func TestMinIO(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	var seq atomic.Int64
	t.Run("prefix", func(t *testing.T) {
		snapshotstest.Run(t, func(t *testing.T) snapshots.Store {
			return srv.Store(t, "conformance", fmt.Sprintf("runs/%d", seq.Add(1)))
		})
	})
	t.Run("bucket root", func(t *testing.T) {
		snapshotstest.Run(t, func(t *testing.T) snapshots.Store {
			return srv.Store(t, fmt.Sprintf("root-%d", seq.Add(1)), "")
		})
	})
}

func TestMinIOString(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	for _, tc := range []struct{ prefix, want string }{
		{"a/b", "s3://str/a/b?endpoint=" + srv.Endpoint() + "&secure=false"},
		{"/a/b/", "s3://str/a/b?endpoint=" + srv.Endpoint() + "&secure=false"},
		{"", "s3://str?endpoint=" + srv.Endpoint() + "&secure=false"},
	} {
		s := srv.Store(t, "str", tc.prefix)
		if s.String() != tc.want {
			t.Errorf("prefix %q: String = %s, want %s", tc.prefix, s, tc.want)
		}
		noSecret(t, s.String(), srv.SecretKey())
	}
}

// TestMinIOPrefixIsolation checks that a store sees only its own prefix,
// not a sibling whose name starts the same.
func TestMinIOPrefixIsolation(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	ctx := t.Context()
	a, ab := srv.Store(t, "iso", "a"), srv.Store(t, "iso", "ab")
	root := srv.Store(t, "iso", "")
	for _, s := range []snapshots.Store{a, ab} {
		if err := s.Put(ctx, "k", []byte(s.String())); err != nil {
			t.Fatal(err)
		}
	}
	if keys, err := a.List(ctx, ""); err != nil || strings.Join(keys, ",") != "k" {
		t.Errorf("List of prefix a = %q, %v; want [k]", keys, err)
	}
	if keys, err := root.List(ctx, ""); err != nil || strings.Join(keys, ",") != "a/k,ab/k" {
		t.Errorf("List of the bucket root = %q, %v; want [a/k ab/k]", keys, err)
	}
}

// noSecret fails the test when text contains any of the secrets.
func noSecret(t *testing.T, text string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if s != "" && strings.Contains(text, s) {
			t.Errorf("%q contains a secret", text)
		}
	}
}

// closedAddr returns a loopback address where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

func TestNewMinIOErrors(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	wrong := "wrong-secret-" + srv.SecretKey()[:6]
	for _, tc := range []struct {
		name string
		cfg  func() snapshots.MinIOConfig
		want error
		says []string
	}{
		{"unreachable", func() snapshots.MinIOConfig {
			c := srv.Config("bkt", "p")
			c.Endpoint, c.MaxRetries = closedAddr(t), 1
			return c
		}, snapshots.ErrUnreachable, []string{"unreachable", "connection refused"}},
		{"unknown host", func() snapshots.MinIOConfig {
			c := srv.Config("bkt", "p")
			c.Endpoint, c.MaxRetries = "no-such-host.invalid:9000", 1
			return c
		}, snapshots.ErrUnreachable, []string{"unreachable", "no-such-host.invalid"}},
		{"wrong secret", func() snapshots.MinIOConfig {
			c := srv.Config("bkt", "p")
			c.SecretKey = wrong
			return c
		}, snapshots.ErrAccessDenied, []string{"SignatureDoesNotMatch", "AWS_ACCESS_KEY_ID"}},
		{"unknown access key", func() snapshots.MinIOConfig {
			c := srv.Config("bkt", "p")
			c.AccessKey = "nobody"
			return c
		}, snapshots.ErrAccessDenied, []string{"InvalidAccessKeyId", "credentials"}},
		{"missing bucket", func() snapshots.MinIOConfig {
			c := srv.Config("missing", "p")
			c.CreateBucket = false
			return c
		}, snapshots.ErrNoBucket, []string{`bucket "missing" does not exist`, "create=true"}},
		{"https to plain http", func() snapshots.MinIOConfig {
			c := srv.Config("bkt", "p")
			c.Secure = true
			return c
		}, nil, []string{"TLS", "secure=false"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := snapshots.NewMinIO(t.Context(), tc.cfg())
			if err == nil {
				t.Fatalf("NewMinIO = %s, want an error", s)
			}
			t.Log(err)
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			noSecret(t, err.Error(), srv.SecretKey(), wrong)
		})
	}
}

func TestNewMinIOCreatesBucket(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	cfg := srv.Config("made", "p")
	s, err := snapshots.NewMinIO(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	}()
	if ok, err := srv.Client(t).BucketExists(t.Context(), "made"); !ok || err != nil {
		t.Errorf("bucket made: exists %v, %v", ok, err)
	}
	// A second store finds it, with or without CreateBucket.
	cfg.CreateBucket = false
	s2, err := snapshots.NewMinIO(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s2.Close(); err != nil {
		t.Error(err)
	}
}

func TestNewMinIOConfigErrors(t *testing.T) {
	base := snapshots.MinIOConfig{Endpoint: "127.0.0.1:9", Bucket: "bkt", AccessKey: "k", SecretKey: "topsecret"}
	for name, tc := range map[string]struct {
		edit func(*snapshots.MinIOConfig)
		says string
	}{
		"no endpoint":      {func(c *snapshots.MinIOConfig) { c.Endpoint = "" }, "no endpoint"},
		"scheme":           {func(c *snapshots.MinIOConfig) { c.Endpoint = "http://h:1" }, "without a scheme"},
		"path":             {func(c *snapshots.MinIOConfig) { c.Endpoint = "h:1/x" }, "without a path"},
		"no bucket":        {func(c *snapshots.MinIOConfig) { c.Bucket = "" }, "bucket"},
		"bad bucket":       {func(c *snapshots.MinIOConfig) { c.Bucket = "Bad_Bucket" }, "bucket"},
		"bad prefix":       {func(c *snapshots.MinIOConfig) { c.Prefix = "a//b" }, "prefix"},
		"dot prefix":       {func(c *snapshots.MinIOConfig) { c.Prefix = "../x" }, "prefix"},
		"secret only":      {func(c *snapshots.MinIOConfig) { c.AccessKey = "" }, "both"},
		"CA on plain HTTP": {func(c *snapshots.MinIOConfig) { c.CAFile = "/etc/hostname" }, "secure=true"},
		"CA missing": {func(c *snapshots.MinIOConfig) {
			c.Secure, c.CAFile = true, "/no/such/ca.pem"
		}, "CA file"},
		"CA not PEM": {func(c *snapshots.MinIOConfig) {
			c.Secure, c.CAFile = true, "/etc/hostname"
		}, "no PEM certificate"},
	} {
		cfg := base
		tc.edit(&cfg)
		s, err := snapshots.NewMinIO(t.Context(), cfg)
		switch {
		case err == nil:
			t.Errorf("%s: NewMinIO = %s, want an error", name, s)
		case !strings.Contains(err.Error(), tc.says):
			t.Errorf("%s: error %q does not say %q", name, err, tc.says)
		default:
			noSecret(t, err.Error(), "topsecret")
		}
	}
}

// TestNewMinIONoCredentials clears every variable of the credential chain.
func TestNewMinIONoCredentials(t *testing.T) {
	for _, v := range []string{
		"AWS_ACCESS_KEY_ID", "AWS_ACCESS_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_SECRET_KEY", "AWS_SESSION_TOKEN",
		"MINIO_ROOT_USER", "MINIO_ROOT_PASSWORD", "MINIO_ACCESS_KEY", "MINIO_SECRET_KEY",
	} {
		t.Setenv(v, "")
	}
	_, err := snapshots.NewMinIO(t.Context(), snapshots.MinIOConfig{Endpoint: "127.0.0.1:9", Bucket: "bkt"})
	if err == nil || !strings.Contains(err.Error(), "no credentials") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("NewMinIO without credentials: %v, want a no-credentials error naming the variables", err)
	}
}

func TestMinIOTLS(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t, miniotest.WithTLS())
	s := srv.Store(t, "tls", "p") // trusts srv.CAFile()
	if err := s.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	cfg := srv.Config("tls", "p")
	cfg.CAFile = ""
	_, err := snapshots.NewMinIO(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "TLS") || !strings.Contains(err.Error(), "ca=") {
		t.Errorf("NewMinIO without the CA: %v, want a TLS error that suggests ca=", err)
	}
	cfg.Secure = false
	_, err = snapshots.NewMinIO(t.Context(), cfg)
	if err == nil || !strings.Contains(err.Error(), "HTTPS") {
		t.Errorf("NewMinIO over HTTP to an HTTPS server: %v, want an error saying it speaks HTTPS", err)
	}
	if err != nil {
		noSecret(t, err.Error(), srv.SecretKey())
	}
}

// objectKey is the object name of a store key under prefix p.
func objectKey(key string) string { return "p/" + key }

func TestMinIOGetErrors(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	s := srv.Store(t, "get", "p")
	if _, err := srv.Client(t).PutObject(t.Context(), "get", objectKey("x"), strings.NewReader("x"), 1,
		minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if data, err := s.Get(t.Context(), "x"); err != nil || string(data) != "x" {
		t.Errorf("Get of an object written by another client = %q, %v", data, err)
	}
}

// TestMinIOSilentEndpoint: an endpoint that accepts connections but never
// answers fails Check within its per-attempt bound, as unreachable.
func TestMinIOSilentEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	// Each attempt is bounded (5s), so NewMinIO gives up: without that bound
	// it would wait on the silent connection until the test's timeout.
	_, err = snapshots.NewMinIO(context.Background(), snapshots.MinIOConfig{
		Endpoint: ln.Addr().String(), Bucket: "silent", AccessKey: "k", SecretKey: "secret-never-shown", MaxRetries: -1,
	})
	if !errors.Is(err, snapshots.ErrUnreachable) || strings.Contains(err.Error(), "secret-never-shown") {
		t.Fatalf("NewMinIO against a silent endpoint: %v", err)
	}
}
