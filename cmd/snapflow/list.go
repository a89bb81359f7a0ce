package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/snapflow/snapflow/snapshots"
)

const listSynopsis = "snapflow checkpoints list --store URL [--job NAME]"

// list prints one line per checkpoint: ID TIME TASKS STATE STORED STATUS
// NOTE.
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
	s, err := surveyCheckpoints(ctx, c)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	if len(s.infos) > 0 {
		fmt.Fprintln(tw, "ID\tTIME\tTASKS\tSTATE\tSTORED\tSTATUS\tNOTE")
	}
	for _, info := range s.infos {
		fmt.Fprintln(tw, s.listLine(c.Job(), info))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, info := range s.infos {
		if info.Err != nil {
			fmt.Fprintf(stderr, "snapflow: warning: checkpoint %d: %v\n", info.ID, info.Err)
		}
	}
	return nil
}

// listLine formats info as tab-separated columns: ID TIME TASKS STATE
// STORED STATUS and a note, which may be empty.
//
// A complete checkpoint's STATE sums its tasks' whole states and STORED
// what the checkpoint wrote for them (an incremental state references the
// rest; an inline state's bytes count, in the manifest); its note names the
// checkpoints it references and those that reference it. A checkpoint
// without a manifest whose every object a complete checkpoint references
// was deleted while incremental checkpoints still build on it: it is
// "kept", not incomplete.
func (s *survey) listLine(job string, info snapshots.Info) string {
	when, tasks, state, stored, status := "-", strconv.Itoa(info.Tasks), "-", "-", "complete"
	var notes []string
	keys := s.keys[info.ID]
	by, n := s.referencedBy(info.ID, keys)
	m := s.manifests[info.ID]
	switch {
	case !info.Complete:
		tasks, status = strconv.Itoa(info.Objects), "incomplete"
		switch {
		case n > 0 && n == len(keys):
			status = "kept"
			notes = append(notes, "a deleted checkpoint's objects, referenced by "+idList(by))
		case n > 0:
			notes = append(notes, fmt.Sprintf("%d of %s referenced by %s", n, plural(len(keys), "object"), idList(by)))
		}
	case info.Err != nil:
		tasks, status = "-", "corrupt"
	case m == nil: // deleted or damaged since the listing
		status = "deleted"
	default:
		z := sizesOf(job, m.GetTasks())
		state, stored = strconv.FormatUint(z.state, 10), strconv.FormatUint(z.stored, 10)
		if len(z.refCheckps) > 0 {
			notes = append(notes, "references "+idList(z.refCheckps))
		}
		if len(by) > 0 {
			notes = append(notes, "referenced by "+idList(by))
		}
		if z.inline > 0 {
			notes = append(notes, fmt.Sprintf("%d of %d states inline (%d bytes in the manifest)", z.inline, len(m.GetTasks()), z.inlined))
		}
	}
	if !info.Time.IsZero() {
		when = info.Time.UTC().Format(time.RFC3339)
	}
	line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s", info.ID, when, tasks, state, stored, status)
	if len(notes) > 0 {
		line += "\t" + strings.Join(notes, "; ")
	}
	return line
}
