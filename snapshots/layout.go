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

// Names of the savepoint layout, see the package documentation.
const (
	savepointsDir = "/savepoints/"
	originName    = "/origin"
)

// SavepointsPrefix returns the prefix of every savepoint key of job,
// "<job>/savepoints/".
func SavepointsPrefix(job string) string { return job + savepointsDir }

// SavepointPrefix returns the prefix of the keys of savepoint name of job,
// "<job>/savepoints/<name>/". Every object of a savepoint lies below it.
func SavepointPrefix(job, name string) string { return SavepointsPrefix(job) + name + "/" }

// SavepointStateKey returns the key of a task's state in savepoint name,
// taken as checkpoint id: "<job>/savepoints/<name>/chk-<id as 20
// digits>/<task-id>.state". The id keeps the objects of two attempts at a
// savepoint of one name apart: an attempt that failed, whose late uploads
// and clean-up never touch those of the attempt that completes.
func SavepointStateKey(job, name string, id uint64, taskID string) string {
	return SavepointAttemptPrefix(job, name, id) + taskID + stateSuffix
}

// SavepointAttemptPrefix returns the prefix of the state objects of the
// attempt at savepoint name taken as checkpoint id,
// "<job>/savepoints/<name>/chk-<id as 20 digits>/".
func SavepointAttemptPrefix(job, name string, id uint64) string {
	return fmt.Sprintf("%s%s%0*d/", SavepointPrefix(job, name), chkPrefix, idDigits, id)
}

// SavepointManifestKey returns the key of the manifest of savepoint name,
// "<job>/savepoints/<name>/_manifest". It is written last: the savepoint
// is complete if and only if its manifest exists.
func SavepointManifestKey(job, name string) string {
	return SavepointPrefix(job, name) + manifestName
}

// OriginKey returns the key of the job's origin marker, "<job>/origin" (see
// Checkpoints.PutOrigin). Like the lease it lies outside the checkpoints'
// and the savepoints' keys.
func OriginKey(job string) string { return job + originName }

// parseSavepointKey splits a key below SavepointsPrefix(job) into the
// savepoint's name and the object's name within the savepoint. ok is false
// for keys that do not follow the layout; they are ignored.
func parseSavepointKey(job, key string) (name, object string, ok bool) {
	rest, ok := strings.CutPrefix(key, SavepointsPrefix(job))
	if !ok {
		return "", "", false
	}
	name, object, ok = strings.Cut(rest, "/")
	return name, object, ok && name != "" && object != ""
}
