package snapshots

import (
	"context"
	"math/rand/v2"
	"time"
)

// do runs fn until it succeeds, fails permanently, has been retried
// m.retries times, or ctx is done, waiting with exponential backoff and
// jitter between attempts: m.backoff, doubled each time up to
// MaxMinIOBackoff (or m.backoff, when larger). The error is explained by
// fail.
func (m *MinIO) do(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return m.retry(ctx, op, transient, fn)
}

// doWrite is do for writes (puts and deletes), which also retry
// AccessDenied: see transientWrite.
func (m *MinIO) doWrite(ctx context.Context, op string, fn func(ctx context.Context) error) error {
	return m.retry(ctx, op, transientWrite, fn)
}

func (m *MinIO) retry(ctx context.Context, op string, isTransient func(error) bool, fn func(ctx context.Context) error) error {
	if err := ctx.Err(); err != nil {
		return m.fail(ctx, op, err)
	}
	backoff := m.backoff
	for attempt := 0; ; attempt++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || attempt >= m.retries || !isTransient(err) {
			return m.fail(ctx, op, err)
		}
		if m.retryHook != nil {
			m.retryHook(op, attempt, err)
		}
		if err := wait(ctx, jitter(backoff)); err != nil {
			return m.fail(ctx, op, err)
		}
		backoff = min(2*backoff, max(MaxMinIOBackoff, m.backoff))
	}
}

// jitter returns a random duration between d/2 and d.
func jitter(d time.Duration) time.Duration {
	half := d / 2
	return half + rand.N(d-half+1)
}

// wait waits for d or until ctx is done.
func wait(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
