package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// savepointID is the checkpoint id of the fixture's savepoints.
const savepointID = 7

// fixtureOperators are the operators that the fixture's savepoints record.
var fixtureOperators = []*messages.OperatorEntry{
	{OperatorId: "src", Name: "source", Kind: "source", Parallelism: 1, Splits: true},
	{OperatorId: "summer", Name: "sum", Kind: "operator", Parallelism: 2, Keyed: true, States: []*messages.StateDescriptor{
		{Name: "total", Kind: "value", KeyType: "string", ValueType: "int64", ValueCodec: "varint"},
		{Name: "seen", Kind: "map", KeyType: "string", MapKeyType: "string", MapKeyCodec: "string", ValueType: "bool", ValueCodec: "gob"},
	}},
}

// fixtureRanges are the key-group ranges of the fixture's tasks.
var fixtureRanges = map[string][2]uint32{"sum#0": {0, 64}, "sum#1": {64, 128}}

// addSavepoint writes savepoint name of the fixture's current job. With
// ids, its manifest records operators, operator ids and key-group ranges,
// as a savepoint does; without, it looks like a manifest that predates
// them. It returns the manifest.
func (f *fixture) addSavepoint(t *testing.T, name string, ids bool) *messages.Manifest {
	t.Helper()
	m := &messages.Manifest{
		Job: f.chks.Job(), CheckpointId: savepointID, Epoch: 3, Savepoint: name,
		TimestampUnixNano: baseTime.Add(savepointID * time.Second).UnixNano(), TopologyFingerprint: "fp-1234",
	}
	if ids {
		m.MaxParallelism, m.Operators = 128, fixtureOperators
	}
	for _, task := range tasks {
		e := &messages.TaskStateEntry{
			TaskId: task.id, Operator: task.operator, Subtask: task.subtask,
			State: f.putSavepointState(t, name, task.id, task.operator, task.subtask),
		}
		if ids {
			e.OperatorId = task.operator
			if task.operator == "source" {
				e.OperatorId = "src"
			}
			if task.operator == "sum" {
				e.OperatorId, e.Parallelism = "summer", 2
			}
			e.KeyGroupStart, e.KeyGroupEnd = fixtureRanges[task.id][0], fixtureRanges[task.id][1]
		}
		m.Tasks = append(m.Tasks, e)
	}
	if err := f.chks.PutSavepointManifest(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (f *fixture) putSavepointState(t *testing.T, name, task, operator string, subtask uint32) *messages.StateHandle {
	t.Helper()
	st := &messages.TaskState{
		Job: f.chks.Job(), TaskId: task, Operator: operator, Subtask: subtask, CheckpointId: savepointID,
		OperatorState: fmt.Appendf(nil, "%s state in %s", task, name),
	}
	h, err := f.chks.PutSavepointState(t.Context(), name, st)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func size(m *messages.Manifest) uint64 {
	var n uint64
	for _, e := range m.GetTasks() {
		n += e.GetState().GetSize()
	}
	return n
}

// newSavepointFixture is the fixture with the savepoints v1 (with operator
// ids), old (without), aborted (incomplete) and bad (a corrupt manifest).
func newSavepointFixture(t *testing.T, newFixture func(*testing.T, string) *fixture) (*fixture, map[string]*messages.Manifest) {
	t.Helper()
	f := newFixture(t, "wc")
	ms := map[string]*messages.Manifest{"v1": f.addSavepoint(t, "v1", true), "old": f.addSavepoint(t, "old", false)}
	f.addSavepoint(t, "bad", true)
	if err := f.store.Put(t.Context(), snapshots.SavepointManifestKey("wc", "bad"), []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	f.putSavepointState(t, "aborted", "source#0", "source", 0)
	return f, ms
}

func TestSavepointsList(t *testing.T) {
	for _, tc := range []struct {
		name string
		new  func(*testing.T, string) *fixture
	}{{"dir", newDirFixture}, {"mem", newMemFixture}} {
		t.Run(tc.name, func(t *testing.T) {
			f, ms := newSavepointFixture(t, tc.new)
			for _, args := range [][]string{
				{"savepoints", "list", "--store", f.url},
				{"savepoints", "list", "--store", f.url, "--job", "wc"},
			} {
				r := runCLI(args...)
				r.want(t, exitOK, "snapflow: warning: savepoint bad: ", snapshots.SavepointManifestKey("wc", "bad"))
				want := [][]string{
					{"aborted", "-", "-", "1", "-", "incomplete"},
					{"bad", "-", "-", "-", "-", "corrupt"},
					{"old", "7", "2026-03-01T10:00:07Z", "3", fmt.Sprint(size(ms["old"])), "complete"},
					{"v1", "7", "2026-03-01T10:00:07Z", "3", fmt.Sprint(size(ms["v1"])), "complete"},
				}
				if got := rows(t, r.stdout, savepointsHeader); !slices.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%q printed\n%s\nwant the fields %q", args, r.stdout, want)
				}
			}
			// The checkpoints are listed as before: savepoints are not checkpoints.
			if got := ids(t, f); !slices.Equal(got, []string{"1", "2", "3"}) {
				t.Errorf("checkpoints list printed the ids %q", got)
			}
		})
	}
}

func TestSavepointsListQuotesNames(t *testing.T) {
	f := newMemFixture(t, "wc")
	f.addSavepoint(t, "before upgrade", false)
	f.addSavepoint(t, `"x`, false)
	r := runCLI("savepoints", "list", "--store", f.url)
	r.want(t, exitOK)
	var names []string
	for l := range strings.Lines(r.stdout) {
		names = append(names, l[:strings.Index(l, "  ")])
	}
	if want := []string{"NAME", `"\"x"`, `"before upgrade"`}; !slices.Equal(names, want) {
		t.Errorf("list printed\n%s\nwant the names %q", r.stdout, want)
	}
	r = runCLI("savepoints", "show", "--store", f.url, "before upgrade")
	r.want(t, exitOK)
	if !strings.Contains(r.stdout, "savepoint        \"before upgrade\"\n") {
		t.Errorf("show printed\n%s", r.stdout)
	}
}

// TestSavepointsOnlyJob checks that a job with savepoints and no
// checkpoints is found without --job, and counts among several jobs.
func TestSavepointsOnlyJob(t *testing.T) {
	f := newDirFixture(t, "wc")
	if _, err := f.chks.DeleteAll(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := f.addSavepoint(t, "v1", true)
	r := runCLI("savepoints", "list", "--store", f.url)
	r.want(t, exitOK)
	if got := rows(t, r.stdout, savepointsHeader); len(got) != 1 || got[0][0] != "v1" || got[0][5] != "complete" {
		t.Errorf("list printed\n%s\nwant v1", r.stdout)
	}
	r = runCLI("checkpoints", "list", "--store", f.url)
	r.want(t, exitOK)
	if r.stdout != "" {
		t.Errorf("checkpoints list of a job with only savepoints printed\n%s", r.stdout)
	}
	f.addJob(t, "parity")
	runCLI("savepoints", "list", "--store", f.url).want(t, exitUsage, "holds several jobs; choose one with --job: parity, wc")
	r = runCLI("savepoints", "show", "--store", f.url, "--job", "wc", "--json", "v1")
	r.want(t, exitOK)
	var got messages.Manifest
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || !proto.Equal(&got, m) {
		t.Errorf("show --json printed\n%s\nwant %v (%v)", r.stdout, m, err)
	}
	runCLI("savepoints", "list", "--store", t.TempDir()).want(t, exitNotFound, "no checkpoints or savepoints in dir:")
}

func TestSavepointsShow(t *testing.T) {
	f, ms := newSavepointFixture(t, newDirFixture)
	m := ms["v1"]
	r := runCLI("savepoints", "show", "--store", f.url, "v1")
	r.want(t, exitOK)
	want := [][]string{
		{"job", "wc"}, {"savepoint", "v1"}, {"checkpoint", "7"}, {"epoch", "3"},
		{"time", "2026-03-01T10:00:07Z"}, {"fingerprint", "fp-1234"}, {"final", "false"},
		{"max", "parallelism", "128"}, {"operators", "2"},
		{"tasks", "3"}, {"state", fmt.Sprint(size(m)), "bytes"},
		{"stored", fmt.Sprint(size(m)), "bytes", "(3", "objects,", "0", "states", "inline)"},
		{},
		{"OPERATOR-ID", "NAME", "KIND", "PARALLELISM", "KEYED", "SPLITS", "STATES"},
		{"src", "source", "source", "1", "false", "true", "0"},
		{"summer", "sum", "operator", "2", "true", "false", "2"},
		{},
		{"OPERATOR-ID", "STATE", "KIND", "KEY-TYPE", "MAP-KEY-TYPE", "MAP-KEY-CODEC", "VALUE-TYPE", "VALUE-CODEC"},
		{"summer", "total", "value", "string", "-", "-", "int64", "varint"},
		{"summer", "seen", "map", "string", "string", "string", "bool", "gob"},
		{},
		{"TASK", "OPERATOR", "OPERATOR-ID", "SUBTASK", "KEY-GROUPS", "OBJECT", "STATE", "STORED", "CRC32C", "REFERENCES"},
	}
	for _, e := range m.GetTasks() {
		h := e.GetState()
		want = append(want, []string{e.GetTaskId(), e.GetOperator(), e.GetOperatorId(), fmt.Sprint(e.GetSubtask()),
			map[string]string{"source#0": "-", "sum#0": "[0,64)", "sum#1": "[64,128)"}[e.GetTaskId()],
			h.GetKey(), fmt.Sprint(h.GetSize()), fmt.Sprint(h.GetSize()), fmt.Sprintf("%08x", h.GetCrc32C()), "-"})
	}
	if got := lines(r.stdout); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("show v1 printed\n%s\nwant the fields\n%q", r.stdout, want)
	}
	for _, e := range m.GetTasks() { // each task's object lies in the savepoint's folder
		if want := snapshots.SavepointStateKey("wc", "v1", savepointID, e.GetTaskId()); e.GetState().GetKey() != want {
			t.Errorf("task %s maps to %s, want %s", e.GetTaskId(), e.GetState().GetKey(), want)
		}
	}

	r = runCLI("savepoints", "show", "--store", f.url, "--json", "v1")
	r.want(t, exitOK)
	var got messages.Manifest
	if err := protojson.Unmarshal([]byte(r.stdout), &got); err != nil || !proto.Equal(&got, m) {
		t.Errorf("show --json printed\n%s\nwant %v (%v)", r.stdout, m, err)
	}
}

// TestSavepointsShowWithoutIDs checks a manifest that records no
// operators, operator ids or key-group ranges: "-" stands for them.
func TestSavepointsShowWithoutIDs(t *testing.T) {
	f, ms := newSavepointFixture(t, newMemFixture)
	m := ms["old"]
	r := runCLI("savepoints", "show", "--store", f.url, "old")
	r.want(t, exitOK)
	got := lines(r.stdout)
	header := [][]string{
		{"job", "wc"}, {"savepoint", "old"}, {"checkpoint", "7"}, {"epoch", "3"},
		{"time", "2026-03-01T10:00:07Z"}, {"fingerprint", "fp-1234"}, {"final", "false"},
		{"max", "parallelism", "-"}, {"operators", "-"},
		{"tasks", "3"}, {"state", fmt.Sprint(size(m)), "bytes"},
		{"stored", fmt.Sprint(size(m)), "bytes", "(3", "objects,", "0", "states", "inline)"},
		{},
		{"TASK", "OPERATOR", "OPERATOR-ID", "SUBTASK", "KEY-GROUPS", "OBJECT", "STATE", "STORED", "CRC32C", "REFERENCES"},
	}
	if len(got) != len(header)+3 || !slices.EqualFunc(got[:len(header)], header, slices.Equal) {
		t.Fatalf("show old printed\n%s\nwant it to start with the fields %q and list 3 tasks", r.stdout, header)
	}
	for i, e := range m.GetTasks() {
		if row := got[len(header)+i]; row[0] != e.GetTaskId() || row[2] != "-" || row[4] != "-" {
			t.Errorf("task row %q, want %s with no operator id and no key groups", row, e.GetTaskId())
		}
	}
}

func TestSavepointsShowFails(t *testing.T) {
	f, _ := newSavepointFixture(t, newDirFixture)
	runCLI("savepoints", "show", "--store", f.url, "aborted").want(t, exitFailed,
		"snapflow: savepoint aborted of job wc is incomplete: it has no manifest")
	runCLI("savepoints", "show", "--store", f.url, "nope").want(t, exitNotFound, "snapflow: job wc has no savepoint nope")
	runCLI("savepoints", "show", "--store", f.url, "v").want(t, exitNotFound, "no savepoint v\n") // a prefix of v1
	runCLI("savepoints", "show", "--store", f.url, "bad").want(t, exitFailed, snapshots.SavepointManifestKey("wc", "bad"), "corrupt")
}

func TestSavepointsVerify(t *testing.T) {
	f, ms := newSavepointFixture(t, newDirFixture)
	r := runCLI("savepoints", "verify", "--store", f.url, "v1")
	r.want(t, exitOK)
	want := []string{snapshots.SavepointManifestKey("wc", "v1")}
	for _, e := range ms["v1"].GetTasks() {
		want = append(want, e.GetState().GetKey())
	}
	got := lines(r.stdout)
	if len(got) != len(want) {
		t.Fatalf("verify printed\n%s\nwant a line for each of %q", r.stdout, want)
	}
	for i, l := range got {
		if l[0] != "ok" || l[1] != want[i] {
			t.Errorf("line %d is %q, want ok %s", i+1, l, want[i])
		}
	}

	bad := snapshots.SavepointStateKey("wc", "v1", savepointID, "sum#1")
	if err := f.store.Put(t.Context(), bad, []byte("garbage")); err != nil {
		t.Fatal(err)
	}
	r = runCLI("savepoints", "verify", "--store", f.url, "v1")
	r.want(t, exitFailed, "snapflow: savepoint v1 of job wc: 1 of 3 task states failed verification")
	if !strings.Contains(r.stdout, "FAIL  "+bad+"  task sum#1: ") || strings.Count(r.stdout, "ok    ") != 3 {
		t.Errorf("verify printed\n%s\nwant a FAIL line for %s and ok for the rest", r.stdout, bad)
	}
	r = runCLI("savepoints", "verify", "--store", f.url, "bad")
	r.want(t, exitFailed, "savepoint bad of job wc: the manifest does not verify")
	if !strings.HasPrefix(r.stdout, "FAIL  "+snapshots.SavepointManifestKey("wc", "bad")+": ") {
		t.Errorf("verify bad printed %q", r.stdout)
	}
	runCLI("savepoints", "verify", "--store", f.url, "aborted").want(t, exitFailed, "savepoint aborted of job wc is incomplete")
	runCLI("savepoints", "verify", "--store", f.url, "nope").want(t, exitNotFound, "job wc has no savepoint nope")
	runCLI("savepoints", "verify", "--store", f.url, "old").want(t, exitOK)
}

func TestSavepointsDelete(t *testing.T) {
	f, _ := newSavepointFixture(t, newDirFixture)
	for _, tc := range []struct{ name, out string }{
		{"v1", "deleted savepoint v1 of job wc (checkpoint 7, 3 tasks, 4 objects)\n"},
		{"aborted", "deleted incomplete savepoint aborted of job wc (1 objects)\n"},
		{"bad", "deleted savepoint bad of job wc (its manifest is corrupt, 4 objects)\n"},
	} {
		r := runCLI("savepoints", "delete", "--store", f.url, tc.name)
		r.want(t, exitOK)
		if r.stdout != tc.out || r.stderr != "" {
			t.Errorf("delete %s printed %q, stderr %q; want %q", tc.name, r.stdout, r.stderr, tc.out)
		}
		if keys, err := f.store.List(t.Context(), snapshots.SavepointPrefix("wc", tc.name)); err != nil || len(keys) != 0 {
			t.Errorf("delete %s left %q (%v)", tc.name, keys, err)
		}
		runCLI("savepoints", "delete", "--store", f.url, tc.name).want(t, exitNotFound, "job wc has no savepoint "+tc.name)
	}
	r := runCLI("savepoints", "list", "--store", f.url)
	r.want(t, exitOK)
	if got := rows(t, r.stdout, savepointsHeader); len(got) != 1 || got[0][0] != "old" {
		t.Errorf("list after the deletions printed\n%s\nwant only old", r.stdout)
	}
	if got := ids(t, f); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Errorf("deleting savepoints changed the checkpoints: %q", got)
	}
}

// TestShowOperators checks that checkpoints show prints the operators,
// operator ids and key-group ranges of a checkpoint that records them.
func TestShowOperators(t *testing.T) {
	f := newMemFixture(t, "wc")
	m := proto.CloneOf(f.manifests[2])
	m.CheckpointId, m.MaxParallelism, m.Operators = 4, 128, fixtureOperators
	for _, e := range m.GetTasks() {
		e.State = f.putState(t, 4, e.GetTaskId(), e.GetOperator(), e.GetSubtask())
		e.OperatorId = e.GetOperator() + "-id"
		e.KeyGroupStart, e.KeyGroupEnd = fixtureRanges[e.GetTaskId()][0], fixtureRanges[e.GetTaskId()][1]
	}
	if err := f.chks.PutManifest(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	r := runCLI("checkpoints", "show", "--store", f.url, "4")
	r.want(t, exitOK)
	got := lines(r.stdout)
	for _, want := range [][]string{
		{"max", "parallelism", "128"},
		{"operators", "2"},
		{"summer", "sum", "operator", "2", "true", "false", "2"},
		{"summer", "seen", "map", "string", "string", "string", "bool", "gob"},
		{"TASK", "OPERATOR", "OPERATOR-ID", "SUBTASK", "KEY-GROUPS", "OBJECT", "STATE", "STORED", "CRC32C", "REFERENCES"},
		{"source#0", "source", "source-id", "0", "-", snapshots.StateKey("wc", 4, "source#0")},
		{"sum#1", "sum", "sum-id", "1", "[64,128)", snapshots.StateKey("wc", 4, "sum#1")},
	} {
		if !slices.ContainsFunc(got, func(l []string) bool { return len(l) >= len(want) && slices.Equal(l[:len(want)], want) }) {
			t.Errorf("checkpoints show printed\n%s\nwith no line starting with the fields %q", r.stdout, want)
		}
	}
	if strings.Contains(r.stdout, "savepoint") {
		t.Errorf("checkpoints show printed a savepoint line:\n%s", r.stdout)
	}
}

func TestSavepointsUsageErrors(t *testing.T) {
	f, _ := newSavepointFixture(t, newDirFixture)
	s := f.url
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"savepoints", "show", "--store", s}, "missing the savepoint NAME"},
		{[]string{"savepoints", "verify", "--store", s, "v1", "old"}, `unexpected argument "old"`},
		{[]string{"savepoints", "delete", "--store", s, "v1", "--job", "wc"}, `flag --job after the argument "v1"`},
		{[]string{"savepoints", "show", "--store", s, "v1", "--json"}, "flag --json after the argument"},
		{[]string{"savepoints", "delete", "--store", s, "--forever", "v1"}, "flag provided but not defined: -forever"},
		{[]string{"savepoints", "show", "--store", s, "a/b"}, `snapshots: savepoint name "a/b" contains a '/'`},
		{[]string{"savepoints", "delete", "--store", s, ".."}, `snapshots: savepoint name ".."`},
		{[]string{"savepoints", "list", "--store", s, "v1"}, `unexpected argument "v1"`},
		{[]string{"savepoints", "list"}, "--store is required"},
		{[]string{"savepoints", "frob"}, `savepoints: unknown subcommand "frob"`},
		{[]string{"savepoints"}, "savepoints: missing subcommand"},
	} {
		r := runCLI(tc.args...)
		r.want(t, exitUsage, "snapflow: "+tc.msg)
		if r.stdout != "" {
			t.Errorf("%q printed %q", tc.args, r.stdout)
		}
		if len(tc.args) > 2 && !strings.Contains(r.stderr, "\nusage: snapflow savepoints "+tc.args[1]+" --store URL") {
			t.Errorf("%q: stderr has no synopsis:\n%s", tc.args, r.stderr)
		}
	}
	infos, err := f.chks.Savepoints(t.Context())
	if err != nil || len(infos) != 4 {
		t.Errorf("usage errors changed the savepoints: %+v (%v)", infos, err)
	}
}

func TestSavepointsHelp(t *testing.T) {
	for _, args := range [][]string{{"savepoints", "help"}, {"savepoints", "-h"}, {"savepoints", "--help"}} {
		r := runCLI(args...)
		r.want(t, exitOK, "Usage: snapflow", "savepoints show --store URL [--job NAME] [--json] NAME")
		if r.stdout != "" {
			t.Errorf("%q printed %q on stdout", args, r.stdout)
		}
	}
	for _, sub := range []string{"list", "show", "verify", "delete"} {
		for _, args := range [][]string{{"-h"}, {"--store", "x", "v1", "--help"}, {"--nonsense", "-help"}} {
			r := runCLI(append([]string{"savepoints", sub}, args...)...)
			r.want(t, exitOK, "usage: snapflow savepoints "+sub+" --store URL")
			if r.stdout != "" {
				t.Errorf("%s %q printed %q on stdout", sub, args, r.stdout)
			}
		}
	}
}
