package main

import (
	"context"
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
	force := f.fs.Bool("force", false, "delete even the newest complete checkpoint, the one recovery would restore")
	id, err := f.parse(args, stderr, true)
	if err != nil {
		return err
	}
	c, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeStore(c, &err)
	infos, err := c.List(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(infos, func(info snapshots.Info) bool { return info.ID == id })
	if i < 0 {
		return notFound("job %s has no checkpoint %d", c.Job(), id)
	}
	if why := restoredBy(infos, id); why != "" && !*force {
		return fmt.Errorf("refusing to delete checkpoint %d of job %s: %s; without it %s. Use --force to delete it anyway",
			id, c.Job(), why, fallback(infos, id))
	}
	if err := c.Delete(ctx, id); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "deleted checkpoint %d of job %s (%d objects)\n", id, c.Job(), infos[i].Objects)
	return err
}

// restoredBy says why checkpoint id must be kept for recovery, or returns
// "". That is the newest complete checkpoint and, when its manifest is
// corrupt, the newest one that recovery would fall back to.
func restoredBy(infos []snapshots.Info, id uint64) string {
	newest := true
	for _, info := range slices.Backward(infos) {
		if !info.Complete {
			continue
		}
		switch {
		case info.ID == id && newest:
			return "it is the newest complete checkpoint, the one recovery would restore"
		case info.ID == id:
			return "recovery would restore it, because every newer complete checkpoint has a corrupt manifest"
		case info.Err == nil:
			return ""
		}
		newest = false
	}
	return ""
}

// fallback says what recovery would use if checkpoint id were gone.
func fallback(infos []snapshots.Info, id uint64) string {
	for _, info := range slices.Backward(infos) {
		if info.ID < id && info.Complete && info.Err == nil {
			return fmt.Sprintf("recovery would fall back to the older checkpoint %d", info.ID)
		}
	}
	return "recovery would start the job from scratch"
}
