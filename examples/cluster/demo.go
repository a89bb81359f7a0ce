package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// demoWorkers is the number of worker processes the demo starts.
const demoWorkers = 3

// demoDeadline bounds a whole demo run.
const demoDeadline = 5 * time.Minute

// runDemo starts a coordinator and demoWorkers workers as child processes of
// this binary on loopback, with a fresh temporary directory as their shared
// store, SIGKILLs a worker once a checkpoint has completed, and tells the
// story from the coordinator's event lines. Every child is stopped and
// reaped before it returns, whatever happens.
func runDemo(ctx context.Context, o options, stdout, stderr io.Writer) (err error) {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find this program: %w", err)
	}
	dir, err := os.MkdirTemp("", "snapflow-cluster-demo-")
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeoutCause(ctx, demoDeadline, fmt.Errorf("the demo took longer than %v", demoDeadline))
	defer cancel()
	d := &demo{o: o, exe: exe, out: stdout, start: time.Now(), store: filepath.Join(dir, "store"), hold: filepath.Join(dir, "release")}
	defer func() {
		d.stopAll()
		if err != nil || o.verbose {
			d.dumpLogs(stderr, err == nil)
		}
		if err != nil {
			if errors.Is(err, errSignalled) {
				err = fmt.Errorf("interrupted; every child process was stopped: %w", err)
			}
		}
	}()
	fmt.Fprintf(stdout, "snapflow cluster demo: a coordinator and %d workers, each a process of this program, on loopback\n", demoWorkers)
	fmt.Fprintf(stdout, "job %q: %d records from source (%d tasks, %v records/s) keyed over %d keys into sum (%d tasks, a count and a sum per key in keyed state) into sink (1 task)\n",
		jobName, o.job.records, sourceParallelism, o.job.rate, o.job.keys, sumParallelism)
	fmt.Fprintf(stdout, "store: %s (a temporary directory every process shares, removed at the end)\n", d.store)
	if err := d.startProcesses(ctx); err != nil {
		return err
	}
	return d.tell(ctx)
}

// demo is the state of a demo run.
type demo struct {
	o                  options
	exe                string
	out                io.Writer
	start              time.Time
	store, hold        string
	coordinator        *child
	workers            []*child
	addrs              []string // the workers' addresses, as workers[i]
	placement          placement
	victim             int // the worker killed (-1: none yet)
	checkpoints        int
	afterKill          int
	lastCheckpointLine string
}

func (d *demo) jobArgs() []string {
	return []string{
		"-records", strconv.FormatInt(d.o.job.records, 10), "-keys", strconv.FormatInt(d.o.job.keys, 10),
		"-rate", strconv.FormatFloat(d.o.job.rate, 'g', -1, 64), "-record-bytes", strconv.Itoa(d.o.job.recordBytes),
		"-sink-delay", d.o.job.sinkDelay.String(), "-hold", d.hold,
	}
}

// coordinatorArgs are the coordinator child's arguments; it alone gets
// -http.
func (d *demo) coordinatorArgs() []string {
	args := append([]string{"-role", "coordinator", "-listen", "127.0.0.1:0", "-store", d.store,
		"-workers", strconv.Itoa(demoWorkers), "-interval", d.o.interval.String(), "-v=" + strconv.FormatBool(d.o.verbose)}, d.jobArgs()...)
	if d.o.http != "" {
		args = append(args, "-http", d.o.http)
	}
	return args
}

// startProcesses starts the coordinator, reads its address, and starts the
// workers.
func (d *demo) startProcesses(ctx context.Context) error {
	// The children share a secret of their own, unless the environment
	// gives one.
	var env []string
	if os.Getenv(envSecret) == "" {
		env = []string{envSecret + "=" + newSecret()}
	}
	c, err := startChild("coordinator", env, d.exe, d.coordinatorArgs()...)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	d.coordinator = c
	addr, err := listeningAddr(ctx, c)
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintf(d.out, "  coordinator  pid %-7d listening on %s\n", c.pid(), addr)
	if d.o.http != "" {
		// The coordinator prints it before it listens.
		_, line, err := c.waitLine(ctx, 0, func(l string) bool { return strings.HasPrefix(l, dashboardPrefix) })
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		fmt.Fprintf(d.out, "  dashboard    %s\n", strings.TrimPrefix(line, dashboardPrefix))
	}
	d.victim = -1
	for i := range demoWorkers {
		args := append([]string{"-role", "worker", "-join", addr, "-listen", "127.0.0.1:0", "-v=" + strconv.FormatBool(d.o.verbose)}, d.jobArgs()...)
		w, err := startChild(fmt.Sprintf("worker %d", i+1), env, d.exe, args...)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		d.workers = append(d.workers, w)
	}
	for i, w := range d.workers {
		addr, err := listeningAddr(ctx, w)
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		d.addrs = append(d.addrs, addr)
		fmt.Fprintf(d.out, "  worker %d     pid %-7d listening on %s\n", i+1, w.pid(), addr)
	}
	return nil
}

// listeningAddr waits for c's "listening HOST:PORT" line.
func listeningAddr(ctx context.Context, c *child) (string, error) {
	_, line, err := c.waitLine(ctx, 0, func(l string) bool { return strings.HasPrefix(l, listeningPrefix) })
	if err != nil {
		return "", err
	}
	return strings.TrimPrefix(line, listeningPrefix), nil
}

// tell follows the coordinator's lines to its end and tells the story.
func (d *demo) tell(ctx context.Context) error {
	for next := 0; ; {
		i, line, err := d.coordinator.waitLine(ctx, next, func(string) bool { return true })
		next = i + 1
		if err != nil {
			if errors.Is(err, errChildExited) {
				return fmt.Errorf("demo: the coordinator ended (%s) before the end of the story", d.coordinator.exitStatus())
			}
			return err
		}
		if line == okLine {
			return d.finish(ctx)
		}
		ev, isEvent, err := parseEvent(line)
		switch {
		case err != nil:
			return fmt.Errorf("demo: %w", err)
		case isEvent:
			if err := d.event(ev); err != nil {
				return err
			}
		case strings.HasPrefix(line, resultPrefix):
			ev, _, _ := parseEvent(eventPrefix + line)
			d.say("the coordinator read the final checkpoint %s back from the store: every one of the %s keys holds the count and the sum of the closed form (%s records)",
				ev.get("checkpoint"), ev.get("keys"), ev.get("records"))
		}
	}
}

// say prints one line of the story, stamped with the time since the start.
func (d *demo) say(format string, args ...any) {
	fmt.Fprintf(d.out, "%8v  %s\n", time.Since(d.start).Round(time.Millisecond), fmt.Sprintf(format, args...))
}

// workerName names the worker at addr ("worker 2"), or returns node.
func (d *demo) workerName(node string) string {
	for i, a := range d.addrs {
		if a == nodeAddr(node) {
			return fmt.Sprintf("worker %d", i+1)
		}
	}
	return node
}

func (d *demo) event(ev eventLine) error {
	switch ev.kind {
	case "node-joined":
		d.say("%s joined as %s", d.workerName(ev.get("node")), ev.get("node"))
	case "placed":
		p, err := parsePlacement(ev.get("placement"))
		if err != nil {
			return fmt.Errorf("demo: %w", err)
		}
		d.placement = p
		d.say("epoch %s: the coordinator places the tasks%s:", ev.get("epoch"), restoring(ev.uint("checkpoint")))
		for _, w := range p {
			fmt.Fprintf(d.out, "%10s  %-9s %s\n", "", d.workerName(w.node)+":", strings.Join(w.tasks, ", "))
		}
	case "running":
		d.say("running in epoch %s%s", ev.get("epoch"), restoring(ev.uint("checkpoint")))
	case "checkpoint-completed":
		return d.checkpoint(ev)
	case "checkpoint-aborted":
		d.say("checkpoint %s aborted: %s", ev.get("checkpoint"), ev.get("err"))
	case "node-lost":
		d.say("%s lost: %s", d.workerName(ev.get("node")), ev.get("err"))
	case "task-failed":
		if ev.get("node") != "" || ev.get("task") == "" { // every task of a lost worker
			d.say("epoch %s fails: %s", ev.get("epoch"), ev.get("err"))
			break
		}
		d.say("task %s failed in epoch %s: %s", ev.get("task"), ev.get("epoch"), ev.get("err"))
	case "restoring":
		d.say("rolling back to checkpoint %s in epoch %s: every task restores its state from the store, the sources rewind", ev.get("checkpoint"), ev.get("epoch"))
	case "finished":
		if d.lastCheckpointLine != "" {
			d.say("%s", d.lastCheckpointLine)
		}
		d.say("every source ended; the job finished after %d checkpoints", d.checkpoints)
	case "failed":
		d.say("the job failed: %s", ev.get("err"))
	}
	return nil
}

func restoring(checkpoint uint64) string {
	if checkpoint == 0 {
		return ", from the beginning"
	}
	return fmt.Sprintf(", restoring checkpoint %d", checkpoint)
}

// checkpoint tells the first checkpoints, kills a worker after the first
// one, and counts the others.
func (d *demo) checkpoint(ev eventLine) error {
	d.checkpoints++
	line := fmt.Sprintf("checkpoint %s complete (%s bytes of state, in %s)", ev.get("checkpoint"), ev.get("bytes"), ev.get("duration"))
	if ev.get("final") == "true" {
		d.lastCheckpointLine = fmt.Sprintf("final checkpoint %s complete (%s bytes of state)", ev.get("checkpoint"), ev.get("bytes"))
		return nil
	}
	if d.victim >= 0 {
		d.afterKill++
		if d.afterKill == 1 {
			d.say("%s; further checkpoints are counted at the end", line)
		}
		return nil
	}
	d.say("%s", line)
	return d.kill()
}

// kill SIGKILLs the worker running the most tasks, then lets the sources go
// on past their halfway hold.
func (d *demo) kill() error {
	d.victim = 0
	for i := range d.workers {
		if len(d.placement.tasksOn(d.addrs[i])) > len(d.placement.tasksOn(d.addrs[d.victim])) {
			d.victim = i
		}
	}
	w := d.workers[d.victim]
	d.say("SIGKILL %s (pid %d), which runs %s", w.name, w.pid(), strings.Join(d.placement.tasksOn(d.addrs[d.victim]), ", "))
	if err := w.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("demo: kill %s: %w", w.name, err)
	}
	if err := os.WriteFile(d.hold, nil, 0o600); err != nil {
		return fmt.Errorf("demo: release the sources: %w", err)
	}
	return nil
}

// finish waits for every process to exit and checks how each ended.
func (d *demo) finish(ctx context.Context) error {
	if err := d.coordinator.wait(ctx); err != nil {
		return fmt.Errorf("demo: the coordinator printed %q but then: %w", okLine, err)
	}
	for i, w := range d.workers {
		err := w.wait(ctx)
		switch {
		case i == d.victim:
		case err != nil:
			return fmt.Errorf("demo: %s: %w", w.name, err)
		}
	}
	fmt.Fprintf(d.out, "every process has exited (worker %d by SIGKILL, the others when the coordinator ended the job)\n", d.victim+1)
	fmt.Fprintln(d.out, okLine)
	return nil
}

// stopAll stops every child still running: SIGTERM, then SIGKILL after a
// grace period. Every child is reaped when it returns.
func (d *demo) stopAll() {
	all := append([]*child{d.coordinator}, d.workers...)
	for _, c := range all {
		if c != nil && c.exitStatus() == "running" {
			_ = c.signal(syscall.SIGTERM)
		}
	}
	grace, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, c := range all {
		if c == nil {
			continue
		}
		if c.wait(grace) != nil && c.exitStatus() == "running" {
			c.stop()
		}
	}
}

// dumpLogs prints the last lines of every child after a failure, or all
// of them (-v).
func (d *demo) dumpLogs(w io.Writer, all bool) {
	n, what := 40, "last lines"
	if all {
		n, what = 1<<30, "output"
	}
	for _, c := range append([]*child{d.coordinator}, d.workers...) {
		if c == nil {
			continue
		}
		fmt.Fprintf(w, "--- %s (%s), %s:\n", c.name, c.exitStatus(), what)
		for _, l := range c.tail(n) {
			fmt.Fprintf(w, "    %s\n", l.text)
		}
	}
}
