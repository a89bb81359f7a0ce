package coordinator

import (
	"fmt"
	"strings"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// ActionKind says what the shell must do for an Action.
type ActionKind uint8

const (
	// Trigger: send TriggerCheckpoint(Checkpoint, Timestamp) to every source.
	Trigger ActionKind = iota + 1
	// WriteManifest: every task acked Checkpoint; write its manifest from
	// Acks, then call ManifestWritten.
	WriteManifest
	// Completed: Checkpoint's manifest is written; the checkpoint is complete.
	Completed
	// Aborted: Checkpoint will never complete, because of Reason.
	Aborted
	// RequestDone: the manual request Request is answered; Err is nil when
	// Checkpoint completed.
	RequestDone
	// FailJob: too many consecutive checkpoints failed; Err says why.
	FailJob
	// InDoubt: a failover (Reset) abandoned Checkpoint while its manifest was
	// being written, so whether it completed depends on whether the manifest
	// landed. The shell finds out (the outcome of the write, or the
	// checkpoint that recovery restores), reports the checkpoint completed or
	// aborted accordingly, and answers the manual Requests it carries. It is
	// counted neither as completed nor as aborted.
	InDoubt
)

var kindNames = [...]string{
	Trigger:       "Trigger",
	WriteManifest: "WriteManifest",
	Completed:     "Completed",
	Aborted:       "Aborted",
	RequestDone:   "RequestDone",
	FailJob:       "FailJob",
	InDoubt:       "InDoubt",
}

// String returns the ActionKind's lowercase name, for logs.
func (k ActionKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("ActionKind(%d)", uint8(k))
}

// Action is one thing the shell must do, returned by the Coordinator's steps.
type Action struct {
	Kind       ActionKind
	Checkpoint uint64
	// Final marks the final checkpoint (taken after Finish) on Trigger,
	// WriteManifest, Completed and Aborted.
	Final bool
	// Acks are the tasks' acks for WriteManifest, one per task in the order
	// given to New.
	Acks []*messages.AckCheckpoint
	// Reason explains Aborted and FailJob.
	Reason string
	// Request is the manual request id of RequestDone.
	Request uint64
	// Requests are the manual requests that InDoubt hands to the shell.
	Requests []uint64
	// Err is nil for a successful RequestDone; the failure of a RequestDone
	// (wrapping ErrAborted or ErrFailover) or of FailJob (wrapping
	// ErrTooManyFailures).
	Err error
	// Timestamp is the trigger time of Trigger.
	Timestamp time.Time
	// Savepoint is set on Trigger, WriteManifest, Completed, Aborted and
	// InDoubt when the checkpoint is a savepoint: the savepoint request
	// (see RequestSavepoint) it answers.
	Savepoint uint64
}

// String formats a for logs and tests, without the timestamp and acks' bodies.
func (a Action) String() string {
	var b strings.Builder
	b.WriteString(a.Kind.String())
	if a.Kind == RequestDone {
		fmt.Fprintf(&b, " req=%d", a.Request)
	}
	if a.Checkpoint != 0 {
		fmt.Fprintf(&b, " chk=%d", a.Checkpoint)
	}
	if a.Final {
		b.WriteString(" final")
	}
	if a.Savepoint != 0 {
		fmt.Fprintf(&b, " savepoint=%d", a.Savepoint)
	}
	if len(a.Requests) > 0 {
		fmt.Fprintf(&b, " reqs=%v", a.Requests)
	}
	if a.Kind == WriteManifest {
		tasks := make([]string, len(a.Acks))
		for i, ack := range a.Acks {
			tasks[i] = ack.GetTaskId()
		}
		fmt.Fprintf(&b, " acks=[%s]", strings.Join(tasks, ","))
	}
	if a.Reason != "" {
		fmt.Fprintf(&b, " reason=%q", a.Reason)
	}
	if a.Err != nil {
		fmt.Fprintf(&b, " err=%q", a.Err)
	}
	return b.String()
}
