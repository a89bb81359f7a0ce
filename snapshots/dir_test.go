package snapshots_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

func newDir(t *testing.T) (*snapshots.Dir, string) {
	t.Helper()
	root := t.TempDir()
	d, err := snapshots.NewDir(root)
	if err != nil {
		t.Fatal(err)
	}
	return d, root
}

// TestNewDirUnwritable uses a path below a regular file, which no user,
// root included, can create.
func TestNewDirUnwritable(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{filepath.Join(file, "store"), file} {
		d, err := snapshots.NewDir(path)
		if err == nil {
			t.Fatalf("NewDir(%s) = %v, want an error", path, d)
		}
		want := "snapshots: directory " + path + " cannot be created: "
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("NewDir(%s) error %q, want it to start with %q", path, err, want)
		}
		if !errors.Is(err, syscall.ENOTDIR) {
			t.Errorf("NewDir(%s) error %v does not wrap ENOTDIR", path, err)
		}
	}
	if _, err := snapshots.NewDir(""); err == nil {
		t.Error("NewDir(\"\") succeeded")
	}
}

func TestDirCheckAfterRootRemoved(t *testing.T) {
	d, root := newDir(t)
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	err := d.Check(t.Context())
	want := "snapshots: directory " + root + " is not writable: "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Check = %v, want an error starting with %q", err, want)
	}
}

func TestDirFiles(t *testing.T) {
	d, root := newDir(t)
	ctx := t.Context()
	if got, want := d.String(), "dir:"+root; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	if err := d.Put(ctx, "a/b/c.state", []byte("data")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "a", "b", "c.state"))
	if err != nil || string(got) != "data" {
		t.Errorf("file a/b/c.state = %q, %v; want %q", got, err, "data")
	}
	// Temporary files, as left by a crash during Put, are not objects.
	if err := os.WriteFile(filepath.Join(root, "a", "b", ".tmp-123"), []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	keys, err := d.List(ctx, "")
	if err != nil || !slices.Equal(keys, []string{"a/b/c.state"}) {
		t.Errorf("List = %q, %v; want only a/b/c.state", keys, err)
	}
	if err := os.Remove(filepath.Join(root, "a", "b", ".tmp-123")); err != nil {
		t.Fatal(err)
	}
	if err := d.Delete(ctx, "a/b/c.state"); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(root)
	if err != nil || len(entries) != 0 {
		t.Errorf("root after deleting the only key holds %v (%v), want nothing: empty parents are removed", entries, err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Errorf("the root itself was removed: %v", err)
	}
}

func TestDirPutUnderFile(t *testing.T) {
	d, _ := newDir(t)
	ctx := t.Context()
	if err := d.Put(ctx, "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	err := d.Put(ctx, "a/b", []byte("y"))
	if err == nil || !strings.HasPrefix(err.Error(), "snapshots: put a/b: ") {
		t.Errorf("Put below an object = %v, want a put error naming the key", err)
	}
}
