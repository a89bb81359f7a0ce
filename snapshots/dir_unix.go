//go:build unix

package snapshots

import (
	"errors"
	"syscall"
)

// isNotDirOrIsDir reports ENOTDIR (a parent is a file) or EISDIR (the path
// is a directory).
func isNotDirOrIsDir(err error) bool {
	return errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR)
}
