package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/snapflow/snapflow/snapshots"
)

const listSynopsis = "snapflow checkpoints list --store URL [--job NAME]"

// list prints one line per checkpoint: ID TIME TASKS BYTES STATUS.
func list(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("list", listSynopsis)
	if _, err := f.parse(args, stderr, false); err != nil {
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
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	for _, info := range infos {
		fmt.Fprintln(tw, listLine(info))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, info := range infos {
		if info.Err != nil {
			fmt.Fprintf(stderr, "snapflow: warning: checkpoint %d: %v\n", info.ID, info.Err)
		}
	}
	return nil
}

// listLine formats info as tab-separated columns.
func listLine(info snapshots.Info) string {
	status, when, tasks, size := "complete", "-", strconv.Itoa(info.Tasks), strconv.FormatInt(info.Bytes, 10)
	switch {
	case !info.Complete:
		status, tasks, size = "incomplete", strconv.Itoa(info.Objects), "-"
	case info.Err != nil:
		status, tasks, size = "corrupt", "-", "-"
	}
	if !info.Time.IsZero() {
		when = info.Time.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%s", info.ID, when, tasks, size, status)
}
