//go:build unix

package nodeauth

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSecretFileRefused: a secret file that its group or others may read,
// one owned by another user, and a symbolic link are refused, each naming
// the file, its mode and its owner; the user's own file of mode 0600 is
// read.
func TestSecretFileRefused(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("a-secret-of-32-bytes-0123456789ab\n"), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil { // the umask may have taken bits away
			t.Fatal(err)
		}
		return p
	}
	good := write("good", 0o600)
	if s, err := ReadSecretFile(good); err != nil || s != "a-secret-of-32-bytes-0123456789ab" {
		t.Fatalf("the user's own private file: %q, %v", s, err)
	}
	for _, c := range []struct {
		name string
		path string
		want []string
	}{
		{"world-readable", write("world", 0o644), []string{"world", "mode 0644", "chmod 600"}},
		{"group-readable", write("group", 0o640), []string{"group", "mode 0640"}},
		{"group-writable", write("gw", 0o620), []string{"gw", "mode 0620"}},
	} {
		_, err := ReadSecretFile(c.path)
		if !errors.Is(err, ErrSecretFile) {
			t.Errorf("%s: %v, want ErrSecretFile", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", c.name, err, w)
			}
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSecretFile(link); err == nil {
		t.Error("a symbolic link to a private file was read")
	}
	if os.Geteuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	planted := write("planted", 0o600)
	if err := os.Chown(planted, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	_, err := ReadSecretFile(planted)
	if !errors.Is(err, ErrSecretFile) || !strings.Contains(err.Error(), "owned by uid 4242") || !strings.Contains(err.Error(), "planted") {
		t.Errorf("a file of another user: %v, want ErrSecretFile naming the file and uid 4242", err)
	}
}

// TestCreateSecretFile: the file is made mode 0600 in a directory made
// mode 0700, read back as written, never over an existing file, and never
// in a directory others may write.
func TestCreateSecretFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "private", "cluster.secret")
	s, err := CreateSecretFile(p)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{p: 0o600, filepath.Dir(p): 0o700} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, %v; want mode %04o", path, fi.Mode(), err, want)
		}
	}
	if got, err := ReadSecretFile(p); err != nil || got != s {
		t.Errorf("read back: %q, %v", got, err)
	}
	if _, err := CreateSecretFile(p); !errors.Is(err, os.ErrExist) {
		t.Errorf("over an existing file: %v, want ErrExist", err)
	}
	shared := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o1777); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateSecretFile(filepath.Join(shared, "s")); !errors.Is(err, ErrSecretFile) || !strings.Contains(err.Error(), "not private") {
		t.Errorf("in a directory like /tmp: %v, want ErrSecretFile", err)
	}
}
