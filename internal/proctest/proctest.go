package proctest

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

// WaitFor bounds every wait for a line or an exit; a wait that runs out
// fails the test with what the process printed.
const WaitFor = 5 * time.Minute

// Main builds the package in the current directory as name, runs the tests
// with the binary's path in *exe, checks that a successful run left no
// goroutine behind, and exits.
func Main(m *testing.M, name string, exe *string) {
	dir, err := os.MkdirTemp("", "snapflow-"+name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, name+" tests:", err)
		os.Exit(1)
	}
	*exe = filepath.Join(dir, name)
	args := []string{"build", "-o", *exe}
	if racedetect.Enabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, name+" tests: go", args, ":", err)
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

// Proc is a process of an example.
type Proc struct {
	T    *testing.T
	Name string
	Cmd  *exec.Cmd

	mu      sync.Mutex
	stdout  []string
	stderr  []string
	changed chan struct{} // closed and replaced on every line and at the exit
	exited  chan struct{}
}

// Start starts exe with args, and env added to the environment.
func Start(t *testing.T, exe, name string, env []string, args ...string) *Proc {
	t.Helper()
	p := &Proc{T: t, Name: name, Cmd: exec.Command(exe, args...), changed: make(chan struct{}), exited: make(chan struct{})}
	p.Cmd.Env = append(os.Environ(), env...)
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.Cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	var readers sync.WaitGroup
	readers.Go(func() { p.read(stdout, &p.stdout) })
	readers.Go(func() { p.read(stderr, &p.stderr) })
	go func() {
		readers.Wait() // Wait closes the pipes: read them to the end first
		_ = p.Cmd.Wait()
		p.mu.Lock()
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("--- %s (%s) %s\n> %s\n! %s", name, p.Cmd.ProcessState, strings.Join(args, " "),
				strings.Join(p.Lines(false), "\n> "), strings.Join(p.Lines(true), "\n! "))
		}
	})
	return p
}

func (p *Proc) read(r io.Reader, into *[]string) {
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

// Lines returns what the process printed on stdout, or on stderr.
func (p *Proc) Lines(stderr bool) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if stderr {
		return append([]string(nil), p.stderr...)
	}
	return append([]string(nil), p.stdout...)
}

// AwaitLine waits for a line on stdout that matches re and returns its
// submatches; it fails the test when the process exits first.
func (p *Proc) AwaitLine(re *regexp.Regexp) []string {
	p.T.Helper()
	timer := time.NewTimer(WaitFor)
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
				p.T.Fatalf("%s exited (%s) without printing a line matching %s", p.Name, p.Cmd.ProcessState, re)
			}
		case <-timer.C:
			p.T.Fatalf("%s printed no line matching %s within %v", p.Name, re, WaitFor)
		}
	}
}

// Exited is closed once the process has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Exit waits for the process to exit and returns its exit code.
func (p *Proc) Exit() int {
	p.T.Helper()
	timer := time.NewTimer(WaitFor)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.Cmd.ProcessState.ExitCode()
	case <-timer.C:
		p.T.Fatalf("%s did not exit within %v", p.Name, WaitFor)
		return -1
	}
}

// Kill sends SIGKILL, unless the process has exited, and reaps it.
func (p *Proc) Kill() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.Cmd.Process.Kill()
	<-p.exited
}

// Find returns the submatches of the first stdout line matching re, or
// nil.
func (p *Proc) Find(re *regexp.Regexp) []string {
	for _, l := range p.Lines(false) {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}

// MustFind is Find, failing the test when no line matches.
func (p *Proc) MustFind(re *regexp.Regexp) []string {
	p.T.Helper()
	m := p.Find(re)
	if m == nil {
		p.T.Fatalf("%s printed no line matching %s", p.Name, re)
	}
	return m
}
