package main

// The lines the coordinator and the workers print on stdout, one per line,
// for people and for programs (the demo and the tests read them):
//
//	dashboard: URL
//	    with -http, the coordinator serves the job's dashboard, /metrics
//	    and JSON API at URL; it prints it before it listens.
//	listening HOST:PORT
//	    the process listens there; a coordinator prints it first (after
//	    the dashboard line), and workers join at that address.
//	event KIND key=value ...
//	    a job event (coordinator only). KIND is actors.EventKind's name:
//	    node-joined, placed, running, checkpoint-completed,
//	    checkpoint-aborted, task-failed, node-lost, restoring, finished,
//	    failed. The keys, each present only where it means something:
//	    epoch, checkpoint (the checkpoint completed, aborted or restored;
//	    0 is the start), final (true for the final checkpoint), bytes and
//	    duration (of a completed checkpoint), task, node
//	    ("worker-id@host:port"), placement ("task,task ->
//	    worker-id@host:port; ..."), err. A value with a space, a quote or
//	    an equals sign is a Go quoted string.
//	result keys=K records=N checkpoint=C
//	    the coordinator read the final checkpoint C back from the store and
//	    compared every key's count and sum with the closed form.
//	sink parts=P records=N
//	    with -sink-dir: the coordinator read the P committed part files
//	    of the sink and found every record's line in them once (see
//	    checkSink).
//	exactly-once: OK
//	    the last line of a successful coordinator (and of the demo).
//
// A failing coordinator prints "exactly-once: FAILED: ..." or its error on
// stderr. Logs (log/slog text) go to stderr.

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snapflow/snapflow/actors"
)

// Line prefixes.
const (
	dashboardPrefix = "dashboard: "
	listeningPrefix = "listening "
	eventPrefix     = "event "
	resultPrefix    = "result "
	sinkPrefix      = "sink "
	okLine          = "exactly-once: OK"
)

// formatEvent renders e as an event line.
func formatEvent(e actors.Event) string {
	var b strings.Builder
	b.WriteString(eventPrefix)
	b.WriteString(e.Kind.String())
	field := func(k, v string) {
		b.WriteByte(' ')
		b.WriteString(k)
		b.WriteByte('=')
		if v == "" || strings.ContainsAny(v, " \"=\t\n\\") {
			v = strconv.Quote(v)
		}
		b.WriteString(v)
	}
	field("epoch", strconv.FormatUint(e.Epoch, 10))
	switch e.Kind {
	case actors.EventRunning, actors.EventPlaced, actors.EventRestoring, actors.EventCheckpointAborted:
		field("checkpoint", strconv.FormatUint(e.Checkpoint, 10))
	case actors.EventCheckpointCompleted:
		field("checkpoint", strconv.FormatUint(e.Checkpoint, 10))
		field("final", strconv.FormatBool(e.Final))
		field("bytes", strconv.FormatUint(e.Bytes, 10))
		if e.InFlight > 0 {
			field("in_flight", strconv.FormatUint(e.InFlight, 10))
		}
		field("duration", e.Duration.Round(time.Microsecond).String())
	}
	if e.Task != "" {
		field("task", e.Task)
	}
	if e.Node != "" {
		field("node", e.Node)
	}
	if e.Placement != "" {
		field("placement", e.Placement)
	}
	if e.Err != nil {
		field("err", e.Err.Error())
	}
	return b.String()
}

// eventLine is a parsed event line.
type eventLine struct {
	kind   string
	fields map[string]string
}

// get returns the value of key ("" when absent).
func (e eventLine) get(key string) string { return e.fields[key] }

// uint returns the value of key as a number (0 when absent or malformed).
func (e eventLine) uint(key string) uint64 {
	n, _ := strconv.ParseUint(e.fields[key], 10, 64)
	return n
}

// parseEvent parses an event line; ok is false for any other line.
func parseEvent(line string) (ev eventLine, ok bool, err error) {
	rest, found := strings.CutPrefix(line, eventPrefix)
	if !found {
		return eventLine{}, false, nil
	}
	kind, rest, _ := strings.Cut(rest, " ")
	ev = eventLine{kind: kind, fields: map[string]string{}}
	for rest != "" {
		key, after, found := strings.Cut(rest, "=")
		if !found || key == "" || strings.Contains(key, " ") {
			return ev, true, fmt.Errorf("event line %q: want key=value at %q", line, rest)
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return ev, true, fmt.Errorf("event line %q: value of %s: %w", line, key, err)
			}
			val, _ = strconv.Unquote(q)
			after = after[len(q):]
		} else {
			val, after, _ = strings.Cut(after, " ")
			after = " " + after
		}
		ev.fields[key] = val
		rest = strings.TrimPrefix(after, " ")
	}
	return ev, true, nil
}

// placement is a parsed placement: the tasks of each worker, in the order
// of the placement string.
type placement []placedWorker

type placedWorker struct {
	node  string // worker-id@host:port
	tasks []string
}

// parsePlacement parses "task,task -> worker; ...".
func parsePlacement(s string) (placement, error) {
	var p placement
	for part := range strings.SplitSeq(s, "; ") {
		tasks, node, ok := strings.Cut(part, " -> ")
		if !ok || node == "" || tasks == "" {
			return nil, fmt.Errorf("placement %q: want \"task,task -> worker; ...\" at %q", s, part)
		}
		p = append(p, placedWorker{node: node, tasks: strings.Split(tasks, ",")})
	}
	return p, nil
}

// tasksOn returns the tasks placed on the worker listening at addr.
func (p placement) tasksOn(addr string) []string {
	for _, w := range p {
		if nodeAddr(w.node) == addr {
			return w.tasks
		}
	}
	return nil
}

// nodeAddr is the address part of "worker-id@host:port".
func nodeAddr(node string) string {
	_, addr, _ := strings.Cut(node, "@")
	return addr
}
