//go:build !unix

package snapshots

// isNotDirOrIsDir is not detected on this platform; such errors surface as
// they are.
func isNotDirOrIsDir(error) bool { return false }
