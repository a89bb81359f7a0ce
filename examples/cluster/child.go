package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// child is a process of this binary started by the demo (or the tests),
// whose stdout and stderr lines are kept, in arrival order, for waitLine.
type child struct {
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	lines   []childLine
	changed chan struct{} // closed, and replaced, on every new line and at exit
	exited  chan struct{} // closed once the process has been reaped
	err     error         // cmd.Wait's result, once exited
}

// childLine is one line a child printed.
type childLine struct {
	stderr bool
	text   string
}

// errChildExited is returned by waitLine when the child exits first.
var errChildExited = errors.New("the process exited")

// startChild starts exe with args, and env added to this process's
// environment, in a process group of its own (so that killing it kills
// everything it started), killed when this process dies where the platform
// allows.
func startChild(name string, env []string, exe string, args ...string) (*child, error) {
	c := &child{name: name, cmd: exec.Command(exe, args...), changed: make(chan struct{}), exited: make(chan struct{})}
	c.cmd.SysProcAttr = childAttr()
	if len(env) > 0 {
		c.cmd.Env = append(os.Environ(), env...)
	}
	stdout, err := c.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := c.cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	var readers sync.WaitGroup
	for _, r := range []struct {
		rd     io.Reader
		stderr bool
	}{{stdout, false}, {stderr, true}} {
		readers.Go(func() {
			sc := bufio.NewScanner(r.rd)
			sc.Buffer(make([]byte, 64<<10), 4<<20)
			for sc.Scan() {
				c.add(childLine{stderr: r.stderr, text: sc.Text()})
			}
			_, _ = io.Copy(io.Discard, r.rd) // a line too long: drain the rest
		})
	}
	go func() {
		readers.Wait() // cmd.Wait closes the pipes: read them to the end first
		err := c.cmd.Wait()
		c.mu.Lock()
		c.err = err
		close(c.changed)
		c.changed = make(chan struct{})
		c.mu.Unlock()
		close(c.exited)
	}()
	return c, nil
}

func (c *child) add(l childLine) {
	c.mu.Lock()
	c.lines = append(c.lines, l)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// pid is the child's process id.
func (c *child) pid() int { return c.cmd.Process.Pid }

// waitLine returns the index and text of the first line at index from or
// later for which match is true. It returns errChildExited when the child
// exits without printing one, and ctx's cause when ctx ends first.
func (c *child) waitLine(ctx context.Context, from int, match func(string) bool) (int, string, error) {
	for {
		c.mu.Lock()
		for i := from; i < len(c.lines); i++ {
			if match(c.lines[i].text) {
				text := c.lines[i].text
				c.mu.Unlock()
				return i, text, nil
			}
		}
		from = len(c.lines)
		changed := c.changed
		c.mu.Unlock()
		select {
		case <-c.exited:
			c.mu.Lock()
			more := from < len(c.lines)
			c.mu.Unlock()
			if !more {
				return from, "", fmt.Errorf("%s: %w (%s) before printing the line awaited", c.name, errChildExited, c.exitStatus())
			}
		case <-changed:
		case <-ctx.Done():
			return from, "", fmt.Errorf("%s: waiting for a line: %w", c.name, context.Cause(ctx))
		}
	}
}

// wait waits for the child to exit and returns cmd.Wait's error (an
// *exec.ExitError for a non-zero exit), or ctx's cause.
func (c *child) wait(ctx context.Context) error {
	select {
	case <-c.exited:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("%s: waiting for the exit: %w", c.name, context.Cause(ctx))
	}
}

// exitStatus describes how the child ended, or "running".
func (c *child) exitStatus() string {
	select {
	case <-c.exited:
	default:
		return "running"
	}
	if c.err == nil {
		return "exit status 0"
	}
	return c.err.Error()
}

// exitCode is the child's exit code once it has exited (-1 when a signal
// ended it).
func (c *child) exitCode() int {
	<-c.exited
	return c.cmd.ProcessState.ExitCode()
}

// output returns every line the child printed, stderr lines marked, for a
// report.
func (c *child) output() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, l := range c.lines {
		if l.stderr {
			b.WriteString("! ")
		} else {
			b.WriteString("> ")
		}
		b.WriteString(l.text)
		b.WriteByte('\n')
	}
	return b.String()
}

// tail returns the last n lines the child printed.
func (c *child) tail(n int) []childLine {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]childLine(nil), c.lines[max(0, len(c.lines)-n):]...)
}

// linesFrom returns the lines printed from index from on.
func (c *child) linesFrom(from int) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.lines[min(from, len(c.lines)):] {
		out = append(out, l.text)
	}
	return out
}

// stop ends the child for good: SIGKILL to its process group, then reap.
func (c *child) stop() {
	select {
	case <-c.exited:
		return
	default:
	}
	killGroup(c.cmd.Process)
	<-c.exited
}

// signal sends sig to the child process alone.
func (c *child) signal(sig os.Signal) error {
	return c.cmd.Process.Signal(sig)
}
