package nodeauth

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrSecretFile is wrapped by the refusal of a secret file that is not the
// user's own and private, or that cannot be made so.
var ErrSecretFile = errors.New("nodeauth: the secret file is not private")

// ReadSecretFile reads a cluster's secret from path (without surrounding
// white space), as ssh reads a private key: only when the file is owned by
// the user of this process and neither its group nor others have any
// access to it, so that another local user can neither read the secret nor
// plant one of their own choosing. A symbolic link is refused too.
func ReadSecretFile(path string) (string, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return "", fmt.Errorf("nodeauth: secret file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("nodeauth: secret file: %w", err)
	}
	if err := private(path, fi); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("nodeauth: secret file %s: %w", path, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("nodeauth: secret file %s is empty", path)
	}
	return s, nil
}

// private refuses a file that is not a regular file of this user with no
// group or other access, naming its mode and owner.
func private(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is not a regular file (%v)", ErrSecretFile, path, fi.Mode().Type())
	}
	owner, mine := ownedByMe(fi)
	perm := fi.Mode().Perm()
	switch {
	case !mine:
		return fmt.Errorf("%w: %s (mode %04o) is owned by %s, not by this process's user %s: another user may have chosen the secret; remove it, or use a file of your own", ErrSecretFile, path, perm, owner, me())
	case modeBits && perm&0o077 != 0:
		return fmt.Errorf("%w: %s has mode %04o (owner %s): its group or others may read or change it; chmod 600 %s", ErrSecretFile, path, perm, owner, path)
	}
	return nil
}

// CreateSecretFile writes a new random secret to path, which must not
// exist, mode 0600, and returns it. The directory is made, mode 0700, when
// it does not exist; one that its group or others may write (such as /tmp)
// is refused: put the file in a private directory.
func CreateSecretFile(path string) (string, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("nodeauth: secret file: %w", err)
	}
	di, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("nodeauth: secret file: %w", err)
	}
	if owner, mine := ownedByMe(di); !mine || modeBits && di.Mode().Perm()&0o022 != 0 {
		return "", fmt.Errorf("%w: the directory %s (mode %04o, owner %s) is not private: others could replace the file; put the secret file in a directory of your own that only you may write (mkdir -m 700)", ErrSecretFile, dir, di.Mode().Perm(), owner)
	}
	secret := NewSecret()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("nodeauth: secret file: %w", err)
	}
	_, err = f.WriteString(secret + "\n")
	if err = errors.Join(err, f.Close()); err != nil {
		return "", fmt.Errorf("nodeauth: secret file %s: %w", path, err)
	}
	return secret, nil
}
