package snapshots_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // "" and relative paths resolve here
	for _, tc := range []struct {
		url  string
		want string // String() of the store, or the start of the error
		err  bool
	}{
		{"", "dir:" + filepath.Join(dir, snapshots.DefaultDir), false},
		{"rel/path", "dir:" + filepath.Join(dir, "rel", "path"), false},
		{"./dot", "dir:" + filepath.Join(dir, "dot"), false},
		{dir + "/abs", "dir:" + dir + "/abs", false},
		{"file://" + dir + "/url", "dir:" + dir + "/url", false},
		{"file://localhost" + dir + "/local", "dir:" + dir + "/local", false},
		{"FILE://" + dir + "/upper", "dir:" + dir + "/upper", false},
		{"mem://", "mem://", false},
		{"mem://jobs", "mem://jobs", false},
		{"s3://bucket/prefix", `snapshots: store URL "s3://bucket/prefix": endpoint= is required, e.g. s3://bucket/PREFIX?endpoint=127.0.0.1:9000&secure=false`, true},
		{"s3://bucket/p?endpoint=h:1&secret=hunter22", `snapshots: store URL "s3://bucket/p": parameter "secret": credentials may not appear in a store URL: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or MINIO_ACCESS_KEY and MINIO_SECRET_KEY) in the environment`, true},
		{"s3://bucket/p?endpoint=h:1&access_key=AKIA", `snapshots: store URL "s3://bucket/p": parameter "access_key": credentials may not appear`, true},
		{"s3://bucket/p?endpoint=h:1&AWS_SECRET_ACCESS_KEY=x", `snapshots: store URL "s3://bucket/p": parameter "AWS_SECRET_ACCESS_KEY": credentials may not appear`, true},
		{"s3://AKIA:hunter22@bucket/p?endpoint=h:1", `snapshots: store URL "s3://bucket/p": credentials may not appear in a store URL`, true},
		{"s3://bucket/p?endpoint=h:1&colour=red", `snapshots: store URL "s3://bucket/p": unknown parameter "colour" (want endpoint, secure, region, create or ca)`, true},
		{"s3://bucket/p?endpoint=h:1&secure=maybe", `snapshots: store URL "s3://bucket/p": secure="maybe": want true or false`, true},
		{"s3://bucket/p?endpoint=h:1&create=yes", `snapshots: store URL "s3://bucket/p": create="yes": want true or false`, true},
		{"s3://bucket/p?endpoint=h:1&endpoint=h:2", `snapshots: store URL "s3://bucket/p": parameter "endpoint" given 2 times`, true},
		{"s3:///p?endpoint=h:1", `snapshots: store URL "s3:///p": no bucket`, true},
		{"s3://host:9000/bucket", `snapshots: store URL "s3://host:9000/bucket": bucket "host:9000" has a port`, true},
		{"s3://bucket/p?endpoint=h:1#frag", `snapshots: store URL "s3://bucket/p": a fragment (#) is not allowed`, true},
		{"s3://bucket/p?endpoint=http://h:1", `snapshots: minio s3://bucket/p?endpoint=http://h:1: endpoint "http://h:1": want HOST:PORT without a scheme`, true},
		{"s3://bucket/a//b?endpoint=h:1", `snapshots: minio s3://bucket/a//b?endpoint=h:1: prefix:`, true},
		{"s3://bucket/p?endpoint=h:1&secure=false&ca=/x.pem", `snapshots: minio s3://bucket/p?endpoint=h:1&secure=false&ca=/x.pem: CA file /x.pem given for plain HTTP`, true},
		{"s3:bucket", `snapshots: unsupported store URL "s3:bucket" (want a path, file://PATH, mem:// or s3://BUCKET/PREFIX?endpoint=HOST:PORT)`, true},
		{"http://x", `snapshots: unsupported store URL "http://x"`, true},
		{"mem:", `snapshots: unsupported store URL "mem:"`, true},
		{"file:rel", `snapshots: unsupported store URL "file:rel"`, true},
		{"file://host/x", `snapshots: store URL "file://host/x": want file:///absolute/path`, true},
		{"file://", `snapshots: store URL "file://": want file:///absolute/path`, true},
		{"mem://a/b", `snapshots: store URL "mem://a/b"`, true},
	} {
		s, err := snapshots.Open(t.Context(), tc.url)
		if err != nil && strings.Contains(err.Error(), "hunter22") {
			t.Errorf("Open(%q) error %q holds the secret", tc.url, err)
		}
		switch {
		case tc.err && err == nil:
			t.Errorf("Open(%q) = %s, want an error", tc.url, s)
		case tc.err && !strings.HasPrefix(err.Error(), tc.want):
			t.Errorf("Open(%q) error %q, want it to start with %q", tc.url, err, tc.want)
		case !tc.err && err != nil:
			t.Errorf("Open(%q): %v", tc.url, err)
		case !tc.err && s.String() != tc.want:
			t.Errorf("Open(%q) = %s, want %s", tc.url, s, tc.want)
		}
		if s != nil {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestOpenMemNamedIsShared(t *testing.T) {
	ctx := t.Context()
	name := fmt.Sprintf("mem://%s-%d", sanitize(t.Name()), memSeq.Add(1))
	a, err := snapshots.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	b, err := snapshots.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := b.Get(ctx, "k"); err != nil || string(got) != "v" {
		t.Errorf("second Open(%s).Get = %q, %v; want the first one's object", name, got, err)
	}
	c, err := snapshots.Open(ctx, "mem://")
	if err != nil {
		t.Fatal(err)
	}
	if keys, err := c.List(ctx, ""); err != nil || len(keys) != 0 {
		t.Errorf("Open(mem://) is not empty: %q, %v", keys, err)
	}
}

func TestOpenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if s, err := snapshots.Open(ctx, "mem://"); err == nil {
		t.Errorf("Open with a cancelled context = %s, want an error", s)
	}
}
