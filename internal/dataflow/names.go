package dataflow

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLength bounds a job or operator name in bytes. The names become
// parts of snapshot store keys: a task's state is stored as
// "<job>/checkpoints/chk-<20 digits>/<operator>#<subtask>.state", and each
// part between slashes must fit a file name (255 bytes on common file
// systems) with room for the subtask and suffixes.
const MaxNameLength = 128

// MaxParallelismLimit bounds MaxParallelism: key groups are stored as 32-bit
// numbers, and every keyed task owns a range of them. 32768 is also Flink's
// limit.
const MaxParallelismLimit = 1 << 15

// nameProblem returns why a job or operator name cannot be part of a
// snapshot store key, or "" when it can. Operator names also become task ids
// ("<operator>#<subtask>"), so they must not hold '#'.
//
// The rules restate those of validateKey in package snapshots (which this
// package must not import) for one key segment, and add what some stores
// refuse or mangle: control characters and invalid UTF-8 (S3 keys are UTF-8).
func nameProblem(name string, operator bool) string {
	switch {
	case operator && strings.ContainsAny(name, "#/\\"):
		return `must not contain '#', '/' or '\'`
	case !operator && strings.ContainsAny(name, "/\\"):
		return `must not contain '/' or '\'`
	case name == "." || name == "..":
		return `must not be "." or ".."`
	case strings.HasPrefix(name, ".tmp-"):
		return `must not start with ".tmp-", which the stores reserve for temporary files`
	case !utf8.ValidString(name):
		return "is not valid UTF-8"
	case strings.ContainsFunc(name, unicode.IsControl):
		return "must not contain control characters"
	case len(name) > MaxNameLength:
		return fmt.Sprintf("is %d bytes long, more than %d", len(name), MaxNameLength)
	}
	return ""
}
