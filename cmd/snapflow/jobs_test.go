package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestNotFound(t *testing.T) {
	f := newDirFixture(t, "wc")
	for _, args := range [][]string{
		{"show", "--store", f.url, "9"},
		{"verify", "--store", f.url, "9"},
		{"delete", "--store", f.url, "--force", "9"},
		{"show", "--store", f.url, "--job", "wc", "4"},
	} {
		r := runCLI(append([]string{"checkpoints"}, args...)...)
		r.want(t, exitNotFound, "snapflow: job wc has no checkpoint ")
		if r.stdout != "" {
			t.Errorf("%q printed %q", args, r.stdout)
		}
	}
	runCLI("checkpoints", "list", "--store", f.url, "--job", "nope").want(t, exitNotFound, `no job "nope"`, "(jobs: wc)")
	runCLI("checkpoints", "list", "--store", t.TempDir()).want(t, exitNotFound, "no checkpoints or savepoints in dir:")

	missing := filepath.Join(t.TempDir(), "typo")
	runCLI("checkpoints", "list", "--store", missing).want(t, exitNotFound, "no store at "+missing)
	runCLI("checkpoints", "list", "--store", "file://"+missing).want(t, exitNotFound, "no store at "+missing)
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("list created the missing store directory: %v", err)
	}
}

func TestSeveralJobs(t *testing.T) {
	f := newDirFixture(t, "wc")
	f.addJob(t, "parity")
	for _, cmd := range [][]string{{"list"}, {"show", "1"}, {"verify", "1"}, {"delete", "1"}} {
		args := append([]string{"checkpoints", cmd[0], "--store", f.url}, cmd[1:]...)
		runCLI(args...).want(t, exitUsage, "holds several jobs; choose one with --job: parity, wc")
	}
	for _, job := range []string{"wc", "parity"} {
		r := runCLI("checkpoints", "show", "--store", f.url, "--job", job, "1")
		r.want(t, exitOK)
		if !strings.HasPrefix(r.stdout, "job          "+job+"\n") {
			t.Errorf("show --job %s printed\n%s", job, r.stdout)
		}
	}
	runCLI("checkpoints", "list", "--store", f.url, "--job", "nope").want(t, exitNotFound, `no job "nope"`, "(jobs: parity, wc)")
}

func TestUsageErrors(t *testing.T) {
	f := newDirFixture(t, "wc")
	s := f.url
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"checkpoints", "verify", "--store", s, "2", "--job", "wc"}, "flag --job after the argument \"2\": flags must come before positional arguments"},
		{[]string{"checkpoints", "show", "2", "--store", s}, "flag --store after the argument \"2\": flags must come before positional arguments"},
		{[]string{"checkpoints", "show", "--store", s, "2", "--json"}, "flag --json after the argument"},
		{[]string{"checkpoints", "delete", "--store", s, "2", "--force"}, "flag --force after the argument"},
		{[]string{"checkpoints", "delete", "--store", s, "2", "-force"}, "flag -force after the argument"},
		{[]string{"checkpoints", "list", "--store", s, "extra", "--job", "wc"}, "flag --job after the argument \"extra\""},
		{[]string{"checkpoints", "list", "--store", s, "extra"}, `unexpected argument "extra"`},
		{[]string{"checkpoints", "show", "--store", s, "1", "2"}, `unexpected argument "2"`},
		{[]string{"checkpoints", "show", "--store", s}, "missing the checkpoint ID"},
		{[]string{"checkpoints", "show", "--store", s, "abc"}, `checkpoint ID "abc": want a number from 1 up`},
		{[]string{"checkpoints", "show", "--store", s, "0"}, `checkpoint ID "0"`},
		{[]string{"checkpoints", "show", "--store", s, "--", "-1"}, `checkpoint ID "-1"`},
		{[]string{"checkpoints", "list"}, "--store is required"},
		{[]string{"checkpoints", "list", "--store", s, "--force"}, "flag provided but not defined: -force"},
		{[]string{"checkpoints", "list", "--store"}, "flag needs an argument: -store"},
		{[]string{"checkpoints", "list", "--store", "http://example.com/x"}, `--store: snapshots: unsupported store URL "http://example.com/x"`},
		{[]string{"checkpoints", "list", "--store", "mem://a/b"}, `--store: snapshots: store URL "mem://a/b"`},
		{[]string{"checkpoints", "list", "--store", "file://host/x"}, `--store: snapshots: store URL "file://host/x"`},
		{[]string{"checkpoints", "frob"}, `checkpoints: unknown subcommand "frob"`},
		{[]string{"checkpoints"}, "checkpoints: missing subcommand"},
		{[]string{"frob"}, `unknown command "frob"`},
	} {
		r := runCLI(tc.args...)
		r.want(t, exitUsage, "snapflow: "+tc.msg)
		if r.stdout != "" {
			t.Errorf("%q printed %q", tc.args, r.stdout)
		}
		if strings.HasPrefix(tc.msg, "flag ") && !strings.Contains(r.stderr, "\nusage: snapflow checkpoints ") {
			t.Errorf("%q: stderr has no synopsis:\n%s", tc.args, r.stderr)
		}
	}
	if got := ids(t, f); len(got) != 3 {
		t.Errorf("usage errors changed the store: %q", got)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{
		{"help"}, {"-h"}, {"-help"}, {"--help"}, {"help", "checkpoints"},
		{"checkpoints", "help"}, {"checkpoints", "-h"}, {"checkpoints", "--help"},
	} {
		r := runCLI(args...)
		r.want(t, exitOK, "Usage: snapflow", "Exit codes:", "checkpoints verify --store URL [--job NAME] ID")
		if r.stdout != "" {
			t.Errorf("%q printed %q on stdout", args, r.stdout)
		}
	}
	runCLI().want(t, exitUsage, "Usage: snapflow")
	r := runCLI("checkpoints", "delete", "-h")
	r.want(t, exitOK, "usage: snapflow checkpoints delete --store URL [--job NAME] [--force] ID", "-force")
}

// TestSubcommandHelp checks that -h, -help and --help print the
// subcommand's usage and exit 0 wherever they stand, even among flags
// that are wrong or after the checkpoint ID.
func TestSubcommandHelp(t *testing.T) {
	f := newDirFixture(t, "wc")
	for _, sub := range []string{"list", "show", "verify", "delete"} {
		for _, help := range []string{"-h", "-help", "--help"} {
			for _, args := range [][]string{
				{help},
				{"--store", f.url, help},
				{"--store", f.url, "2", help},
				{"--store", f.url, "latest", help},
				{"--nonsense", help},
			} {
				r := runCLI(append([]string{"checkpoints", sub}, args...)...)
				r.want(t, exitOK, "usage: snapflow checkpoints "+sub+" --store URL")
				if r.stdout != "" {
					t.Errorf("%s %q printed %q on stdout", sub, args, r.stdout)
				}
			}
		}
	}
	if got := ids(t, f); len(got) != 3 {
		t.Errorf("help changed the store: %q", got)
	}
}
