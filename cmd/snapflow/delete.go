package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/snapflow/snapflow/snapshots"
)

const deleteSynopsis = "snapflow checkpoints delete --store URL [--job NAME] [--force] ID"

// remove deletes a checkpoint, refusing the one recovery would restore
// unless forced.
func remove(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("delete", deleteSynopsis)
	force := f.fs.Bool("force", false, "delete even the checkpoint recovery would restore: the newest usable one, or the job's origin")
	arg, err := f.parse(args, stderr, true)
	if err != nil {
		return err
	}
	c, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeStore(c, &err)
	id, err := resolve(ctx, c, arg, stderr)
	if err != nil {
		return err
	}
	release, err := holdJob(ctx, c, fmt.Sprintf("checkpoint %d", id))
	if err != nil {
		return err
	}
	defer release(&err)
	s, err := surveyCheckpoints(ctx, c)
	if err != nil {
		return err
	}
	infos := s.infos
	i := slices.IndexFunc(infos, func(info snapshots.Info) bool { return info.ID == id })
	if i < 0 {
		return notFound("job %s has no checkpoint %d", c.Job(), id)
	}
	keys := s.keys[id]
	if by, n := s.referencedBy(id, keys); !infos[i].Complete && n > 0 && n == len(keys) {
		return fmt.Errorf("checkpoint %d of job %s has no manifest and holds only objects that %s "+
			"(incremental checkpoints share the key groups that did not change): there is nothing to delete; "+
			"retention deletes them once no retained checkpoint references them", id, c.Job(), referencing(by))
	}
	if !*force {
		why, err := restoredBy(ctx, c, infos, id)
		if err != nil {
			return err
		}
		if why == "" {
			if why, err = originNeeded(ctx, c, id, ""); err != nil || why != "" {
				return errors.Join(err, refuseOrigin(fmt.Sprintf("checkpoint %d", id), c.Job(), why))
			}
		}
		if why != "" {
			instead, err := fallback(ctx, c, infos, id)
			if err != nil {
				return err
			}
			return fmt.Errorf("refusing to delete checkpoint %d of job %s: %s; without it %s. Use --force to delete it anyway",
				id, c.Job(), why, instead)
		}
	}
	if err := c.Delete(ctx, id); err != nil {
		return err
	}
	// Delete keeps the objects that other checkpoints reference.
	left, err := c.Store().List(ctx, snapshots.CheckpointPrefix(c.Job(), id))
	if err != nil {
		return err
	}
	what := "checkpoint"
	if !infos[i].Complete {
		what = "incomplete checkpoint"
	}
	detail := plural(max(len(keys)-len(left), 0), "object")
	if by, _ := s.referencedBy(id, left); len(left) > 0 && len(by) > 0 {
		detail += fmt.Sprintf("; kept %s that %s", plural(len(left), "object"), referencing(by))
	}
	_, err = fmt.Fprintf(stdout, "deleted %s %d of job %s (%s)\n", what, id, c.Job(), detail)
	return err
}

// restoredBy says why checkpoint id must be kept for recovery, or returns
// "". That is the newest complete checkpoint and, when no newer complete
// checkpoint is usable, the one recovery would fall back to.
func restoredBy(ctx context.Context, c *snapshots.Checkpoints, infos []snapshots.Info, id uint64) (string, error) {
	newest := true
	for _, info := range slices.Backward(infos) {
		if !info.Complete {
			continue
		}
		switch {
		case info.ID == id && newest:
			return "it is the newest complete checkpoint, the one recovery would restore", nil
		case info.ID == id:
			return "recovery would restore it, because no newer complete checkpoint is usable", nil
		}
		newest = false
		if ok, err := usable(ctx, c, info); ok || err != nil {
			return "", err
		}
	}
	return "", nil
}

// fallback says what recovery would use if checkpoint id were gone: the
// newest older usable checkpoint.
func fallback(ctx context.Context, c *snapshots.Checkpoints, infos []snapshots.Info, id uint64) (string, error) {
	for _, info := range slices.Backward(infos) {
		if info.ID >= id || !info.Complete {
			continue
		}
		ok, err := usable(ctx, c, info)
		if err != nil {
			return "", err
		}
		if ok {
			return fmt.Sprintf("recovery would fall back to the older checkpoint %d", info.ID), nil
		}
	}
	return "recovery would start the job from scratch", nil
}

// usable reports whether the complete checkpoint info is one that recovery
// can restore: its manifest and every object verify.
func usable(ctx context.Context, c *snapshots.Checkpoints, info snapshots.Info) (bool, error) {
	if info.Err != nil {
		return false, nil
	}
	err := c.Verify(ctx, info.ID)
	switch {
	case err == nil:
		return true, nil
	case objectProblem(ctx, err):
		return false, nil
	}
	return false, err
}
