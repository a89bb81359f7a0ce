package main

import (
	"errors"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBinary builds snapflow and runs it as a real process, so that the
// exit codes reach the shell through main and os.Exit.
func TestBinary(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH:", err)
	}
	bin := filepath.Join(t.TempDir(), "snapflow")
	build := exec.CommandContext(t.Context(), goBin, "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f := newDirFixture(t, "wc")
	f.addSavepoint(t, "v1", true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String() // nothing listens there
	l.Close()
	for _, tc := range []struct {
		args   []string
		code   int
		stdout string // a prefix
		stderr string // a prefix
	}{
		{[]string{"checkpoints", "list", "--store", f.url}, exitOK, "ID  TIME                  TASKS", ""},
		{[]string{"checkpoints", "list", "--store", f.url, "--job", "nope"}, exitNotFound, "", `snapflow: no job "nope"`},
		{[]string{"checkpoints", "list", "--store", f.url, "x", "--job", "wc"}, exitUsage, "", "snapflow: flag --job after"},
		{[]string{"checkpoints", "delete", "--store", f.url, "2"}, exitFailed, "", "snapflow: refusing to delete checkpoint 2"},
		{[]string{"checkpoints", "show", "--store", f.url, "latest"}, exitOK, "job          wc", "snapflow: latest is checkpoint 2 of job wc"},
		{[]string{"-h"}, exitOK, "", "Usage: snapflow"},
		{[]string{"--help"}, exitOK, "", "Usage: snapflow"},
		{[]string{"checkpoints", "--help"}, exitOK, "", "Usage: snapflow"},
		{[]string{"checkpoints", "verify", "--help"}, exitOK, "", "usage: snapflow checkpoints verify"},
		{[]string{"checkpoints", "delete", "--store", f.url, "2", "-h"}, exitOK, "", "usage: snapflow checkpoints delete"},
		{[]string{"savepoints", "list", "--store", f.url}, exitOK, "NAME  ID  TIME                  TASKS", ""},
		{[]string{"savepoints", "show", "--store", f.url, "v1"}, exitOK, "job              wc\nsavepoint        v1\n", ""},
		{[]string{"savepoints", "verify", "--store", f.url, "v1"}, exitOK, "ok    wc/savepoints/v1/_manifest\n", ""},
		{[]string{"savepoints", "show", "--store", f.url, "nope"}, exitNotFound, "", "snapflow: job wc has no savepoint nope"},
		{[]string{"savepoints", "show", "--store", f.url, "a/b"}, exitUsage, "", `snapflow: snapshots: savepoint name "a/b"`},
		{[]string{"savepoints", "delete", "--store", f.url, "v1"}, exitOK, "deleted savepoint v1 of job wc", ""},
		{[]string{"savepoints", "delete", "--store", f.url, "v1"}, exitNotFound, "", "snapflow: job wc has no savepoint v1"},
		{[]string{"jobs", "status"}, exitUsage, "", "snapflow: --addr is required"},
		{[]string{"jobs", "status", "--addr", dead}, exitFailed, "", "snapflow: cannot reach the job at " + dead},
	} {
		cmd := exec.CommandContext(t.Context(), bin, tc.args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		code := 0
		if exit := (*exec.ExitError)(nil); errors.As(err, &exit) {
			code = exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code || !strings.HasPrefix(stdout.String(), tc.stdout) || !strings.HasPrefix(stderr.String(), tc.stderr) {
			t.Errorf("snapflow %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.code, stdout.String(), stderr.String())
		}
	}
}
