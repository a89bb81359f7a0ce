package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// cliHolder names the CLI in the job's lease while a command deletes.
const cliHolder = "snapflow-cli"

// holdJob takes the job's lease for a command that deletes, so that it
// deletes nothing a running holder restores or writes: a live holder makes
// it refuse, naming the holder; a holder that is gone or silent for its
// TTL lets the command take the lease (AcquireLease waits for the TTL).
// The command seals the lease as it finds the store, changes nothing else,
// and calls release when done, which lets the job go at once.
func holdJob(ctx context.Context, c *snapshots.Checkpoints, what string) (release func(*error), err error) {
	if _, err := c.AcquireLease(ctx, snapshots.LeaseRequest{Holder: cliHolder}); err != nil {
		if errors.Is(err, snapshots.ErrLeaseHeld) {
			return nil, fmt.Errorf("refusing to delete %s of job %s while the job runs: %w", what, c.Job(), err)
		}
		return nil, fmt.Errorf("take the lease of job %s: %w", c.Job(), err)
	}
	release = func(errp *error) {
		*errp = errors.Join(*errp, c.ReleaseLease(context.WithoutCancel(ctx)))
	}
	if err := seal(ctx, c); err != nil {
		release(&err)
		return nil, err
	}
	return release, nil
}

// seal seals c's lease with what c finds in the store, as a job's start
// does: a manifest of an earlier holder that lands later is void.
func seal(ctx context.Context, c *snapshots.Checkpoints) error {
	id, err := c.LatestCompleteID(ctx)
	if err != nil {
		return err
	}
	o, err := c.EffectiveOrigin(ctx)
	if err != nil {
		return err
	}
	return c.SealLease(ctx, id, o)
}

// originNeeded says why the job's origin, checkpoint id or savepoint
// named savepoint, must be kept, or returns "": recovery restores the
// origin (where the job was started from, or stopped with a savepoint)
// until the job has a usable checkpoint of its own.
func originNeeded(ctx context.Context, c *snapshots.Checkpoints, id uint64, savepoint string) (string, error) {
	o, err := c.EffectiveOrigin(ctx)
	if err != nil || o == nil || !isOrigin(o, id, savepoint) {
		return "", err
	}
	rp, err := c.Load(ctx, snapshots.LoadOptions{First: o.GetFirstId(), Heads: true})
	switch {
	case err != nil && !errors.Is(err, snapshots.ErrNoUsableCheckpoint):
		return "", err
	case rp != nil:
		return "", nil // the job has a usable checkpoint of its own
	}
	return fmt.Sprintf("it is the job's origin (the point it was started from, or stopped at), which recovery restores "+
		"until the job completes a usable checkpoint of its own (id %d or above), and it has none", o.GetFirstId()), nil
}

// isOrigin reports whether o names checkpoint id or savepoint.
func isOrigin(o *messages.Origin, id uint64, savepoint string) bool {
	if savepoint != "" {
		return o.GetSavepoint() == savepoint
	}
	return o.GetSavepoint() == "" && o.GetCheckpointId() == id
}

// refuseOrigin returns the refusal to delete what, the origin of job, for
// the reason why, or nil when why is "".
func refuseOrigin(what, job, why string) error {
	if why == "" {
		return nil
	}
	return fmt.Errorf("refusing to delete %s of job %s: %s; without it the job cannot be recovered. Use --force to delete it anyway",
		what, job, why)
}
