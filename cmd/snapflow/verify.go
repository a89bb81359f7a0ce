package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

const verifySynopsis = "snapflow checkpoints verify --store URL [--job NAME] ID"

// verify re-reads every object of a checkpoint, printing a line for each.
func verify(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("verify", verifySynopsis)
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
	complete, err := lookup(ctx, c, id)
	if err != nil {
		return err
	}
	if !complete {
		return incompleteErr(ctx, c, id)
	}
	m, err := c.ReadManifest(ctx, id)
	return verifyObjects(ctx, c, stdout, snapshots.ManifestKey(c.Job(), id), m, err,
		fmt.Sprintf("checkpoint %d of job %s", id, c.Job()))
}

// verifyObjects prints a line for manifest m, read from key with error
// merr, and then, when it read, for each task's state, re-reading and
// checking its object (or its inline bytes) and the sections of earlier
// objects that it references. what names the checkpoint or savepoint in
// errors. Missing or corrupt objects make it fail after it has printed
// every line; a store failure stops it.
func verifyObjects(ctx context.Context, c *snapshots.Checkpoints, stdout io.Writer, key string, m *messages.Manifest, merr error, what string) error {
	if merr != nil {
		if !objectProblem(ctx, merr) {
			return merr
		}
		fmt.Fprintf(stdout, "FAIL  %s: %v\n", key, merr)
		return fmt.Errorf("%s: the manifest does not verify", what)
	}
	fmt.Fprintf(stdout, "ok    %s\n", key)
	failed := 0
	for _, t := range m.GetTasks() {
		h := t.GetState()
		err := verifyEntry(ctx, c, t)
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "ok    %s  task %s, %s\n", h.GetKey(), t.GetTaskId(), verified(m.GetJob(), h))
		case objectProblem(ctx, err):
			failed++
			fmt.Fprintf(stdout, "FAIL  %s  task %s: %v\n", h.GetKey(), t.GetTaskId(), err)
		default:
			return err
		}
	}
	if failed > 0 {
		return fmt.Errorf("%s: %d of %s failed verification", what, failed, plural(len(m.GetTasks()), "task state"))
	}
	return nil
}

// verified describes what verifying the state h points at checked: its
// own bytes, in an object or inline in the manifest, and the sections it
// references in earlier checkpoints' objects.
func verified(job string, h *messages.StateHandle) string {
	where := "in its object"
	if len(h.GetInline()) > 0 {
		where = "inline in the manifest"
	}
	out := fmt.Sprintf("%d bytes %s, crc32c %08x", h.GetSize(), where, h.GetCrc32C())
	if groups, bytes, ids := handleRefs(job, h); groups > 0 {
		out += fmt.Sprintf(", and %s (%d bytes) referenced in %s", plural(groups, "key group"), bytes, idList(ids))
	}
	return out
}

// verifyEntry reads and checks the state of one task of a manifest.
func verifyEntry(ctx context.Context, c *snapshots.Checkpoints, t *messages.TaskStateEntry) error {
	st, err := c.ReadTaskState(ctx, t.GetState())
	if err != nil {
		return err
	}
	if st.GetTaskId() != t.GetTaskId() {
		return fmt.Errorf("holds the state of task %q: %w", st.GetTaskId(), snapshots.ErrCorrupt)
	}
	return nil
}

// objectProblem reports whether err is about one object, missing or
// corrupt, rather than about the store or the context.
func objectProblem(ctx context.Context, err error) bool {
	return ctx.Err() == nil && (errors.Is(err, snapshots.ErrCorrupt) || errors.Is(err, snapshots.ErrNotFound))
}
