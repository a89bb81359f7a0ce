package snapshots

import (
	"fmt"
	"strconv"
	"strings"
)

// Names of the layout, see the package documentation.
const (
	checkpointsDir = "/checkpoints/"
	chkPrefix      = "chk-"
	idDigits       = 20 // enough for any uint64, so key order is id order
	manifestName   = "_manifest"
	stateSuffix    = ".state"
)

// CheckpointsPrefix returns the prefix of every checkpoint key of job,
// "<job>/checkpoints/".
func CheckpointsPrefix(job string) string { return job + checkpointsDir }

// CheckpointPrefix returns the prefix of the keys of checkpoint id of job,
// "<job>/checkpoints/chk-<id as 20 digits>/".
func CheckpointPrefix(job string, id uint64) string {
	return fmt.Sprintf("%s%s%0*d/", CheckpointsPrefix(job), chkPrefix, idDigits, id)
}

// StateKey returns the key of a task's state in checkpoint id,
// "<job>/checkpoints/chk-<id>/<task-id>.state".
func StateKey(job string, id uint64, taskID string) string {
	return CheckpointPrefix(job, id) + taskID + stateSuffix
}

// ManifestKey returns the key of the manifest of checkpoint id,
// "<job>/checkpoints/chk-<id>/_manifest". It is written last.
func ManifestKey(job string, id uint64) string {
	return CheckpointPrefix(job, id) + manifestName
}

// parseCheckpointKey splits a key below CheckpointsPrefix(job) into the
// checkpoint id and the object's name within the checkpoint. ok is false for
// keys that do not follow the layout; they are ignored.
func parseCheckpointKey(job, key string) (id uint64, name string, ok bool) {
	rest, ok := strings.CutPrefix(key, CheckpointsPrefix(job))
	if !ok {
		return 0, "", false
	}
	rest, ok = strings.CutPrefix(rest, chkPrefix)
	if !ok || len(rest) < idDigits+2 || rest[idDigits] != '/' {
		return 0, "", false
	}
	digits := rest[:idDigits]
	if strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, "", false
	}
	id, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, "", false
	}
	return id, rest[idDigits+1:], true
}
