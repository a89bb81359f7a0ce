package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/snapflow/snapflow/snapshots"
)

const (
	listSavepointsSynopsis  = "snapflow savepoints list --store URL [--job NAME]"
	showSavepointSynopsis   = "snapflow savepoints show --store URL [--job NAME] [--json] NAME"
	verifySavepointSynopsis = "snapflow savepoints verify --store URL [--job NAME] NAME"
	deleteSavepointSynopsis = "snapflow savepoints delete --store URL [--job NAME] [--force] NAME"
)

// listSavepoints prints one line per savepoint: NAME ID TIME TASKS BYTES
// STATUS.
func listSavepoints(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("list", listSavepointsSynopsis)
	if _, err := f.parseArgs(args, stderr, ""); err != nil {
		return err
	}
	c, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeStore(c, &err)
	infos, err := c.Savepoints(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if len(infos) > 0 {
		fmt.Fprintln(tw, "NAME\tID\tTIME\tTASKS\tBYTES\tSTATUS")
	}
	for _, info := range infos {
		fmt.Fprintln(tw, savepointLine(info))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, info := range infos {
		if info.Err != nil {
			fmt.Fprintf(stderr, "snapflow: warning: savepoint %s: %v\n", displayName(info.Name), info.Err)
		}
	}
	return nil
}

// savepointLine formats info as tab-separated columns.
func savepointLine(info snapshots.SavepointInfo) string {
	id, when, tasks, size, status := "-", "-", "-", "-", "complete"
	switch m := info.Manifest; {
	case !info.Complete:
		tasks, status = strconv.Itoa(info.Objects), "incomplete"
	case info.Err != nil || m == nil:
		status = "corrupt"
	default:
		var total uint64
		for _, t := range m.GetTasks() {
			total += t.GetState().GetSize()
		}
		id, tasks, size = strconv.FormatUint(m.GetCheckpointId(), 10), strconv.Itoa(len(m.GetTasks())), strconv.FormatUint(total, 10)
		if ns := m.GetTimestampUnixNano(); ns != 0 {
			when = time.Unix(0, ns).UTC().Format(time.RFC3339)
		}
	}
	return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", displayName(info.Name), id, when, tasks, size, status)
}

// displayName returns a savepoint name as list and show print it: as it is,
// or Go-quoted when it holds white space or starts with a quote, so that a
// line still splits into its fields.
func displayName(name string) string {
	if name == "" || strings.ContainsFunc(name, unicode.IsSpace) || strings.HasPrefix(name, `"`) {
		return strconv.Quote(name)
	}
	return name
}

// showSavepoint prints the manifest of a savepoint.
func showSavepoint(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("show", showSavepointSynopsis)
	asJSON := f.fs.Bool("json", false, "print the manifest as protojson")
	name, err := f.parseName(args, stderr)
	if err != nil {
		return err
	}
	c, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeStore(c, &err)
	if err := completeSavepoint(ctx, c, name); err != nil {
		return err
	}
	m, err := c.ReadSavepointManifest(ctx, name)
	if err != nil {
		return goneSavepoint(ctx, c, name, err)
	}
	return writeManifest(stdout, m, *asJSON)
}

// verifySavepoint re-reads every object of a savepoint, printing a line
// for each.
func verifySavepoint(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("verify", verifySavepointSynopsis)
	name, err := f.parseName(args, stderr)
	if err != nil {
		return err
	}
	c, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeStore(c, &err)
	if err := completeSavepoint(ctx, c, name); err != nil {
		return err
	}
	m, err := c.ReadSavepointManifest(ctx, name)
	return verifyObjects(ctx, c, stdout, snapshots.SavepointManifestKey(c.Job(), name), m, err,
		fmt.Sprintf("savepoint %s of job %s", displayName(name), c.Job()))
}

// deleteSavepoint deletes a savepoint, complete or not, and says what it
// deleted.
func deleteSavepoint(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("delete", deleteSavepointSynopsis)
	force := f.fs.Bool("force", false, "delete even the job's origin, the savepoint recovery restores until the job completes a checkpoint of its own")
	name, err := f.parseName(args, stderr)
	if err != nil {
		return err
	}
	c, err := f.open(ctx)
	if err != nil {
		return err
	}
	defer closeStore(c, &err)
	complete, objects, err := lookupSavepoint(ctx, c, name)
	if err != nil {
		return err
	}
	release, err := holdJob(ctx, c, "savepoint "+displayName(name))
	if err != nil {
		return err
	}
	defer release(&err)
	if !*force {
		why, err := originNeeded(ctx, c, 0, name)
		if err != nil {
			return err
		}
		if err := refuseOrigin("savepoint "+displayName(name), c.Job(), why); err != nil {
			return err
		}
	}
	what := "incomplete savepoint"
	if complete {
		what = "savepoint"
	}
	detail := fmt.Sprintf("%d objects", objects)
	if complete {
		m, err := c.ReadSavepointManifest(ctx, name)
		switch {
		case err == nil:
			detail = fmt.Sprintf("checkpoint %d, %d tasks, %s", m.GetCheckpointId(), len(m.GetTasks()), detail)
		case objectProblem(ctx, err):
			detail = "its manifest is corrupt, " + detail
		default:
			return err
		}
	}
	if err := c.DeleteSavepoint(ctx, name); err != nil {
		return goneSavepoint(ctx, c, name, err)
	}
	_, err = fmt.Fprintf(stdout, "deleted %s %s of job %s (%s)\n", what, displayName(name), c.Job(), detail)
	return err
}

// lookupSavepoint reports whether savepoint name is complete and how many
// objects it has, and returns a not-found error when it has none.
func lookupSavepoint(ctx context.Context, c *snapshots.Checkpoints, name string) (complete bool, objects int, err error) {
	keys, err := c.Store().List(ctx, snapshots.SavepointPrefix(c.Job(), name))
	if err != nil {
		return false, 0, err
	}
	if len(keys) == 0 {
		return false, 0, notFound("job %s has no savepoint %s", c.Job(), displayName(name))
	}
	return slices.Contains(keys, snapshots.SavepointManifestKey(c.Job(), name)), len(keys), nil
}

// completeSavepoint returns nil when savepoint name is complete, a
// not-found error when it has no object, and a failure when it has no
// manifest.
func completeSavepoint(ctx context.Context, c *snapshots.Checkpoints, name string) error {
	complete, _, err := lookupSavepoint(ctx, c, name)
	if err == nil && !complete {
		err = fmt.Errorf("savepoint %s of job %s is incomplete: it has no manifest (it was aborted or is still being taken)",
			displayName(name), c.Job())
	}
	return err
}

// goneSavepoint turns err, about savepoint name, into a not-found error
// when the savepoint went away since it was looked up.
func goneSavepoint(ctx context.Context, c *snapshots.Checkpoints, name string, err error) error {
	if errors.Is(err, snapshots.ErrNotFound) && ctx.Err() == nil {
		return notFound("job %s has no savepoint %s any more", c.Job(), displayName(name))
	}
	return err
}
