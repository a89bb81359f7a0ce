package snapshots

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// ErrCheckpointTaken is wrapped by the error of PutManifest when another
// manifest holds the checkpoint's id: a holder that another has
// superseded wrote it (it is void, see SealLease), and the checkpoint
// cannot complete under this id.
var ErrCheckpointTaken = errors.New("snapshots: checkpoint id taken")

// ErrVoid is wrapped by errors about a void checkpoint: its manifest was
// written by a holder of the job after another had taken the job over
// (see SealLease). Recovery passes over it, retention deletes it, and it
// is never restored.
var ErrVoid = errors.New("snapshots: void checkpoint")

// cacheSeal remembers seal s; seals never change.
func (c *Checkpoints) cacheSeal(s *messages.LeaseSeal) {
	c.mu.Lock()
	if c.seals == nil {
		c.seals = map[uint64]*messages.LeaseSeal{}
	}
	c.seals[s.GetGeneration()] = s
	c.mu.Unlock()
}

// fences returns the seals of the job's lease, oldest first. A holder
// that has sealed its claim reads them from its cache: a newer seal would
// mean that it lost the lease, which CheckLease tells, and confirmHolder
// reads them afresh where a decision rests on them. A seal that does not
// decode is an error wrapping ErrCorrupt: the manifests it voids are
// unknown.
func (c *Checkpoints) fences(ctx context.Context) ([]*messages.LeaseSeal, error) {
	c.mu.Lock()
	sealed := c.hold != nil && c.hold.sealed
	c.mu.Unlock()
	if !sealed {
		if err := c.readSeals(ctx); err != nil {
			return nil, err
		}
	}
	return c.cachedSeals(), nil
}

// confirmHolder reads the lease's seals afresh and then checks the lease
// (CheckLease): a holder that passes holds the job still, and counts as
// usable no manifest of its own that a newer seal voids. Without a lease
// it does nothing (fences reads the seals every time).
func (c *Checkpoints) confirmHolder(ctx context.Context) error {
	if c.heldLease() == nil {
		return nil
	}
	if err := c.readSeals(ctx); err != nil {
		return err
	}
	return c.CheckLease(ctx)
}

// readSeals lists the lease's seals and caches those it does not know.
func (c *Checkpoints) readSeals(ctx context.Context) error {
	keys, err := c.store.List(ctx, LeasesPrefix(c.job))
	if err != nil {
		return err
	}
	for _, k := range keys {
		gen, kind, ok := parseLeaseKey(c.job, k)
		if !ok || kind != leaseSeal {
			continue
		}
		c.mu.Lock()
		_, known := c.seals[gen]
		c.mu.Unlock()
		if known {
			continue
		}
		s := new(messages.LeaseSeal)
		if err := c.readObject(ctx, k, KindLeaseSeal, s); err != nil {
			if errors.Is(err, ErrNotFound) && ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("snapshots: job %q: read the lease's seal: %w", c.job, err)
		}
		c.cacheSeal(s)
	}
	return nil
}

// cachedSeals returns the seals c knows, oldest first.
func (c *Checkpoints) cachedSeals() []*messages.LeaseSeal {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*messages.LeaseSeal, 0, len(c.seals))
	for _, s := range c.seals {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b *messages.LeaseSeal) int {
		return cmpUint(a.GetGeneration(), b.GetGeneration())
	})
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// voidedBy returns the seal that makes manifest m void, or nil: m is of
// an earlier holder (its epoch below the seal's first) and has an id above
// what that holder found when it sealed its claim, so it landed after.
func voidedBy(seals []*messages.LeaseSeal, m *messages.Manifest) *messages.LeaseSeal {
	for _, s := range seals {
		if m.GetEpoch() < s.GetFirstEpoch() && m.GetCheckpointId() > s.GetValidThrough() {
			return s
		}
	}
	return nil
}

// voidError says why manifest m is void.
func voidError(job string, m *messages.Manifest, s *messages.LeaseSeal) error {
	return fmt.Errorf("snapshots: checkpoint %d of job %q is void: its manifest, of epoch %d, landed after %s took the job over (lease generation %d found checkpoints up to %d): %w",
		m.GetCheckpointId(), job, m.GetEpoch(), s.GetHolder(), s.GetGeneration(), s.GetValidThrough(), ErrVoid)
}

// checkVoid returns an error wrapping ErrVoid when m is void (see
// voidedBy), or the error of reading the seals.
func (c *Checkpoints) checkVoid(ctx context.Context, m *messages.Manifest) error {
	seals, err := c.fences(ctx)
	if err != nil {
		return err
	}
	if s := voidedBy(seals, m); s != nil {
		return voidError(c.job, m, s)
	}
	return nil
}

// EffectiveOrigin returns the job's origin (see PutOrigin) as its current
// holder counts it: the origin object when the newest holder to seal the
// lease, or a later one, recorded it; otherwise the origin that the newest
// holder found when it sealed its claim (nil: none). An origin that a
// superseded holder records after that does not count.
func (c *Checkpoints) EffectiveOrigin(ctx context.Context) (*messages.Origin, error) {
	o, err := c.ReadOrigin(ctx)
	if err != nil {
		return nil, err
	}
	seals, err := c.fences(ctx)
	if err != nil || len(seals) == 0 {
		return o, err
	}
	newest := seals[len(seals)-1]
	if o != nil && o.GetEpoch() >= newest.GetFirstEpoch() {
		return o, nil
	}
	if !proto.Equal(o, newest.GetOrigin()) {
		c.log.WarnContext(ctx, "snapshots: the job's origin was recorded by a holder that another had superseded; it does not count",
			"origin", o, "counted", newest.GetOrigin(), "holder", newest.GetHolder())
	}
	return proto.CloneOf(newest.GetOrigin()), nil
}

// writable checks, before c changes the store, that c may: nil without a
// lease; with one, the lease must be held (CheckLease).
func (c *Checkpoints) writable(ctx context.Context) error {
	if c.heldLease() == nil {
		return nil
	}
	return c.CheckLease(ctx)
}

// maxDeletable returns the highest epoch whose objects c may delete: with
// a lease, the last epoch of its holder, so that a superseded holder never
// deletes what a newer one wrote; without, every epoch.
func (c *Checkpoints) maxDeletable() uint64 {
	if l := c.heldLease(); l != nil {
		_, last := HolderEpochs(l.claim)
		return last
	}
	return ^uint64(0)
}
