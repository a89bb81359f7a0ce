package topology

import "github.com/snapflow/snapflow/internal/dataflow"

// The errors a job author meets: check them with errors.Is.
var (
	// ErrInvalid is wrapped by every validation error of a graph (see
	// ValidationError).
	ErrInvalid = dataflow.ErrInvalid
	// ErrInvalidState is wrapped by the errors of a keyed operator's setup
	// function: a state declared twice or without a name, a type the
	// default codec cannot store exactly, a nil process function, or a
	// panic.
	ErrInvalidState = dataflow.ErrInvalidState
	// ErrIncompatibleState is wrapped by the errors that refuse to restore
	// or decode stored keyed state into a declaration it does not match:
	// another kind, key type, value type or codec, or a state no longer
	// declared.
	ErrIncompatibleState = dataflow.ErrIncompatibleState
	// ErrRestoreRefused is wrapped by the error of a job whose checkpoint
	// or savepoint cannot be restored exactly into its graph (see
	// RestoreError).
	ErrRestoreRefused = dataflow.ErrRestoreRefused
	// ErrLossyValue is wrapped by the errors of the built-in codecs when a
	// value would not decode to what was encoded: the snapshot fails
	// rather than store a changed value.
	ErrLossyValue = dataflow.ErrLossyValue
	// ErrPreflight is wrapped by the error of a job refused because an
	// operator's Check failed.
	ErrPreflight = dataflow.ErrPreflight
	// ErrSourceIdle is returned by a Source's Read when no record is
	// available yet (see Waker).
	ErrSourceIdle = dataflow.ErrSourceIdle
	// ErrCommit is wrapped by the error of a task whose transactional sink
	// could not commit. The job recovers, and the restore commits the
	// transaction again.
	ErrCommit = dataflow.ErrCommit
	// ErrNoWireCodec is wrapped by the error of a cluster job with a stream
	// whose records the default wire codec cannot carry exactly between
	// nodes, and that has no codec given by WithWireCodec.
	ErrNoWireCodec = dataflow.ErrNoWireCodec
)

// RestoreError lists every reason a checkpoint or savepoint cannot be
// restored into a job's graph, each naming its operator or state. It wraps
// ErrRestoreRefused, and ErrIncompatibleState when a state declaration
// changed.
//
// Its fields:
//   - Job string: the job's name.
//   - Checkpoint uint64: the id of the checkpoint refused.
//   - Savepoint string: the savepoint's name, "" for a checkpoint.
//   - Problems []string: every reason, one per operator or state.
type RestoreError = dataflow.RestoreError
