package coordinator

import "errors"

var (
	// ErrFailover answers manual requests whose checkpoint was aborted, or
	// never triggered, because the job failed over (Reset).
	ErrFailover = errors.New("coordinator: job failover")
	// ErrAborted answers manual requests whose checkpoint aborted.
	ErrAborted = errors.New("coordinator: checkpoint aborted")
	// ErrTooManyFailures is wrapped by FailJob when more consecutive
	// checkpoints failed than Config.TolerableFailures allows.
	ErrTooManyFailures = errors.New("coordinator: too many failed checkpoints")
	// ErrFinishing answers a savepoint request made once the sources have
	// ended: the final checkpoint is the job's last.
	ErrFinishing = errors.New("coordinator: the job is finishing")
)
