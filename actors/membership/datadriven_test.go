package membership

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScenarios runs the scenarios in testdata. Each command steps a table
// at time t (an offset from t0) and prints what it returned; rewrite the
// expected output with -rewrite and review it.
//
//	new [interval=] [timeout=]
//	register t= id= addr= slots=
//	heartbeat t= id=
//	expired t=
//	lose id= reason=
//	live                      (the live workers, slots and deadline)
//	place tasks=op:p,...      (places the plan on the live workers)
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var m *Members
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "new":
				m = New(Config{HeartbeatInterval: durArg(t, d, "interval"), HeartbeatTimeout: durArg(t, d, "timeout")})
				return ""
			case "register":
				var id, addr string
				var slots int
				d.ScanArgs(t, "id", &id)
				d.ScanArgs(t, "addr", &addr)
				d.ScanArgs(t, "slots", &slots)
				w, replaced, err := m.Register(at(durArg(t, d, "t")), id, addr, slots)
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return fmt.Sprintf("registered %s slots=%d seen=%v\n", w, w.Slots, w.LastSeen.Sub(t0)) + losses("replaced", replaced)
			case "heartbeat":
				var id string
				d.ScanArgs(t, "id", &id)
				return fmt.Sprintln(m.Heartbeat(at(durArg(t, d, "t")), id))
			case "expired":
				return losses("expired", m.Expired(at(durArg(t, d, "t"))))
			case "lose":
				var id, reason string
				d.ScanArgs(t, "id", &id)
				d.MaybeScanArgs(t, "reason", &reason)
				w, ok := m.Lose(id, reason)
				return fmt.Sprintf("was live: %v; %v\n", ok, w.Err())
			case "live":
				return live(m)
			case "place":
				var tasks string
				d.ScanArgs(t, "tasks", &tasks)
				p, err := Place(plan(strings.Split(tasks, ",")...), m.Live())
				if err != nil {
					return "error: " + err.Error() + "\n"
				}
				return strings.ReplaceAll(p.String(), "; ", "\n") + "\n"
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// losses prints workers declared lost, one a line.
func losses(what string, ws []Worker) string {
	var b strings.Builder
	for _, w := range ws {
		fmt.Fprintf(&b, "%s: %v\n", what, w.Err())
	}
	return b.String()
}

// live prints the live workers, the slots and the deadline.
func live(m *Members) string {
	var b strings.Builder
	for _, w := range m.Live() {
		fmt.Fprintf(&b, "%s slots=%d seen=%v\n", w, w.Slots, w.LastSeen.Sub(t0))
	}
	fmt.Fprintf(&b, "slots: %d\n", m.Slots())
	if d, ok := m.Deadline(); ok {
		fmt.Fprintf(&b, "deadline: %v\n", d.Sub(t0))
	} else {
		b.WriteString("deadline: none\n")
	}
	return b.String()
}

// durArg reads the duration argument key, zero when absent.
func durArg(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	t.Helper()
	var s string
	d.MaybeScanArgs(t, key, &s)
	if s == "" {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("%s=%s: %v", key, s, err)
	}
	return v
}
