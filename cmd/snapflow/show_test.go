package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func TestShow(t *testing.T) {
	f := newDirFixture(t, "wc")
	for _, id := range []string{"2", "chk-00000000000000000002", "latest"} {
		r := runCLI("checkpoints", "show", "--store", f.url, id)
		if id == "latest" {
			r.want(t, exitOK, "snapflow: latest is checkpoint 2 of job wc\n")
		} else {
			r.want(t, exitOK)
		}
		got := lines(r.stdout)
		header := [][]string{
			{"job", "wc"}, {"checkpoint", "2"}, {"epoch", "2"},
			{"time", "2026-03-01T10:00:02Z"}, {"fingerprint", "fp-1234"}, {"final", "true"},
			{"tasks", "3"}, {"state", fmt.Sprint(f.bytes(2)), "bytes"},
			{"stored", fmt.Sprint(f.bytes(2)), "bytes", "(3", "objects,", "0", "states", "inline)"},
			{},
			{"TASK", "OPERATOR", "SUBTASK", "OBJECT", "STATE", "STORED", "CRC32C", "REFERENCES"},
		}
		if len(got) < len(header) || !slices.EqualFunc(got[:len(header)], header, slices.Equal) {
			t.Fatalf("show %s printed\n%s\nwant it to start with the fields %q", id, r.stdout, header)
		}
		var rows [][]string
		for _, e := range f.manifests[2].GetTasks() {
			h := e.GetState()
			rows = append(rows, []string{e.GetTaskId(), e.GetOperator(), fmt.Sprint(e.GetSubtask()),
				h.GetKey(), fmt.Sprint(h.GetSize()), fmt.Sprint(h.GetSize()), fmt.Sprintf("%08x", h.GetCrc32C()), "-"})
		}
		if !slices.EqualFunc(got[len(header):], rows, slices.Equal) {
			t.Errorf("show %s printed the tasks\n%q\nwant\n%q", id, got[len(header):], rows)
		}
		for _, row := range rows { // each task's object lies in the checkpoint's folder, named after the task
			if !strings.HasSuffix(row[3], "/chk-00000000000000000002/"+row[0]+".state") {
				t.Errorf("task %s maps to %s", row[0], row[3])
			}
		}
	}
}

func TestShowJSON(t *testing.T) {
	f := newMemFixture(t, "wc")
	r := runCLI("checkpoints", "show", "--store", f.url, "--json", "1")
	r.want(t, exitOK)
	var m messages.Manifest
	if err := protojson.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("show --json printed\n%s\nwhich does not parse: %v", r.stdout, err)
	}
	if !proto.Equal(&m, f.manifests[1]) {
		t.Errorf("show --json gave %v, want %v", &m, f.manifests[1])
	}
}

func TestShowIncomplete(t *testing.T) {
	f := newDirFixture(t, "wc")
	r := runCLI("checkpoints", "show", "--store", f.url, "3")
	r.want(t, exitFailed, "snapflow: checkpoint 3 of job wc is incomplete: it has no manifest")
	if r.stdout != "" {
		t.Errorf("printed %q", r.stdout)
	}
}

// TestShowLatestJSON checks that latest leaves stdout to the JSON.
func TestShowLatestJSON(t *testing.T) {
	f := newMemFixture(t, "wc")
	r := runCLI("checkpoints", "show", "--store", f.url, "--json", "latest")
	r.want(t, exitOK, "latest is checkpoint 2")
	var m messages.Manifest
	if err := protojson.Unmarshal([]byte(r.stdout), &m); err != nil || !proto.Equal(&m, f.manifests[2]) {
		t.Errorf("show --json latest printed\n%s\nwant checkpoint 2's manifest (%v)", r.stdout, err)
	}
}

// TestShowInFlight: an unaligned checkpoint's manifest says how many bytes
// of records in flight it stored, in all and per task.
func TestShowInFlight(t *testing.T) {
	m := &messages.Manifest{Job: "u", CheckpointId: 3, Tasks: []*messages.TaskStateEntry{
		{TaskId: "map#0", Operator: "map", State: &messages.StateHandle{Key: "u/chk-3/map#0.state", Size: 10}, InFlightBytes: 4096},
		{TaskId: "sink#0", Operator: "sink", State: &messages.StateHandle{Key: "u/chk-3/sink#0.state", Size: 10}},
	}}
	var b strings.Builder
	if err := printManifest(&b, m); err != nil {
		t.Fatal(err)
	}
	got := lines(b.String())
	if !slices.ContainsFunc(got, func(l []string) bool {
		return slices.Equal(l, strings.Fields("in flight 4096 bytes (unaligned: records stored as channel state)"))
	}) {
		t.Errorf("no in-flight line in\n%s", b.String())
	}
	if n := len(got); n < 2 || !slices.Equal(got[n-2], []string{"TASK", "IN-FLIGHT-BYTES"}) || !slices.Equal(got[n-1], []string{"map#0", "4096"}) {
		t.Errorf("the tasks' in-flight bytes end\n%s", b.String())
	}
	m.Tasks[0].InFlightBytes = 0
	b.Reset()
	if err := printManifest(&b, m); err != nil || strings.Contains(b.String(), "IN-FLIGHT") || strings.Contains(b.String(), "in flight") {
		t.Errorf("an aligned checkpoint's manifest: %v\n%s", err, b.String())
	}
}
