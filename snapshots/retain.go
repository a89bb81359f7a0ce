package snapshots

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Delete deletes checkpoint id: the manifest first, so that the checkpoint
// stops being complete before any of its objects goes, then its other
// objects. It does not look at other manifests; use Retain to keep objects
// that newer checkpoints reference.
func (c *Checkpoints) Delete(ctx context.Context, id uint64) error {
	keys, err := c.store.List(ctx, CheckpointPrefix(c.job, id))
	if err != nil {
		return err
	}
	return c.deleteKeys(ctx, id, keys, nil)
}

// deleteKeys deletes the manifest of id and then the given keys except
// those in keep, joining the failures. A failure to delete the manifest
// stops it: the checkpoint must not stay complete with objects missing.
func (c *Checkpoints) deleteKeys(ctx context.Context, id uint64, keys []string, keep map[string]bool) error {
	manifest := ManifestKey(c.job, id)
	if err := c.store.Delete(ctx, manifest); err != nil {
		return err
	}
	c.forget(id)
	var rest []string
	for _, k := range keys {
		if k != manifest && !keep[k] {
			rest = append(rest, k)
		}
	}
	return deleteMany(ctx, c.store, rest)
}

// Retain applies retention. It keeps the newest keep complete checkpoints
// (keep < 1 means 1) and deletes the older complete ones. It deletes the
// incomplete checkpoints (no manifest) whose id is below inFlight, which are
// aborted or orphaned; the checkpoint in flight and newer ones are left
// alone. Pass inFlight 0 to delete no incomplete checkpoint, or MaxID()+1
// when none is in flight.
//
// Retain never deletes the newest complete checkpoint, nor any object that
// a retained manifest references. A complete checkpoint whose manifest is
// corrupt is kept while it is newer than the oldest retained one but does
// not count towards keep, so a corrupt newest manifest never costs the
// checkpoint that recovery would fall back to.
func (c *Checkpoints) Retain(ctx context.Context, keep int, inFlight uint64) error {
	keep = max(keep, 1)
	chks, err := c.scan(ctx)
	if err != nil {
		return err
	}
	referenced := make(map[string]bool)
	retained := make(map[uint64]bool)
	kept := 0
	for _, chk := range slices.Backward(chks) {
		if !chk.complete || kept == keep {
			continue
		}
		retained[chk.id] = true
		m, err := c.cachedManifest(ctx, chk.id)
		switch {
		case errors.Is(err, ErrCorrupt) && ctx.Err() == nil:
			c.log.WarnContext(ctx, "snapshots: retention keeps a checkpoint with a corrupt manifest",
				"checkpoint", chk.id, "key", ManifestKey(c.job, chk.id), "err", err)
			continue
		case err != nil:
			return fmt.Errorf("snapshots: retain: %w", err)
		}
		kept++
		for _, k := range m {
			referenced[k] = true
		}
	}
	var errs []error
	for _, chk := range chks {
		if retained[chk.id] || (!chk.complete && chk.id >= inFlight) {
			continue
		}
		c.log.DebugContext(ctx, "snapshots: deleting checkpoint", "checkpoint", chk.id, "complete", chk.complete)
		if err := c.deleteKeys(ctx, chk.id, chk.keys, referenced); err != nil {
			if ctx.Err() != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cachedManifest returns the state keys that manifest id references, reading
// it only the first time: manifests never change once written.
func (c *Checkpoints) cachedManifest(ctx context.Context, id uint64) ([]string, error) {
	c.mu.Lock()
	keys, ok := c.refs[id]
	c.mu.Unlock()
	if ok {
		return keys, nil
	}
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	for _, t := range m.GetTasks() {
		keys = append(keys, t.GetState().GetKey())
	}
	c.mu.Lock()
	if c.refs == nil {
		c.refs = map[uint64][]string{}
	}
	c.refs[id] = keys
	c.mu.Unlock()
	return keys, nil
}

// forget drops manifest id from the cache once it is deleted.
func (c *Checkpoints) forget(id uint64) {
	c.mu.Lock()
	delete(c.refs, id)
	c.mu.Unlock()
}
