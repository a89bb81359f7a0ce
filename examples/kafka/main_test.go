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
	dir, err := os.MkdirTemp("", "snapflow-kafka-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kafka example tests:", err)
		os.Exit(1)
	}
	exe = filepath.Join(dir, "kafka")
	args := []string{"build", "-o", exe}
	if racedetect.Enabled {
		args = append(args, "-race")
	}
	cmd := exec.Command(goTool(), append(args, ".")...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "kafka example tests: go", args, ":", err)
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

// waitFor bounds every wait on a process or on Kafka. It is generous, for
// a loaded machine: the tests assert what happened, never how fast, and a
// wait that runs out fails the test with what the processes printed.
const waitFor = 5 * time.Minute

// proc is a process of the example. It is killed when the test ends, and a
// failing test logs what it printed.
type proc struct {
	t    *testing.T
	name string
	cmd  *exec.Cmd

	mu      sync.Mutex
	stdout  []string
	stderr  []string
	changed chan struct{} // closed and replaced on every line
	exited  chan struct{}
}

// startProc starts the example with args.
func startProc(t *testing.T, name string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, cmd: exec.Command(exe, args...), changed: make(chan struct{}), exited: make(chan struct{})}
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

// find returns the submatches of the first stdout line matching re, or
// nil.
func (p *proc) find(re *regexp.Regexp) []string {
	for _, l := range p.lines(false) {
		if m := re.FindStringSubmatch(l); m != nil {
			return m
		}
	}
	return nil
}

// mustFind is find, failing the test when no line matches.
func (p *proc) mustFind(re *regexp.Regexp) []string {
	p.t.Helper()
	m := p.find(re)
	if m == nil {
		p.t.Fatalf("%s printed no line matching %s", p.name, re)
	}
	return m
}
