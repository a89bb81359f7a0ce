package coordinator

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestScenarios runs the scenarios in testdata. Each command steps the
// coordinator at time t (an offset from t0) and prints the actions; rewrite
// the expected output with -rewrite and review it.
//
//	new tasks=a,b [interval=] [timeout=] [minpause=] [tolerable=] [next=]
//	tick t=  |  finish t=  |  reset t=
//	request t= req=
//	ack t= id= task=  |  decline t= id= task= reason=
//	manifest t= id= [err=]
//	state
func TestScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Coordinator
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "new" {
				c = newFromArgs(t, d)
				return ""
			}
			if d.Cmd == "state" {
				return state(c)
			}
			acts := step(t, c, d)
			if len(acts) == 0 {
				return ""
			}
			return format(acts) + "\n"
		})
	})
}

func newFromArgs(t *testing.T, d *datadriven.TestData) *Coordinator {
	var cfg Config
	var tasks string
	next := uint64(1)
	d.MaybeScanArgs(t, "tasks", &tasks)
	cfg.Interval = durArg(t, d, "interval")
	cfg.Timeout = durArg(t, d, "timeout")
	cfg.MinPause = durArg(t, d, "minpause")
	d.MaybeScanArgs(t, "tolerable", &cfg.TolerableFailures)
	d.MaybeScanArgs(t, "next", &next)
	var ids []string
	if tasks != "" {
		ids = strings.Split(tasks, ",")
	}
	return New(cfg, ids, next)
}

func step(t *testing.T, c *Coordinator, d *datadriven.TestData) []Action {
	now := at(durArg(t, d, "t"))
	var id, req uint64
	var task, reason, errText string
	d.MaybeScanArgs(t, "id", &id)
	d.MaybeScanArgs(t, "req", &req)
	d.MaybeScanArgs(t, "task", &task)
	d.MaybeScanArgs(t, "reason", &reason)
	d.MaybeScanArgs(t, "err", &errText)
	switch d.Cmd {
	case "tick":
		return c.Tick(now)
	case "finish":
		return c.Finish(now)
	case "reset":
		return c.Reset(now)
	case "request":
		return c.RequestCheckpoint(now, req)
	case "ack":
		return c.Ack(now, ack(id, task))
	case "decline":
		return c.Decline(now, decline(id, task, reason))
	case "manifest":
		var err error
		if errText != "" {
			err = errors.New(errText)
		}
		return c.ManifestWritten(now, id, err)
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return nil
}

func durArg(t *testing.T, d *datadriven.TestData, key string) time.Duration {
	var s string
	if !d.MaybeScanArgs(t, key, &s) {
		return 0
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		d.Fatalf(t, "%s: %v", key, err)
	}
	return v
}

func state(c *Coordinator) string {
	var b strings.Builder
	if id, ok := c.Pending(); ok {
		fmt.Fprintf(&b, "pending: %d\n", id)
	} else {
		b.WriteString("pending: none\n")
	}
	if next, ok := c.NextTrigger(); ok {
		fmt.Fprintf(&b, "next trigger: t=%v\n", next.Sub(t0))
	} else {
		b.WriteString("next trigger: none\n")
	}
	fmt.Fprintf(&b, "stats: %+v\n", c.Stats())
	return b.String()
}
