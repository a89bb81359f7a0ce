//go:build unix

package main

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFileNotPrivateRefused: -secret-file refuses a file that already
// exists when its group or others may read it, or when another user owns
// it (a planted secret), naming the file, its mode and its owner; the
// coordinator writes a missing file mode 0600 in a directory of mode 0700.
func TestSecretFileNotPrivateRefused(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	planted := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("a-planted-secret-0123456789abcdef\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		if uid >= 0 {
			if err := os.Chown(p, uid, uid); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	cases := []struct {
		name, path string
		want       []string
	}{
		{"world-readable", planted("world.secret", 0o644, -1), []string{"world.secret", "mode 0644"}},
		{"group-readable", planted("group.secret", 0o640, -1), []string{"group.secret", "mode 0640"}},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, struct {
			name, path string
			want       []string
		}{"another user's", planted("other.secret", 0o600, 4242), []string{"other.secret", "owned by uid 4242"}})
	}
	for _, c := range cases {
		for _, create := range []bool{true, false} { // coordinator, worker
			s, err := loadSecret(c.path, create, log)
			if err == nil {
				t.Errorf("%s file (create %v): used as the secret %q", c.name, create, s)
				continue
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s file: %q does not name %q", c.name, err, w)
				}
			}
		}
	}
	p := filepath.Join(dir, "private", "cluster.secret")
	s, err := loadSecret(p, true, log)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loadSecret(p, false, log); err != nil || got != s {
		t.Errorf("the coordinator's file read by a worker: %q, %v", got, err)
	}
	for path, want := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %04o", path, fi.Mode(), err, want)
		}
	}
}
