// Package restart decides when a failed job is restarted: capped exponential
// backoff with jitter, and at most a number of failures within a sliding
// window, after which the strategy is exhausted and the job fails with its
// root cause.
//
// Strategy is a pure state machine in the style of the coordinator: it reads
// no clock and draws no random numbers. The job supervisor passes the time of
// each failure and a uniform random number in [0, 1) for the jitter, and
// arms its own timer for the returned delay.
//
// The backoff exponent is the number of earlier failures still inside the
// window, so the first failure after a quiet window waits InitialBackoff:
//
//	delay = min(MaxBackoff, InitialBackoff * Multiplier^n) * jitter, capped at MaxBackoff
//
// where jitter is a factor in [1-Jitter, 1+Jitter].
//
// The guide is docs/recovery.md in the repository.
package restart
