package actors

import (
	"errors"
	"fmt"
)

// ErrStopped is returned by Wait when the job was stopped by Stop or by the
// cancellation of its context before it finished.
var ErrStopped = errors.New("actors: job stopped")

// ErrFinished is returned by Checkpoint once the job has finished.
var ErrFinished = errors.New("actors: job finished")

// TaskError is a task's failure: a panic or an error returned by an operator.
type TaskError struct {
	Task     string // e.g. "sum#1"
	Operator string
	Epoch    uint64
	Value    any    // the panic value, or the error returned
	Stack    []byte // the goroutine stack at the failure
}

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

func (e *JobError) Error() string {
	return fmt.Sprintf("actors: job %q failed: %s: %v", e.Job, e.Reason, e.Cause)
}

// Unwrap returns the cause.
func (e *JobError) Unwrap() error { return e.Cause }
