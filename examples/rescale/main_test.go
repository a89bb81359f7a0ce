package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/internal/leaktest"
	"github.com/snapflow/snapflow/internal/racedetect"
)

// exe is the example, built once for the process tests (with the race
// detector when the tests run with it).
var exe string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "snapflow-rescale-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "rescale tests:", err)
		os.Exit(1)
	}
	exe = filepath.Join(dir, "rescale")
	args := []string{"build", "-o", exe}
	if racedetect.Enabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "rescale tests: go", args, ":", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := leaktest.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "leaktest: goroutines left after a successful run:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// goTool is the go command running the tests: go test puts its GOROOT's
// bin first on the PATH of test binaries.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// waitFor bounds every wait for a line or an exit. It is generous, for a
// loaded machine: the tests assert what the processes print, never how
// fast, and a wait that runs out fails the test with their output.
const waitFor = 5 * time.Minute

// proc is a process of the example. Its output is kept, line by line, for
// awaitLine; it is killed when the test ends, and a failing test logs what
// it printed.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	stdout  []string
	stderr  []string
	changed chan struct{} // closed and replaced on every line and at the exit
	exited  chan struct{}
}

// startProc starts the example with args, and env added to the
// environment.
func startProc(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cmd: exec.Command(exe, args...), changed: make(chan struct{}), exited: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var readers sync.WaitGroup
	readers.Go(func() { p.read(stdout, &p.stdout) })
	readers.Go(func() { p.read(stderr, &p.stderr) })
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		_ = p.cmd.Wait()
		p.mu.Lock()
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("--- %s (%s) %s\n> %s\n! %s", name, p.cmd.ProcessState, strings.Join(args, " "),
				strings.Join(p.lines(false), "\n> "), strings.Join(p.lines(true), "\n! "))
		}
	})
	return p
}

func (p *proc) read(r io.Reader, into *[]string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		p.mu.Lock()
		*into = append(*into, sc.Text())
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	_, _ = io.Copy(io.Discard, r)
}

// lines returns what the process printed on stdout, or on stderr.
func (p *proc) lines(stderr bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stderr {
		return append([]string(nil), p.stderr...)
	}
	return append([]string(nil), p.stdout...)
}

// awaitLine waits for a line on stdout that matches re and returns its
// submatches; it fails the test when the process exits first.
func (p *proc) awaitLine(re *regexp.Regexp) []string {
	p.t.Helper()
	timer := time.NewTimer(waitFor)
	defer timer.Stop()
	seen := 0
	for {
		p.mu.Lock()
		lines, changed := p.stdout[seen:], p.changed
		seen = len(p.stdout)
		p.mu.Unlock()
		for _, l := range lines {
			if m := re.FindStringSubmatch(l); m != nil {
				return m
			}
		}
		select {
		case <-changed:
		case <-p.exited:
			p.mu.Lock()
			more := seen < len(p.stdout)
			p.mu.Unlock()
			if !more {
				p.t.Fatalf("%s exited (%s) without printing a line matching %s", p.name, p.cmd.ProcessState, re)
			}
		case <-timer.C:
			p.t.Fatalf("%s printed no line matching %s within %v", p.name, re, waitFor)
		}
	}
}

// exit waits for the process to exit and returns its exit code.
func (p *proc) exit() int {
	p.t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(waitFor):
		p.t.Fatalf("%s did not exit within %v", p.name, waitFor)
		return -1
	}
}

// kill sends SIGKILL, unless the process has exited, and reaps it.
func (p *proc) kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// runProc runs the example to its exit and returns the exit code.
func runProc(t *testing.T, name string, env []string, args ...string) (*proc, int) {
	t.Helper()
	p := startProc(t, name, env, args...)
	return p, p.exit()
}

// mustSucceed runs the example and fails the test unless it exits 0.
func mustSucceed(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	p, code := runProc(t, name, env, args...)
	if code != 0 {
		t.Fatalf("%s exited %d, want 0", name, code)
	}
	return p
}

// find returns the submatches of the first stdout line of p matching re,
// failing the test when there is none.
func (p *proc) find(re *regexp.Regexp) []string {
	p.t.Helper()
	for _, l := range p.lines(false) {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	p.t.Fatalf("%s printed no line matching %s", p.name, re)
	return nil
}
