package miniotest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Binary returns the path of the MinIO server binary: $MINIO_BIN, else
// `minio` on PATH, else .tools/bin/minio under the repository root (the
// nearest directory above the working directory holding go.mod). Without
// one it skips the test, or fails it when CI=true.
func Binary(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("MINIO_BIN"); p != "" {
		if err := executable(p); err != nil {
			unavailable(t, "MINIO_BIN=%s: %v", p, err)
		}
		return p
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p
	}
	var tried string
	if root, err := repoRoot(); err == nil {
		p := filepath.Join(root, ".tools", "bin", "minio")
		if executable(p) == nil {
			return p
		}
		tried = ", nor " + p
	}
	unavailable(t, "no MinIO server binary: MINIO_BIN is unset, there is no minio on PATH%s; "+
		"run `make minio-bin` in the repository (about 4 minutes the first time) or set MINIO_BIN", tried)
	return ""
}

// unavailable skips the test, or fails it in CI.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("miniotest (CI=true, so not skipped): "+format, args...)
	}
	t.Skipf("miniotest: "+format, args...)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return errors.New("not an executable file")
	}
	return nil
}

// repoRoot walks up from the working directory to the one holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
