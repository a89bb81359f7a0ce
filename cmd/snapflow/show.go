package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/encoding/protojson"
)

const showSynopsis = "snapflow checkpoints show --store URL [--job NAME] [--json] ID"

// show prints the manifest of a checkpoint.
func show(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	f := newFlags("show", showSynopsis)
	asJSON := f.fs.Bool("json", false, "print the manifest as protojson")
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
	m, err := readManifest(ctx, c, id)
	if err != nil {
		return err
	}
	if *asJSON {
		b, err := protojson.MarshalOptions{Multiline: true}.Marshal(m)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", b)
		return err
	}
	return printManifest(stdout, m)
}

// readManifest reads the manifest of checkpoint id, which must exist and be
// complete.
func readManifest(ctx context.Context, c *snapshots.Checkpoints, id uint64) (*messages.Manifest, error) {
	complete, err := lookup(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !complete {
		return nil, incomplete(c, id)
	}
	m, err := c.ReadManifest(ctx, id)
	if errors.Is(err, snapshots.ErrNotFound) && ctx.Err() == nil {
		return nil, notFound("job %s has no checkpoint %d any more", c.Job(), id)
	}
	return m, err
}

func printManifest(w io.Writer, m *messages.Manifest) error {
	when := "-"
	if ns := m.GetTimestampUnixNano(); ns != 0 {
		when = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	var total uint64
	for _, t := range m.GetTasks() {
		total += t.GetState().GetSize()
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", m.GetJob())
	fmt.Fprintf(tw, "checkpoint\t%d\n", m.GetCheckpointId())
	fmt.Fprintf(tw, "epoch\t%d\n", m.GetEpoch())
	fmt.Fprintf(tw, "time\t%s\n", when)
	fmt.Fprintf(tw, "fingerprint\t%s\n", m.GetTopologyFingerprint())
	fmt.Fprintf(tw, "final\t%t\n", m.GetFinal())
	fmt.Fprintf(tw, "tasks\t%d (%d bytes)\n", len(m.GetTasks()), total)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tOPERATOR\tSUBTASK\tOBJECT\tSIZE\tCRC32C")
	for _, t := range m.GetTasks() {
		h := t.GetState()
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%08x\n", t.GetTaskId(), t.GetOperator(), t.GetSubtask(), h.GetKey(), h.GetSize(), h.GetCrc32C())
	}
	return tw.Flush()
}
