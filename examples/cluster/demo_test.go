//go:build unix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// demoPIDs returns the process ids the demo printed for its children.
func demoPIDs(t *testing.T, out string) []int {
	t.Helper()
	var pids []int
	for _, m := range regexp.MustCompile(`(?m)^  (?:coordinator|worker \d) +pid (\d+) `).FindAllStringSubmatch(out, -1) {
		pid, err := strconv.Atoi(m[1])
		if err != nil {
			t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	if len(pids) != 1+demoWorkers {
		t.Fatalf("the demo printed %d process ids, want %d:\n%s", len(pids), 1+demoWorkers, out)
	}
	return pids
}

// expectCleanedUp checks that none of the demo's children is left and that
// its temporary directory is gone.
func expectCleanedUp(t *testing.T, out string) {
	t.Helper()
	for _, pid := range demoPIDs(t, out) {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("the demo's child %d is still there after the demo exited (kill 0: %v)", pid, err)
		}
	}
	m := regexp.MustCompile(`(?m)^store: (\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("the demo did not print its store:\n%s", out)
	}
	if dir := filepath.Dir(m[1]); fileExists(dir) {
		t.Errorf("the demo's temporary directory %s is still there", dir)
	}
}

// stdout returns p's stdout lines, one string.
func stdout(p *child) string {
	var b strings.Builder
	for _, l := range p.tail(1 << 30) {
		if !l.stderr {
			b.WriteString(l.text + "\n")
		}
	}
	return b.String()
}

// TestDemo runs the demo as a user does (with fewer records): it kills a
// worker after a checkpoint, tells the loss, the rollback and the new
// placement, ends with exactly-once: OK and exit 0, and leaves no process
// or file behind.
func TestDemo(t *testing.T) {
	c := newTestCluster(t)
	demo := c.start("demo", "-records", "8000", "-rate", "4000")
	if code := c.exit(demo); code != 0 {
		t.Fatalf("the demo exited %d", code)
	}
	out := stdout(demo)
	for _, re := range []string{
		`(?m)^ +\S+  epoch 1: the coordinator places the tasks, from the beginning:$`,
		`(?m)^ +\S+  checkpoint [1-9]\d* complete `,
		`(?m)^ +\S+  SIGKILL worker (\d) \(pid \d+\), which runs \S`,
		`(?m)^ +\S+  worker \d lost: `,
		`(?m)^ +\S+  rolling back to checkpoint [1-9]\d* in epoch 2: `,
		`(?m)^ +\S+  epoch 2: the coordinator places the tasks, restoring checkpoint [1-9]\d*:$`,
		`(?m)^ +\S+  every source ended; the job finished after \d+ checkpoints$`,
		`(?m)^ +\S+  the coordinator read the final checkpoint \d+ back from the store: every one of the 1000 keys `,
	} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("the demo's story lacks %s", re)
		}
	}
	if !strings.HasSuffix(out, "\n"+okLine+"\n") {
		t.Errorf("the demo's last line is not %q", okLine)
	}
	expectCleanedUp(t, out)
}

// TestDemoInterrupted: Ctrl-C (SIGINT to the demo alone: its children are
// in process groups of their own) stops every child, removes the store and
// exits 1.
func TestDemoInterrupted(t *testing.T) {
	c := newTestCluster(t)
	demo := c.start("demo", "-records", "8000", "-rate", "1000")
	c.await(demo, 0, "the job running", func(l string) bool { return strings.Contains(l, "running in epoch 1") })
	if err := demo.signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if code := c.exit(demo); code != 1 {
		t.Errorf("the interrupted demo exited %d, want 1", code)
	}
	if out := demo.output(); !strings.Contains(out, "interrupted; every child process was stopped") {
		t.Errorf("the interrupted demo does not say so")
	}
	expectCleanedUp(t, stdout(demo))
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
