package engine

import (
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/topology"
)

// ErrStopped is returned by Wait when the job was stopped by Stop or by the
// cancellation of its context before it finished.
var ErrStopped = errors.New("actors: job stopped")

// ErrFinished is returned by Checkpoint once the job has finished.
var ErrFinished = errors.New("actors: job finished")

// ErrNotStopped is wrapped by the error of StopWithSavepoint when the
// savepoint completed but the job did not stop there (recording it as the
// job's origin failed) and goes on: the savepoint is a complete, plain
// one, which is never overwritten, so stop the job again under another
// name.
var ErrNotStopped = errors.New("actors: the job did not stop at its savepoint")

// ErrActorStopped is the cause of a job whose job actor, or of a worker
// whose host actor, was stopped by something other than the job's end (a
// Stop or PoisonPill message): the job did not finish.
var ErrActorStopped = errors.New("actors: stopped before the job ended")

// ErrStopTimeout is wrapped by Stop's error when the job did not stop
// within the stop timeout (see WithStopTimeout).
var ErrStopTimeout = errors.New("actors: stop timed out")

// ErrJobFailed is wrapped by ServeWorker's error when the coordinator ended
// the job because it failed: the worker did its part, but the job did not
// finish.
var ErrJobFailed = errors.New("actors: the job failed")

// TaskError is a task's failure: a panic or an error returned by an operator.
type TaskError struct {
	Task     string // e.g. "sum#1"
	Operator string
	Epoch    uint64
	Value    any    // the panic value, or the error returned
	Stack    []byte // the stack of the code that panicked; nil for a returned error
	// cause classifies the failure where the task knew it (see
	// failureCause).
	cause FailureCause
}

// Error implements error.
func (e *TaskError) Error() string {
	return fmt.Sprintf("task %s (operator %q) failed: %v", e.Task, e.Operator, e.Value)
}

// Unwrap returns the error the task failed with, if its value is an error.
func (e *TaskError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// JobError is returned by Wait when a job fails for good.
type JobError struct {
	Job      string
	Failures int    // failures counted by the restart strategy
	Reason   string // why the job gave up
	Cause    error  // the last failure; a *TaskError for task failures
}

// Error implements error.
func (e *JobError) Error() string {
	return fmt.Sprintf("actors: job %q failed: %s: %v", e.Job, e.Reason, e.Cause)
}

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Cause }

// errorCause classifies an error a task failed with: a commit that failed
// (topology.ErrCommit), or an error of an operator.
func errorCause(err error) FailureCause {
	if errors.Is(err, topology.ErrCommit) {
		return CauseCommit
	}
	return CauseError
}

// failureCause classifies a failure of the job's tasks (EventTaskFailed).
func failureCause(err error) FailureCause {
	var te *TaskError
	var nl *NodeLostError
	switch {
	case errors.As(err, &te):
		if te.cause != "" {
			return te.cause
		}
		if e, ok := te.Value.(error); ok {
			return errorCause(e)
		}
		return CausePanic
	case errors.As(err, &nl):
		return CauseNodeLost
	}
	return CauseOther
}

// parseCause returns the FailureCause a worker reported, or "" for one
// this coordinator does not know (then the error is classified here).
func parseCause(s string) FailureCause {
	switch c := FailureCause(s); c {
	case CausePanic, CauseError, CauseCommit, CauseRestore, CauseNodeLost, CauseLinkLost, CauseOther:
		return c
	}
	return ""
}
