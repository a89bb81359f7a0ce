package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// WithTakeOver makes Start take the job over even from a running instance
// of it (another process, or a coordinator, holding the job's lease in
// the store): the other instance is fenced, and fails with
// snapshots.ErrLeaseLost at its next write, without completing another
// checkpoint or committing another transaction. Without it, Start refuses
// while another instance runs (an error wrapping snapshots.ErrLeaseHeld
// that names it). Use it for a deliberate replacement, such as a rolling
// update that starts the new process before the old one has ended.
func WithTakeOver() Option { return func(c *config) { c.takeOver = true } }

// WithLeaseTimeout sets how long another instance that finds this one
// silent (a crash on another host, a hang, a partition) waits before it
// takes the job over (default snapshots.DefaultLeaseTTL). The job renews
// its lease ten times as often. A job that stopped releases the lease, and
// one whose process is gone on the same host is taken over at once, so the
// wait applies only when nothing else can tell.
func WithLeaseTimeout(d time.Duration) Option { return func(c *config) { c.leaseTTL = d } }

// leaseRequest is the lease the job claims at Start.
func (cfg *config) leaseRequest(job, holder, address string) snapshots.LeaseRequest {
	ttl := cfg.leaseTTL
	if ttl <= 0 {
		ttl = snapshots.DefaultLeaseTTL
	}
	if holder == "" {
		holder = job
	}
	return snapshots.LeaseRequest{Holder: holder, Address: address, TakeOver: cfg.takeOver,
		TTL: ttl, RenewInterval: max(ttl/10, 10*time.Millisecond)}
}

// acquireLease makes cps the holder of the job in its store (see
// snapshots.Checkpoints.AcquireLease).
func acquireLease(ctx context.Context, cfg *config, cps *snapshots.Checkpoints, holder, address string) (*messages.Lease, error) {
	l, err := cps.AcquireLease(ctx, cfg.leaseRequest(cps.Job(), holder, address))
	if errors.Is(err, snapshots.ErrLeaseHeld) {
		return nil, fmt.Errorf("actors: job %q: another instance runs it (start with WithTakeOver to replace it on purpose): %w", cps.Job(), err)
	}
	if err != nil {
		return nil, fmt.Errorf("actors: job %q: claim the job's lease in %s: %w", cps.Job(), cps.Store(), err)
	}
	return l, nil
}

// leaseLostMsg tells the job actor that another instance took the job
// over.
type leaseLostMsg struct{ err error }

// renewLease renews the job's lease every interval until ctx ends, and
// tells the job actor when another instance has taken the job over. A
// renewal that fails for the store's sake is logged and tried again: the
// lease's TTL is the time others wait for it.
func (sh *shared) renewLease(ctx context.Context, interval time.Duration, lost func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 4*interval)
		err := sh.cps.RenewLease(rctx)
		cancel()
		switch {
		case errors.Is(err, snapshots.ErrLeaseLost):
			lost(err)
			return
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			sh.log.Warn("renewing the job's lease failed; retrying (another instance takes the job over once the lease times out)", "err", err)
		case err == nil && failing:
			failing = false
			sh.log.Info("renewing the job's lease works again")
		}
	}
}

// releaseLease lets the job go once it has ended, so that the next
// instance need not wait for the lease's timeout.
func (sh *shared) releaseLease() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sh.cps.ReleaseLease(ctx); err != nil {
		sh.log.Warn("releasing the job's lease failed: the next instance waits for it to time out", "err", err)
	}
}
