package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// incFixture is a store holding the incremental checkpoints 1, 2 and 3 of
// job "inc": task sum#0 holds key groups 0-3, stored in full at 1, with
// key group 1 changed at 2 and key group 2 at 3, each referencing the
// others where earlier checkpoints stored them; task source#0 is small
// enough to travel inline in every manifest.
type incFixture struct {
	url     string
	store   snapshots.Store
	chks    *snapshots.Checkpoints
	handles map[uint64]map[string]*messages.StateHandle // by checkpoint, then task
}

// inlineLimit makes source#0's state inline and sum#0's not.
const inlineLimit = 200

func newIncFixture(t *testing.T, url string) *incFixture {
	t.Helper()
	ctx := t.Context()
	s, err := snapshots.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	f := &incFixture{url: url, store: s, chks: snapshots.NewCheckpoints(s, "inc", nil), handles: map[uint64]map[string]*messages.StateHandle{}}
	f.chks.SetInlineLimit(inlineLimit)
	group := func(kg uint32, at uint64) *messages.KeyGroupState {
		return &messages.KeyGroupState{KeyGroup: kg, States: []*messages.NamedState{{Name: "total", Entries: []*messages.StateEntry{
			{Key: fmt.Appendf(nil, "key-%d", kg), Value: []byte(strings.Repeat(fmt.Sprint(at), 100))},
		}}}}
	}
	var prev *messages.StateHandle
	for _, step := range []struct {
		id      uint64
		changed []uint32
	}{{1, []uint32{0, 1, 2, 3}}, {2, []uint32{1}}, {3, []uint32{2}}} {
		st := &messages.TaskState{Job: "inc", TaskId: "sum#0", Operator: "sum", CheckpointId: step.id}
		for _, kg := range step.changed {
			st.KeyGroups = append(st.KeyGroups, group(kg, step.id))
		}
		var refs []*messages.KeyGroupSection
		if prev != nil {
			secs, ok := snapshots.Sections(prev)
			if !ok {
				t.Fatalf("checkpoint %d: the previous state of sum#0 cannot be referenced", step.id)
			}
			for _, sec := range secs {
				if !slices.Contains(step.changed, sec.GetKeyGroup()) {
					refs = append(refs, sec)
				}
			}
		}
		sum, err := f.chks.PutTaskStateRefs(ctx, step.id, st, refs)
		if err != nil {
			t.Fatal(err)
		}
		src, err := f.chks.PutTaskState(ctx, step.id, &messages.TaskState{Job: "inc", TaskId: "source#0", Operator: "source",
			CheckpointId: step.id, SourceOffset: fmt.Append(nil, step.id), HasSourceOffset: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(src.GetInline()) == 0 || len(sum.GetInline()) > 0 {
			t.Fatalf("checkpoint %d: source#0 inline %t, sum#0 inline %t; want only source#0 inline (sizes %d, %d)",
				step.id, len(src.GetInline()) > 0, len(sum.GetInline()) > 0, src.GetSize(), sum.GetSize())
		}
		m := &messages.Manifest{Job: "inc", CheckpointId: step.id, Epoch: 1, TimestampUnixNano: baseTime.Add(time.Duration(step.id) * time.Second).UnixNano(),
			Tasks: []*messages.TaskStateEntry{
				{TaskId: "source#0", Operator: "source", State: src},
				{TaskId: "sum#0", Operator: "sum", State: sum},
			}}
		if err := f.chks.PutManifest(ctx, m); err != nil {
			t.Fatal(err)
		}
		f.handles[step.id] = map[string]*messages.StateHandle{"source#0": src, "sum#0": sum}
		prev = sum
	}
	return f
}

// sizes returns what the states of checkpoint id hold and what storing
// them took, computed from the handles rather than by the code under test.
func (f *incFixture) sizes(id uint64) (state, stored uint64) {
	for _, h := range f.handles[id] {
		state += snapshots.StateSize(h)
		stored += h.GetSize() // an object's, or the inline bytes in the manifest
	}
	return state, stored
}

// refBytes returns the bytes that sum#0's state at id references in
// earlier objects.
func (f *incFixture) refBytes(id uint64) uint64 {
	h := f.handles[id]["sum#0"]
	return snapshots.StateSize(h) - h.GetSize()
}

// listed returns the fields of the line list prints for checkpoint id, and
// the line itself.
func listed(t *testing.T, url string, id uint64) ([]string, string) {
	t.Helper()
	r := runCLI("checkpoints", "list", "--store", url)
	r.want(t, exitOK)
	for l := range strings.Lines(r.stdout) {
		if fs := strings.Fields(l); len(fs) > 0 && fs[0] == fmt.Sprint(id) {
			return fs, l
		}
	}
	t.Fatalf("list printed no checkpoint %d:\n%s", id, r.stdout)
	return nil, ""
}

func incStores() []struct {
	name string
	url  func(*testing.T) string
} {
	return []struct {
		name string
		url  func(*testing.T) string
	}{
		{"dir", func(t *testing.T) string { return t.TempDir() }},
		{"mem", func(t *testing.T) string {
			return "mem://" + strings.NewReplacer("/", "-", "#", "-").Replace(t.Name())
		}},
	}
}

// TestListIncremental checks that list gives each checkpoint's whole state
// and what it stored, which checkpoints it references and which reference
// it, and its inline states.
func TestListIncremental(t *testing.T) {
	for _, tc := range incStores() {
		t.Run(tc.name, func(t *testing.T) {
			f := newIncFixture(t, tc.url(t))
			for id, note := range map[uint64]string{
				1: "referenced by checkpoints 2, 3; 1 of 2 states inline",
				2: "references checkpoint 1; referenced by checkpoint 3; 1 of 2 states inline",
				3: "references checkpoints 1, 2; 1 of 2 states inline",
			} {
				note += fmt.Sprintf(" (%d bytes in the manifest)", f.handles[id]["source#0"].GetSize())
				fs, line := listed(t, f.url, id)
				state, stored := f.sizes(id)
				want := []string{fmt.Sprint(id), baseTime.Add(time.Duration(id) * time.Second).Format(time.RFC3339), "2",
					fmt.Sprint(state), fmt.Sprint(stored), "complete"}
				if !slices.Equal(fs[:min(len(fs), len(want))], want) || !strings.HasSuffix(strings.TrimSpace(line), "complete  "+note) {
					t.Errorf("checkpoint %d listed as %q, want the fields %q then the note %q", id, line, want, note)
				}
			}
			// An incremental checkpoint stores less than its state.
			if state, stored := f.sizes(3); stored*2 > state {
				t.Fatalf("checkpoint 3 stored %d of %d bytes: the fixture is not incremental", stored, state)
			}
		})
	}
}

// TestShowIncremental checks the state and stored sizes show prints, the
// key groups referenced in earlier checkpoints, and inline states.
func TestShowIncremental(t *testing.T) {
	f := newIncFixture(t, t.TempDir())
	r := runCLI("checkpoints", "show", "--store", f.url, "3")
	r.want(t, exitOK)
	got := lines(r.stdout)
	state, stored := f.sizes(3)
	for _, want := range [][]string{
		{"tasks", "2"},
		{"state", fmt.Sprint(state), "bytes"},
		{"stored", fmt.Sprint(stored), "bytes", "(1", "object,", "1", "state", "inline:", fmt.Sprint(f.handles[3]["source#0"].GetSize()), "bytes", "in", "the", "manifest)"},
		{"references", "3", "key", "groups,", fmt.Sprint(f.refBytes(3)), "bytes,", "in", "checkpoints", "1,", "2"},
		{"TASK", "OPERATOR", "SUBTASK", "OBJECT", "STATE", "STORED", "CRC32C", "REFERENCES"},
		{"source#0", "source", "0", snapshots.StateKey("inc", 3, "source#0"), fmt.Sprint(f.handles[3]["source#0"].GetSize()), "inline",
			fmt.Sprintf("%08x", f.handles[3]["source#0"].GetCrc32C()), "-"},
		{"sum#0", "sum", "0", snapshots.StateKey("inc", 3, "sum#0"), fmt.Sprint(snapshots.StateSize(f.handles[3]["sum#0"])),
			fmt.Sprint(f.handles[3]["sum#0"].GetSize()), fmt.Sprintf("%08x", f.handles[3]["sum#0"].GetCrc32C()),
			"3", "key", "groups", fmt.Sprintf("(%d", f.refBytes(3)), "bytes)", "in", "checkpoints", "1,", "2"},
	} {
		if !slices.ContainsFunc(got, func(l []string) bool { return slices.Equal(l, want) }) {
			t.Errorf("show 3 printed\n%s\nwith no line of the fields %q", r.stdout, want)
		}
	}
	// A full checkpoint references nothing.
	r = runCLI("checkpoints", "show", "--store", f.url, "1")
	r.want(t, exitOK)
	if strings.Contains(r.stdout, "references") || strings.Contains(r.stdout, "key groups") {
		t.Errorf("show 1 printed references:\n%s", r.stdout)
	}
}

// TestVerifyIncremental checks that verify reads the inline states and the
// referenced sections, and fails a checkpoint whose referenced object is
// damaged, naming it, while the checkpoint that stored it fails too.
func TestVerifyIncremental(t *testing.T) {
	f := newIncFixture(t, t.TempDir())
	r := runCLI("checkpoints", "verify", "--store", f.url, "3")
	r.want(t, exitOK)
	for _, want := range []string{
		"ok    " + snapshots.StateKey("inc", 3, "source#0") + "  task source#0, " +
			fmt.Sprintf("%d bytes inline in the manifest, crc32c %08x", f.handles[3]["source#0"].GetSize(), f.handles[3]["source#0"].GetCrc32C()),
		"ok    " + snapshots.StateKey("inc", 3, "sum#0") + "  task sum#0, " +
			fmt.Sprintf("%d bytes in its object, crc32c %08x, and 3 key groups (%d bytes) referenced in checkpoints 1, 2",
				f.handles[3]["sum#0"].GetSize(), f.handles[3]["sum#0"].GetCrc32C(), f.refBytes(3)),
	} {
		if !strings.Contains(r.stdout, want+"\n") {
			t.Errorf("verify 3 printed\n%s\nwithout the line %q", r.stdout, want)
		}
	}
	damaged := snapshots.StateKey("inc", 1, "sum#0")
	data, err := f.store.Get(t.Context(), damaged)
	if err != nil {
		t.Fatal(err)
	}
	secs, _ := snapshots.Sections(f.handles[1]["sum#0"])
	kg0 := secs[0] // referenced by every checkpoint
	if kg0.GetKeyGroup() != 0 {
		t.Fatalf("the first section of checkpoint 1 is key group %d", kg0.GetKeyGroup())
	}
	data[kg0.GetOffset()+kg0.GetLength()/2] ^= 0xff
	if err := f.store.Put(t.Context(), damaged, data); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{1, 2, 3} {
		r = runCLI("checkpoints", "verify", "--store", f.url, fmt.Sprint(id))
		r.want(t, exitFailed, fmt.Sprintf("checkpoint %d of job inc: 1 of 2 task states failed verification", id))
		if !strings.Contains(r.stdout, "FAIL  "+snapshots.StateKey("inc", id, "sum#0")) || !strings.Contains(r.stdout, damaged) {
			t.Errorf("verify %d printed\n%s\nwant sum#0 failed, naming %s", id, r.stdout, damaged)
		}
	}
}

// TestDeleteIncremental checks that deleting a checkpoint keeps what newer
// ones reference, says so, and leaves them verifying; that list and show
// call such a directory kept, not incomplete; and that it goes once nothing
// references it.
func TestDeleteIncremental(t *testing.T) {
	for _, tc := range incStores() {
		t.Run(tc.name, func(t *testing.T) {
			f := newIncFixture(t, tc.url(t))
			del := func(args ...string) result {
				return runCLI(append([]string{"checkpoints", "delete", "--store", f.url}, args...)...)
			}
			r := del("1")
			r.want(t, exitOK)
			if want := "deleted checkpoint 1 of job inc (1 object; kept 1 object that checkpoints 2, 3 reference)\n"; r.stdout != want {
				t.Errorf("delete 1 printed %q, want %q", r.stdout, want)
			}
			for _, id := range []string{"2", "3"} {
				runCLI("checkpoints", "verify", "--store", f.url, id).want(t, exitOK)
			}
			fs, line := listed(t, f.url, 1)
			if want := []string{"1", "-", "1", "-", "-", "kept"}; !slices.Equal(fs[:min(len(fs), 6)], want) ||
				!strings.Contains(line, "a deleted checkpoint's objects, referenced by checkpoints 2, 3") {
				t.Errorf("list printed %q for checkpoint 1, want the fields %q and who references it", line, want)
			}
			for _, cmd := range []string{"show", "verify"} {
				runCLI("checkpoints", cmd, "--store", f.url, "1").want(t, exitFailed,
					"checkpoint 1 of job inc was deleted: it has no manifest, and keeps only objects that checkpoints 2, 3 reference")
			}
			r = del("--force", "1")
			r.want(t, exitFailed, "checkpoint 1 of job inc has no manifest and holds only objects that checkpoints 2, 3 reference",
				"there is nothing to delete")
			if len(f.keys(t, 1)) != 1 {
				t.Errorf("checkpoint 1 holds %q after a refused delete", f.keys(t, 1))
			}

			r = del("2")
			r.want(t, exitOK)
			if want := "deleted checkpoint 2 of job inc (1 object; kept 1 object that checkpoint 3 references)\n"; r.stdout != want {
				t.Errorf("delete 2 printed %q, want %q", r.stdout, want)
			}
			runCLI("checkpoints", "verify", "--store", f.url, "3").want(t, exitOK)
			rp, err := f.chks.LoadLatest(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var values []string
			for _, g := range rp.States["sum#0"].GetKeyGroups() {
				values = append(values, string(g.GetStates()[0].GetEntries()[0].GetValue()[:1]))
			}
			if want := []string{"1", "2", "3", "1"}; rp.Manifest.GetCheckpointId() != 3 || !slices.Equal(values, want) {
				t.Errorf("restored checkpoint %d with key groups written at %q, want 3 with %q", rp.Manifest.GetCheckpointId(), values, want)
			}

			// An interrupted deletion leaves an object nothing references
			// beside the kept ones: that directory is not all kept.
			if err := f.store.Put(t.Context(), snapshots.StateKey("inc", 2, "gone#0"), []byte("x")); err != nil {
				t.Fatal(err)
			}
			fs, line = listed(t, f.url, 2)
			if fs[5] != "incomplete" || !strings.Contains(line, "1 of 2 objects referenced by checkpoint 3") {
				t.Errorf("list printed %q for checkpoint 2, want it incomplete with 1 of 2 objects referenced", line)
			}

			// With 3 gone, nothing references 1 and 2 any more.
			r = del("--force", "3")
			r.want(t, exitOK)
			if want := "deleted checkpoint 3 of job inc (2 objects)\n"; r.stdout != want {
				t.Errorf("delete --force 3 printed %q, want %q", r.stdout, want)
			}
			for _, id := range []uint64{1, 2} {
				if fs, line := listed(t, f.url, id); fs[5] != "incomplete" || len(fs) != 6 {
					t.Errorf("list printed %q for checkpoint %d, want it incomplete without a note", line, id)
				}
			}
			r = del("1")
			r.want(t, exitOK)
			if want := "deleted incomplete checkpoint 1 of job inc (1 object)\n"; r.stdout != want {
				t.Errorf("delete 1 printed %q, want %q", r.stdout, want)
			}
		})
	}
}

// keys returns the keys of checkpoint id in the store.
func (f *incFixture) keys(t *testing.T, id uint64) []string {
	t.Helper()
	keys, err := f.store.List(t.Context(), snapshots.CheckpointPrefix("inc", id))
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// TestListAllInline: a checkpoint whose states all travel inline lists
// the bytes its manifest holds for them as STORED (on main: 0), and says
// so in its note.
func TestListAllInline(t *testing.T) {
	url := t.TempDir()
	s, err := snapshots.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	chks := snapshots.NewCheckpoints(s, "inline", nil)
	chks.SetInlineLimit(1 << 20)
	m := &messages.Manifest{Job: "inline", CheckpointId: 1, Epoch: 1, TimestampUnixNano: baseTime.UnixNano()}
	var stored uint64
	for i := range 3 {
		id := fmt.Sprintf("source#%d", i)
		h, err := chks.PutTaskState(t.Context(), 1, &messages.TaskState{Job: "inline", TaskId: id, Operator: "source", CheckpointId: 1,
			SourceOffset: fmt.Append(nil, strings.Repeat("x", 10*(i+1))), HasSourceOffset: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(h.GetInline()) == 0 {
			t.Fatalf("%s's state is not inline", id)
		}
		stored += uint64(len(h.GetInline()))
		m.Tasks = append(m.Tasks, &messages.TaskStateEntry{TaskId: id, Operator: "source", Subtask: uint32(i), State: h})
	}
	if err := chks.PutManifest(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	fs, line := listed(t, url, 1)
	want := []string{"1", baseTime.Format(time.RFC3339), "3", fmt.Sprint(stored), fmt.Sprint(stored), "complete"}
	note := fmt.Sprintf("3 of 3 states inline (%d bytes in the manifest)", stored)
	if !slices.Equal(fs[:min(len(fs), len(want))], want) || !strings.HasSuffix(strings.TrimSpace(line), "complete  "+note) {
		t.Errorf("checkpoint 1 listed as %q, want the fields %q then the note %q", line, want, note)
	}
}
