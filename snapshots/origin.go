package snapshots

import (
	"context"
	"errors"
	"fmt"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// KindOrigin is the kind of the origin marker object (see OriginKey).
const KindOrigin = "snapflow.v1.Origin"

// PutOrigin records o as the job's origin, at OriginKey(job), replacing
// any previous one: the job was started from savepoint o.Savepoint, or,
// when that is empty, from its checkpoint o.CheckpointId, and its own
// checkpoints start at o.FirstId. Until the job completes a checkpoint
// with an id of at least FirstId, recovery restores the origin again,
// never a checkpoint of the history before it (see LoadLatestSince).
//
// o's savepoint name must pass ValidateSavepointName; without one, its
// checkpoint id must be at least 1; and FirstId must be at least 1.
//
// When c holds the job's lease, PutOrigin checks it first, and records
// the holder's first epoch in an origin that names none: an origin
// recorded by a holder that another has superseded does not count (see
// EffectiveOrigin).
func (c *Checkpoints) PutOrigin(ctx context.Context, o *messages.Origin) error {
	key := OriginKey(c.job)
	if err := validateOrigin(o); err != nil {
		return fmt.Errorf("snapshots: job %q: put origin %s: %w", c.job, key, err)
	}
	if err := c.writable(ctx); err != nil {
		return err
	}
	if l := c.heldLease(); l != nil && o.GetEpoch() == 0 {
		o = proto.CloneOf(o)
		o.Epoch = l.claim.GetFirstEpoch()
	}
	data, err := EncodeObject(KindOrigin, o)
	if err != nil {
		return fmt.Errorf("snapshots: job %q: put origin %s: %w", c.job, key, err)
	}
	return c.store.Put(ctx, key, data)
}

func validateOrigin(o *messages.Origin) error {
	switch {
	case o == nil:
		return errors.New("nil origin")
	case o.GetSavepoint() != "":
		if err := ValidateSavepointName(o.GetSavepoint()); err != nil {
			return err
		}
	case o.GetCheckpointId() == 0:
		return errors.New("names neither a savepoint nor a checkpoint (checkpoint id 0)")
	}
	if o.GetFirstId() == 0 {
		return errors.New("first id 0; ids start at 1")
	}
	return nil
}

// ReadOrigin returns the job's origin, or (nil, nil) when it has none. An
// origin object that does not decode, or that PutOrigin would refuse,
// gives an error wrapping ErrCorrupt that names its key.
func (c *Checkpoints) ReadOrigin(ctx context.Context) (*messages.Origin, error) {
	key := OriginKey(c.job)
	data, err := c.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	o := new(messages.Origin)
	if err := DecodeObject(data, KindOrigin, o); err != nil {
		return nil, fmt.Errorf("snapshots: origin %s: %w", key, err)
	}
	if err := validateOrigin(o); err != nil {
		return nil, fmt.Errorf("snapshots: origin %s: %w: %w", key, ErrCorrupt, err)
	}
	return o, nil
}

// DeleteOrigin deletes the job's origin marker; deleting a missing one is
// not an error. DeleteAll deletes it too.
func (c *Checkpoints) DeleteOrigin(ctx context.Context) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	return c.store.Delete(ctx, OriginKey(c.job))
}
