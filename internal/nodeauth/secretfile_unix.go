//go:build unix

package nodeauth

import (
	"io/fs"
	"os"
	"os/user"
	"strconv"
	"syscall"
)

func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
}

// ownedByMe names fi's owner and reports whether it is this process's
// user.
func ownedByMe(fi fs.FileInfo) (string, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "an unknown user", false
	}
	return uidName(int(st.Uid)), int(st.Uid) == os.Geteuid()
}

func me() string { return uidName(os.Geteuid()) }

// modeBits: the permission bits say who may access a file.
const modeBits = true

func uidName(uid int) string {
	s := "uid " + strconv.Itoa(uid)
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		s += " (" + u.Username + ")"
	}
	return s
}
