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

// StateKey returns the key of a task's state in checkpoint id that names
// no epoch (messages.TaskState.Epoch 0),
// "<job>/checkpoints/chk-<id>/<task-id>.state"; see EpochStateKey.
func StateKey(job string, id uint64, taskID string) string {
	return EpochStateKey(job, id, 0, taskID)
}

// EpochStateKey returns the key of a task's state in checkpoint id stored
// by incarnation epoch: "<job>/checkpoints/chk-<id>/e<epoch, 20
// digits>/<task-id>.state", or StateKey for epoch 0. The epoch keeps the
// objects of two holders of the job apart, should both take a checkpoint
// of one id: neither overwrites what the other's manifest points at.
func EpochStateKey(job string, id, epoch uint64, taskID string) string {
	return CheckpointPrefix(job, id) + epochDir(epoch) + taskID + stateSuffix
}

// epochDir returns "e<epoch, 20 digits>/", or "" for epoch 0.
func epochDir(epoch uint64) string {
	if epoch == 0 {
		return ""
	}
	return fmt.Sprintf("e%0*d/", idDigits, epoch)
}

// parseStateName splits the name of a state object within its
// checkpoint, "<task-id>.state" or "e<epoch>/<task-id>.state", into the
// epoch (0 for the first form) and the task id.
func parseStateName(name string) (epoch uint64, task string, ok bool) {
	if dir, rest, nested := strings.Cut(name, "/"); nested {
		if len(dir) != idDigits+1 || dir[0] != 'e' {
			return 0, "", false
		}
		e, err := strconv.ParseUint(dir[1:], 10, 64)
		if err != nil || e == 0 || strings.ContainsRune(rest, '/') {
			return 0, "", false
		}
		epoch, name = e, rest
	}
	task, ok = strings.CutSuffix(name, stateSuffix)
	return epoch, task, ok && task != ""
}

// keyEpoch returns the epoch of the state object or state file under key
// of job's checkpoints (0 when it names none, or is neither).
func keyEpoch(job, key string) uint64 {
	_, name, ok := parseCheckpointKey(job, key)
	if !ok {
		return 0
	}
	if e, _, ok := parseStateName(name); ok {
		return e
	}
	e, _, _, _ := parseFileName(name)
	return e
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
	return SavepointEpochStateKey(job, name, id, 0, taskID)
}

// SavepointEpochStateKey is SavepointStateKey for a state stored by
// incarnation epoch: "<job>/savepoints/<name>/chk-<id>/e<epoch, 20
// digits>/<task-id>.state" (see EpochStateKey).
func SavepointEpochStateKey(job, name string, id, epoch uint64, taskID string) string {
	return SavepointAttemptPrefix(job, name, id) + epochDir(epoch) + taskID + stateSuffix
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

// Names of the lease's layout, see the package documentation.
const (
	leasesDir       = "/leases/"
	legacyLeaseName = "/lease"
)

type leaseKind uint8

const (
	leaseClaim leaseKind = iota + 1
	leaseSeal
	leaseRenewal
)

var leaseSuffixes = map[leaseKind]string{leaseClaim: ".claim", leaseSeal: ".seal", leaseRenewal: ".renewal"}

// LeasesPrefix returns the prefix of the objects of the job's lease,
// "<job>/leases/": for each generation a claim, a seal and a renewal.
func LeasesPrefix(job string) string { return job + leasesDir }

func leaseKey(job string, gen uint64, kind leaseKind) string {
	return fmt.Sprintf("%s%0*d%s", LeasesPrefix(job), idDigits, gen, leaseSuffixes[kind])
}

// LeaseClaimKey returns the key of the claim of generation gen of the
// job's lease, "<job>/leases/<gen, 20 digits>.claim", created only if
// absent: of two claimants of one generation, one wins.
func LeaseClaimKey(job string, gen uint64) string { return leaseKey(job, gen, leaseClaim) }

// LeaseSealKey returns the key of the seal of generation gen (see
// Checkpoints.SealLease).
func LeaseSealKey(job string, gen uint64) string { return leaseKey(job, gen, leaseSeal) }

// LeaseRenewalKey returns the key of the renewals of generation gen (see
// Checkpoints.RenewLease).
func LeaseRenewalKey(job string, gen uint64) string { return leaseKey(job, gen, leaseRenewal) }

// parseLeaseKey splits a key below LeasesPrefix(job) into its generation
// and kind.
func parseLeaseKey(job, key string) (uint64, leaseKind, bool) {
	rest, ok := strings.CutPrefix(key, LeasesPrefix(job))
	if !ok || len(rest) <= idDigits {
		return 0, 0, false
	}
	gen, err := strconv.ParseUint(rest[:idDigits], 10, 64)
	if err != nil {
		return 0, 0, false
	}
	for kind, suffix := range leaseSuffixes {
		if rest[idDigits:] == suffix {
			return gen, kind, true
		}
	}
	return 0, 0, false
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
