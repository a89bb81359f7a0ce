package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
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
	return writeManifest(stdout, m, *asJSON)
}

// writeManifest prints m as a table or, with asJSON, as protojson.
func writeManifest(w io.Writer, m *messages.Manifest, asJSON bool) error {
	if !asJSON {
		return printManifest(w, m)
	}
	b, err := protojson.MarshalOptions{Multiline: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// readManifest reads the manifest of checkpoint id, which must exist and be
// complete.
func readManifest(ctx context.Context, c *snapshots.Checkpoints, id uint64) (*messages.Manifest, error) {
	complete, err := lookup(ctx, c, id)
	if err != nil {
		return nil, err
	}
	if !complete {
		return nil, incompleteErr(ctx, c, id)
	}
	m, err := c.ReadManifest(ctx, id)
	if errors.Is(err, snapshots.ErrNotFound) && ctx.Err() == nil {
		return nil, notFound("job %s has no checkpoint %d any more", c.Job(), id)
	}
	return m, err
}

// printManifest prints a checkpoint's or a savepoint's manifest: a header,
// the operators and their states when the manifest records them, and the
// tasks. A savepoint's always has every section and column, with "-" for
// what a manifest that predates them lacks; a checkpoint's shows operator
// ids and key-group ranges only when it records some.
func printManifest(w io.Writer, m *messages.Manifest) error {
	savepoint := m.GetSavepoint() != ""
	when := "-"
	if ns := m.GetTimestampUnixNano(); ns != 0 {
		when = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	z := sizesOf(m.GetJob(), m.GetTasks())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "job\t%s\n", m.GetJob())
	if savepoint {
		fmt.Fprintf(tw, "savepoint\t%s\n", displayName(m.GetSavepoint()))
	}
	fmt.Fprintf(tw, "checkpoint\t%d\n", m.GetCheckpointId())
	fmt.Fprintf(tw, "epoch\t%d\n", m.GetEpoch())
	fmt.Fprintf(tw, "time\t%s\n", when)
	fmt.Fprintf(tw, "fingerprint\t%s\n", orDash(m.GetTopologyFingerprint()))
	fmt.Fprintf(tw, "final\t%t\n", m.GetFinal())
	if savepoint || m.GetMaxParallelism() != 0 {
		fmt.Fprintf(tw, "max parallelism\t%s\n", countOrDash(m.GetMaxParallelism()))
	}
	if savepoint || len(m.GetOperators()) > 0 {
		fmt.Fprintf(tw, "operators\t%s\n", countOrDash(uint32(len(m.GetOperators()))))
	}
	fmt.Fprintf(tw, "tasks\t%d\n", len(m.GetTasks()))
	fmt.Fprintf(tw, "state\t%d bytes\n", z.state)
	inlined := "" // what the manifest holds of the stored bytes
	if z.inline > 0 {
		inlined = fmt.Sprintf(": %d bytes in the manifest", z.inlined)
	}
	fmt.Fprintf(tw, "stored\t%d bytes (%s, %s inline%s)\n", z.stored, plural(z.objects, "object"), plural(z.inline, "state"), inlined)
	if z.refGroups > 0 {
		fmt.Fprintf(tw, "references\t%s, %d bytes, in %s\n", plural(z.refGroups, "key group"), z.refBytes, idList(z.refCheckps))
	}
	var inFlight uint64
	for _, t := range m.GetTasks() {
		inFlight += t.GetInFlightBytes()
	}
	if inFlight > 0 {
		fmt.Fprintf(tw, "in flight\t%d bytes (unaligned: records stored as channel state)\n", inFlight)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printOperators(w, m.GetOperators()); err != nil {
		return err
	}
	if err := printTasks(w, m, savepoint); err != nil {
		return err
	}
	if inFlight == 0 {
		return nil
	}
	return printInFlight(w, m)
}

// printInFlight prints, after an empty line, the channel-state bytes of
// each task of an unaligned checkpoint that stored some.
func printInFlight(w io.Writer, m *messages.Manifest) error {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tIN-FLIGHT-BYTES")
	for _, t := range m.GetTasks() {
		if n := t.GetInFlightBytes(); n > 0 {
			fmt.Fprintf(tw, "%s\t%d\n", t.GetTaskId(), n)
		}
	}
	return tw.Flush()
}

// printOperators prints a table of the operators, then one of their state
// descriptors, each after an empty line; nothing for none.
func printOperators(w io.Writer, ops []*messages.OperatorEntry) error {
	if len(ops) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATOR-ID\tNAME\tKIND\tPARALLELISM\tKEYED\tSPLITS\tSTATES")
	states := 0
	for _, op := range ops {
		states += len(op.GetStates())
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%t\t%t\t%d\n", orDash(op.GetOperatorId()), orDash(op.GetName()), orDash(op.GetKind()),
			countOrDash(op.GetParallelism()), op.GetKeyed(), op.GetSplits(), len(op.GetStates()))
	}
	if err := tw.Flush(); err != nil || states == 0 {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATOR-ID\tSTATE\tKIND\tKEY-TYPE\tMAP-KEY-TYPE\tMAP-KEY-CODEC\tVALUE-TYPE\tVALUE-CODEC")
	for _, op := range ops {
		for _, d := range op.GetStates() {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", orDash(op.GetOperatorId()), orDash(d.GetName()), orDash(d.GetKind()),
				orDash(d.GetKeyType()), orDash(d.GetMapKeyType()), orDash(d.GetMapKeyCodec()), orDash(d.GetValueType()), orDash(d.GetValueCodec()))
		}
	}
	return tw.Flush()
}

// printTasks prints the table of the tasks' states after an empty line,
// with the operator id and key-group range columns when wide is set or any
// task records them. STATE is the whole state's size and STORED what the
// checkpoint wrote for it: its own object's size, or inline when it lies
// in the manifest. CRC32C is that of the state's own bytes, and REFERENCES
// counts the key groups it references in earlier checkpoints' objects.
func printTasks(w io.Writer, m *messages.Manifest, wide bool) error {
	for _, t := range m.GetTasks() {
		wide = wide || t.GetOperatorId() != "" || t.GetKeyGroupStart() != 0 || t.GetKeyGroupEnd() != 0
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if wide {
		fmt.Fprintln(tw, "TASK\tOPERATOR\tOPERATOR-ID\tSUBTASK\tKEY-GROUPS\tOBJECT\tSTATE\tSTORED\tCRC32C\tREFERENCES")
	} else {
		fmt.Fprintln(tw, "TASK\tOPERATOR\tSUBTASK\tOBJECT\tSTATE\tSTORED\tCRC32C\tREFERENCES")
	}
	for _, t := range m.GetTasks() {
		h := t.GetState()
		cols := fmt.Sprintf("%s\t%d\t%s\t%08x\t%s", h.GetKey(), snapshots.StateSize(h), storedOf(h), h.GetCrc32C(), refsOf(m.GetJob(), h))
		if wide {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\n", t.GetTaskId(), orDash(t.GetOperator()), orDash(t.GetOperatorId()),
				t.GetSubtask(), keyGroups(t), cols)
		} else {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.GetTaskId(), orDash(t.GetOperator()), t.GetSubtask(), cols)
		}
	}
	return tw.Flush()
}

// refsOf formats the key groups that h references in earlier checkpoints'
// objects, or "-" for none.
func refsOf(job string, h *messages.StateHandle) string {
	groups, bytes, ids := handleRefs(job, h)
	if groups == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (%d bytes) in %s", plural(groups, "key group"), bytes, idList(ids))
}

// keyGroups formats the key-group range of a task, [start,end), or "-"
// when the manifest records none.
func keyGroups(t *messages.TaskStateEntry) string {
	if t.GetKeyGroupStart() == 0 && t.GetKeyGroupEnd() == 0 {
		return "-"
	}
	return fmt.Sprintf("[%d,%d)", t.GetKeyGroupStart(), t.GetKeyGroupEnd())
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func countOrDash(n uint32) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatUint(uint64(n), 10)
}
