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
		{"s3://bucket/prefix", `snapshots: unsupported store URL "s3://bucket/prefix" (want a path, file://PATH or mem://)`, true},
		{"http://x", `snapshots: unsupported store URL "http://x"`, true},
		{"mem:", `snapshots: unsupported store URL "mem:"`, true},
		{"file:rel", `snapshots: unsupported store URL "file:rel"`, true},
		{"file://host/x", `snapshots: store URL "file://host/x": want file:///absolute/path`, true},
		{"file://", `snapshots: store URL "file://": want file:///absolute/path`, true},
		{"mem://a/b", `snapshots: store URL "mem://a/b"`, true},
	} {
		s, err := snapshots.Open(t.Context(), tc.url)
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
