package align

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scenarios in testdata/. Rewrite the expected output
// with: go test ./actors/align -run TestDataDriven -rewrite
//
// Commands:
//
//	new inputs=<k>
//	data in=<i> v=<value>
//	barrier in=<i> id=<n>
//	end in=<i>
//	abort id=<n>      (AbortCheckpoint)
//	state
//	steps             (one of the commands above per input line)
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var a *Aligner[string]
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				var k int
				d.ScanArgs(t, "inputs", &k)
				return newAligner(k, &a)
			}
			if a == nil {
				d.Fatalf(t, "%s before new", d.Cmd)
			}
			if d.Cmd == "steps" {
				var b strings.Builder
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					cmd, args, err := datadriven.ParseLine(line)
					if err != nil {
						d.Fatalf(t, "%v", err)
					}
					td := &datadriven.TestData{Pos: d.Pos, Cmd: cmd, CmdArgs: args}
					fmt.Fprintf(&b, "> %s\n", strings.TrimSpace(line))
					for _, l := range strings.SplitAfter(strings.TrimSuffix(runCommand(t, a, td), "\n"), "\n") {
						b.WriteString("  " + l)
					}
					b.WriteString("\n")
				}
				return b.String()
			}
			return runCommand(t, a, d)
		})
	})
}

func newAligner(k int, a **Aligner[string]) (res string) {
	defer func() {
		if r := recover(); r != nil {
			res = fmt.Sprintf("panic: %v\n", r)
		}
	}()
	*a = New[string](k)
	return "ok\n"
}

func runCommand(t *testing.T, a *Aligner[string], d *datadriven.TestData) (res string) {
	t.Helper()
	if d.Cmd == "state" {
		return formatState(a)
	}
	var out []Action[string]
	defer func() {
		if r := recover(); r != nil {
			res = fmt.Sprintf("panic: %v\n", r)
			return
		}
		if err := checkInvariants(a); err != nil {
			t.Fatalf("%s: %s: %v", d.Pos, d.FullCmd(), err)
		}
		res = formatActions(out)
	}()
	var in int
	var id uint64
	switch d.Cmd {
	case "data":
		var v string
		d.ScanArgs(t, "in", &in)
		d.ScanArgs(t, "v", &v)
		out = a.Step(Event[string]{Kind: Data, Input: in, Data: v}, out)
	case "barrier":
		d.ScanArgs(t, "in", &in)
		d.ScanArgs(t, "id", &id)
		out = a.Step(Event[string]{Kind: Barrier, Input: in, Checkpoint: id}, out)
	case "end":
		d.ScanArgs(t, "in", &in)
		out = a.Step(Event[string]{Kind: End, Input: in}, out)
	case "abort":
		d.ScanArgs(t, "id", &id)
		out = a.AbortCheckpoint(id, out)
	default:
		d.Fatalf(t, "unknown command %q", d.Cmd)
	}
	return ""
}

func formatActions(out []Action[string]) string {
	if len(out) == 0 {
		return "(no actions)\n"
	}
	var b strings.Builder
	for _, act := range out {
		b.WriteString(act.String())
		if act.Kind == Process {
			fmt.Fprintf(&b, " v=%s", act.Data)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func formatState[M any](a *Aligner[M]) string {
	var b strings.Builder
	if id, ok := a.Aligning(); ok {
		fmt.Fprintf(&b, "aligning: %d\n", id)
	} else {
		b.WriteString("aligning: none\n")
	}
	fmt.Fprintf(&b, "last-snapshot: %d\n", a.LastSnapshot())
	fmt.Fprintf(&b, "buffered: %d\n", a.Buffered())
	for i := range a.Inputs() {
		status := "open"
		switch {
		case a.Blocked(i):
			status = "blocked"
		case a.Ended(i):
			status = "ended"
		}
		fmt.Fprintf(&b, "input %d: %s", i, status)
		if n := a.BufferedOn(i); n > 0 {
			fmt.Fprintf(&b, ", buffered %d", n)
		}
		b.WriteString("\n")
	}
	return b.String()
}
