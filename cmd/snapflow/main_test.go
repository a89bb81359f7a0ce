package main

import (
	"bytes"

	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// baseTime is the time of checkpoint 0; checkpoint n is n seconds later.
var baseTime = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// tasks of the fixture job: operator and subtask by task id.
var tasks = []struct {
	id, operator string
	subtask      uint32
}{{"source#0", "source", 0}, {"sum#0", "sum", 0}, {"sum#1", "sum", 1}}

// fixture is a store holding one job's checkpoints 1 and 2, complete, and 3,
// incomplete: it has the state of source#0 but no manifest.
type fixture struct {
	url       string
	store     snapshots.Store
	chks      *snapshots.Checkpoints
	manifests map[uint64]*messages.Manifest
}

// newDirFixture builds the fixture in a directory store in t.TempDir().
func newDirFixture(t *testing.T, job string) *fixture {
	t.Helper()
	return newFixture(t, t.TempDir(), job)
}

// newMemFixture builds the fixture in a named memory store of its own.
func newMemFixture(t *testing.T, job string) *fixture {
	t.Helper()
	name := regexp.MustCompile(`[^A-Za-z0-9_-]`).ReplaceAllString(t.Name(), "-")
	return newFixture(t, "mem://"+name, job)
}

func newFixture(t *testing.T, url, job string) *fixture {
	t.Helper()
	s, err := snapshots.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	f := &fixture{url: url, store: s, manifests: make(map[uint64]*messages.Manifest)}
	f.addJob(t, job)
	return f
}

// addJob writes the fixture's checkpoints of job to the store and makes
// them the fixture's.
func (f *fixture) addJob(t *testing.T, job string) {
	t.Helper()
	ctx := t.Context()
	f.chks = snapshots.NewCheckpoints(f.store, job, nil)
	for id := uint64(1); id <= 2; id++ {
		m := &messages.Manifest{
			Job:                 job,
			CheckpointId:        id,
			Epoch:               id,
			TimestampUnixNano:   baseTime.Add(time.Duration(id) * time.Second).UnixNano(),
			TopologyFingerprint: "fp-1234",
			Final:               id == 2,
		}
		for _, task := range tasks {
			m.Tasks = append(m.Tasks, &messages.TaskStateEntry{
				TaskId: task.id, Operator: task.operator, Subtask: task.subtask,
				State: f.putState(t, id, task.id, task.operator, task.subtask),
			})
		}
		if err := f.chks.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		f.manifests[id] = m
	}
	f.putState(t, 3, "source#0", "source", 0)
}

func (f *fixture) putState(t *testing.T, id uint64, task, operator string, subtask uint32) *messages.StateHandle {
	t.Helper()
	st := &messages.TaskState{
		Job: f.chks.Job(), TaskId: task, Operator: operator, Subtask: subtask, CheckpointId: id,
		OperatorState: fmt.Appendf(nil, "%s state at %d", task, id),
	}
	h, err := f.chks.PutTaskState(t.Context(), id, st)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// bytes returns the total state size of checkpoint id.
func (f *fixture) bytes(id uint64) uint64 {
	var n uint64
	for _, e := range f.manifests[id].GetTasks() {
		n += e.GetState().GetSize()
	}
	return n
}

// keys returns the keys of checkpoint id in the store.
func (f *fixture) keys(t *testing.T, id uint64) []string {
	t.Helper()
	keys, err := f.store.List(t.Context(), snapshots.CheckpointPrefix(f.chks.Job(), id))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// result is what one run of the command line gave.
type result struct {
	stdout, stderr string
	code           int
}

// runCLI runs the command line in process.
func runCLI(args ...string) result {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return result{stdout.String(), stderr.String(), code}
}

// want fails t unless r exited with code and its stderr contains every one
// of the fragments, printing r in full when it does not.
func (r result) want(t *testing.T, code int, stderrHas ...string) {
	t.Helper()
	ok := r.code == code
	for _, s := range stderrHas {
		ok = ok && strings.Contains(r.stderr, s)
	}
	if !ok {
		t.Errorf("exit %d, want %d with stderr containing %q\nstdout:\n%s\nstderr:\n%s", r.code, code, stderrHas, r.stdout, r.stderr)
	}
}

// lines splits output into lines of whitespace-separated fields.
func lines(out string) [][]string {
	var ls [][]string
	for l := range strings.Lines(out) {
		ls = append(ls, strings.Fields(l))
	}
	return ls
}

// The header rows of checkpoints list and savepoints list.
var (
	checkpointsHeader = []string{"ID", "TIME", "TASKS", "STATE", "STORED", "STATUS", "NOTE"}
	savepointsHeader  = []string{"NAME", "ID", "TIME", "TASKS", "BYTES", "STATUS"}
)

// rows splits the output of a list command into lines of fields, checks
// that the first is header and returns the others.
func rows(t *testing.T, out string, header []string) [][]string {
	t.Helper()
	ls := lines(out)
	if len(ls) == 0 {
		return nil
	}
	if !slices.Equal(ls[0], header) {
		t.Errorf("the first line is %q, want the header %q", ls[0], header)
		return ls
	}
	return ls[1:]
}
