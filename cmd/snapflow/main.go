package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// Exit codes that scripts can rely on; usage and doc.go document them.
const (
	exitOK       = 0 // success
	exitFailed   = 1 // the operation failed: verification problems, refusal, store or server error
	exitUsage    = 2 // bad command, flags, arguments, store URL or address
	exitNotFound = 3 // no such checkpoint, savepoint, job, store directory or API
)

const usage = `Usage: snapflow <command> [flags] [arguments]

Inspect and manage the checkpoints and savepoints that snapflow jobs keep in
a snapshot store, and ask a running job how it is doing. Flags come before
positional arguments:
snapflow checkpoints verify --store URL 7
snapflow checkpoints show --store URL latest
snapflow savepoints show --store URL before-upgrade
snapflow jobs status --addr http://127.0.0.1:8080

Commands:
  checkpoints list --store URL [--job NAME]
      A header row, then one checkpoint per line, in ascending id order:
        ID TIME TASKS STATE STORED STATUS NOTE
      TIME is RFC 3339 in UTC. STATE sums the tasks' whole states and
      STORED what the checkpoint wrote for them: an incremental checkpoint
      stores the key groups that changed and references the others in
      earlier checkpoints' objects, and a small state travels inline in
      the manifest. STATUS is complete, incomplete (no manifest: aborted
      or still in flight; TIME, STATE and STORED are "-" and TASKS counts
      the objects written so far), kept (no manifest: a deleted
      checkpoint whose objects newer incremental checkpoints still
      reference; retention deletes them once none does) or corrupt (the
      manifest does not verify). NOTE, when there is one, names the
      checkpoints a checkpoint references and those that reference it,
      and its inline states.
  checkpoints show --store URL [--job NAME] [--json] ID
      The manifest of checkpoint ID: job, id, epoch, time, topology
      fingerprint, final flag, the max parallelism and the operators when
      the manifest records them, the size of the state, what the
      checkpoint stored (bytes, objects, inline states) and what it
      references in earlier checkpoints, and the state of each task (task
      id, operator, operator id and key-group range when recorded,
      subtask, key, STATE size, STORED bytes or "inline", CRC-32C, and the
      key groups it references). --json prints it as protojson.
  checkpoints verify --store URL [--job NAME] ID
      Re-reads every task state of checkpoint ID, its object or its bytes
      inline in the manifest and the key groups it references in earlier
      checkpoints' objects, and checks sizes and CRC-32C. Prints one line
      per state, "ok KEY ..." or "FAIL KEY ...".
  checkpoints delete --store URL [--job NAME] [--force] ID
      Deletes checkpoint ID, but keeps the objects that other complete
      checkpoints reference, and says so. Recovery restores the newest
      usable complete checkpoint, so deleting the newest complete one, or
      the one recovery would fall back to when no newer one verifies,
      needs --force (with incremental checkpoints, never force the newest
      of a running job: its next checkpoints build on it). A kept
      directory (see list) has nothing to delete.
  savepoints list --store URL [--job NAME]
      A header row, then one savepoint per line, sorted by name:
        NAME ID TIME TASKS BYTES STATUS
      ID is the checkpoint id the savepoint was taken as. STATUS is
      complete, incomplete (no manifest: aborted or still being taken; ID,
      TIME and BYTES are "-" and TASKS counts the objects written so far)
      or corrupt (the manifest does not verify).
  savepoints show --store URL [--job NAME] [--json] NAME
      The manifest of savepoint NAME: job, name, checkpoint id, epoch, time,
      max parallelism, each operator (id, name, kind, parallelism, keyed,
      splits) and its state descriptors, and the state of each task (task
      id, operator, operator id, subtask, key-group range [start,end),
      key, STATE size, STORED bytes or "inline", CRC-32C; a savepoint is
      self-contained and references nothing); "-" where the manifest
      records nothing. --json prints it as protojson.
  savepoints verify --store URL [--job NAME] NAME
      Re-reads every task state of savepoint NAME, its object or its bytes
      inline in the manifest, and checks its size and CRC-32C. Prints one
      line per state, "ok KEY ..." or "FAIL KEY ...".
  savepoints delete --store URL [--job NAME] [--force] NAME
      Deletes savepoint NAME, complete or not, and says what it deleted.
      Retention never deletes a savepoint: it is yours to delete.
  jobs status --addr URL [--token TOKEN] [--json] [--limit N]
      Asks the HTTP API of a running job (the server a job or a cluster
      coordinator starts with package actors/web, for example an
      example's -http ADDR) for GET /api/v1/job and
      /api/v1/checkpoints?limit=N, and prints the job's name, state,
      epoch and uptime, its last completed checkpoint and its age, the
      counts of checkpoints, failures and restores, one line per operator
      (kind, parallelism, records in and out, backpressure, queued
      batches), the workers in cluster mode, and one line per recent
      checkpoint, newest first:
        CHECKPOINT STATUS DURATION SIZE ALIGNMENT SAVEPOINT NOTE
      STATUS is completed, in_progress, aborted or declined; SIZE and
      ALIGNMENT are "-" unless completed; NOTE says why a checkpoint was
      aborted or declined, or that it was the final one. --json prints
      both answers as one JSON object {"job": ..., "checkpoints": [...]}.
  help, -h, --help
      Prints this text. After a subcommand, -h or --help prints its usage.

Flags:
  --store URL   the snapshot store (required): a directory path,
                file:///PATH, mem://NAME or
                s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false
  --job NAME    the job; may be left out when the store holds the
                checkpoints or savepoints of exactly one job
  ID            a checkpoint id, 7 or chk-00000000000000000007, or
                latest: the checkpoint a recovery would restore (the
                newest complete one whose objects verify); the id it
                stands for is printed on standard error
  NAME          a savepoint name; savepoints list prints a name that holds
                white space or starts with a quote Go-quoted
  --addr URL    jobs status: the job's HTTP server, http://HOST:PORT
                (https:// too; a bare HOST:PORT means http)
  --token TOKEN jobs status: the bearer token the server wants; the
                default is the environment variable SNAPFLOW_TOKEN
  --limit N     jobs status: how many recent checkpoints (default 10)

Exit codes:
  0  success (and help)
  1  the operation failed: verification found problems, the checkpoint or
     savepoint is incomplete, deletion was refused, or the store failed;
     for jobs status, the server could not be reached, wants a token or
     refused it, or answered an error (printed)
  2  usage error: bad command, flags, arguments, store URL or --addr, or
     a store with several jobs and no --job
  3  not found: no such checkpoint, savepoint, job or store directory, or
     no complete checkpoint for latest; for jobs status, --addr answers
     404 (no job API there)
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// run runs the command line args, writing results to stdout and errors to
// stderr, and returns the exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return report(stderr, dispatch(context.Background(), args, stdout, stderr))
}

func dispatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &exitError{code: exitUsage, hint: usage}
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stderr, usage)
		return nil
	case "checkpoints":
		return checkpoints(ctx, args[1:], stdout, stderr)
	case "savepoints":
		return savepoints(ctx, args[1:], stdout, stderr)
	case "jobs":
		return subcommand(ctx, "jobs", map[string]command{"status": status}, args[1:], stdout, stderr)
	}
	return &exitError{code: exitUsage, err: fmt.Errorf("unknown command %q", args[0]), hint: usage}
}

// command runs one subcommand with its arguments.
type command func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// checkpoints dispatches "snapflow checkpoints SUBCOMMAND".
func checkpoints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "checkpoints", map[string]command{
		"list":   list,
		"show":   show,
		"verify": verify,
		"delete": remove,
	}, args, stdout, stderr)
}

// savepoints dispatches "snapflow savepoints SUBCOMMAND".
func savepoints(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return subcommand(ctx, "savepoints", map[string]command{
		"list":   listSavepoints,
		"show":   showSavepoint,
		"verify": verifySavepoint,
		"delete": deleteSavepoint,
	}, args, stdout, stderr)
}

// subcommand runs the subcommand of group that args name.
func subcommand(ctx context.Context, group string, cmds map[string]command, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s: missing subcommand (%s)", group, orList(slices.Sorted(maps.Keys(cmds)))), hint: usage}
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" {
		fmt.Fprint(stderr, usage)
		return nil
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return &exitError{code: exitUsage, err: fmt.Errorf("%s: unknown subcommand %q", group, args[0]), hint: usage}
	}
	return cmd(ctx, args[1:], stdout, stderr)
}

// orList joins names as "a, b or c".
func orList(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// exitError carries an exit code other than 1, and what to print.
type exitError struct {
	code int
	err  error  // printed with the "snapflow: " prefix; nil for none
	hint string // printed after err, such as a synopsis
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

func usageError(synopsis, format string, args ...any) error {
	hint := "usage: " + synopsis + "\nRun 'snapflow help' for details.\n"
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...), hint: hint}
}

func notFound(format string, args ...any) error {
	return &exitError{code: exitNotFound, err: fmt.Errorf(format, args...)}
}

// report prints err to stderr and returns the exit code it stands for.
// Errors that are not an *exitError mean the operation failed.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	var e *exitError
	if !errors.As(err, &e) {
		e = &exitError{code: exitFailed, err: err}
	}
	if e.err != nil {
		fmt.Fprintf(stderr, "snapflow: %v\n", e.err)
	}
	fmt.Fprint(stderr, e.hint)
	return e.code
}
