package snapshots

import (
	"context"
	"errors"
	"slices"
	"time"
)

// Info describes one checkpoint found in the store.
type Info struct {
	ID uint64
	// Complete is true when the checkpoint's manifest exists.
	Complete bool
	// Time, Tasks and Bytes (the sum of the state sizes) come from the
	// manifest; they are zero for an incomplete checkpoint.
	Time  time.Time
	Tasks int
	Bytes int64
	// Objects counts the checkpoint's keys, the manifest included.
	Objects int
	// Err is set when the manifest exists but is corrupt, or when the
	// checkpoint is void (an error wrapping ErrVoid, see SealLease).
	Err error
}

// checkpoint groups the keys of one checkpoint.
type checkpoint struct {
	id       uint64
	keys     []string // sorted
	complete bool
}

// scan lists the job's checkpoints in ascending id order.
func (c *Checkpoints) scan(ctx context.Context) ([]checkpoint, error) {
	keys, err := c.store.List(ctx, CheckpointsPrefix(c.job))
	if err != nil {
		return nil, err
	}
	var out []checkpoint
	for _, k := range keys { // sorted, and ids are fixed width: grouped by id
		id, name, ok := parseCheckpointKey(c.job, k)
		if !ok {
			continue
		}
		if len(out) == 0 || out[len(out)-1].id != id {
			out = append(out, checkpoint{id: id})
		}
		last := &out[len(out)-1]
		last.keys = append(last.keys, k)
		last.complete = last.complete || name == manifestName
	}
	return out, nil
}

// List describes every checkpoint of the job in ascending id order, complete
// or not, reading the manifests of the complete ones.
func (c *Checkpoints) List(ctx context.Context) ([]Info, error) {
	chks, err := c.scan(ctx)
	if err != nil {
		return nil, err
	}
	seals, err := c.fences(ctx)
	if err != nil {
		return nil, err
	}
	infos := make([]Info, 0, len(chks))
	for _, chk := range chks {
		info := Info{ID: chk.id, Complete: chk.complete, Objects: len(chk.keys)}
		if chk.complete {
			m, err := c.ReadManifest(ctx, chk.id)
			switch {
			case errors.Is(err, ErrCorrupt):
				info.Err = err
			case errors.Is(err, ErrNotFound) && ctx.Err() == nil:
				info.Complete = false // deleted since the listing
			case err != nil:
				return nil, err
			default:
				if s := voidedBy(seals, m); s != nil {
					info.Err = voidError(c.job, m, s)
				}
				if ns := m.GetTimestampUnixNano(); ns != 0 {
					info.Time = time.Unix(0, ns)
				}
				info.Tasks = len(m.GetTasks())
				for _, t := range m.GetTasks() {
					info.Bytes += int64(t.GetState().GetSize())
				}
			}
		}
		infos = append(infos, info)
	}
	return infos, nil
}

// MaxID returns the highest checkpoint id with any object in the store,
// complete or not, or 0 when there is none. A new checkpoint should use a
// higher id.
func (c *Checkpoints) MaxID(ctx context.Context) (uint64, error) {
	chks, err := c.scan(ctx)
	if err != nil || len(chks) == 0 {
		return 0, err
	}
	return chks[len(chks)-1].id, nil
}

// LatestCompleteID returns the highest id of a complete checkpoint (one
// with a manifest, usable or not), or 0 when there is none. It lists the
// keys and reads no object.
func (c *Checkpoints) LatestCompleteID(ctx context.Context) (uint64, error) {
	chks, err := c.scan(ctx)
	if err != nil {
		return 0, err
	}
	for _, chk := range slices.Backward(chks) {
		if chk.complete {
			return chk.id, nil
		}
	}
	return 0, nil
}
