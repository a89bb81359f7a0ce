package snapshotstest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

var savepointTests = []test{
	{"RoundTrip", testSavepointRoundTrip},
	{"Exists", testSavepointExists},
	{"CorruptState", testSavepointCorruptState},
	{"MissingState", testSavepointMissingState},
	{"CorruptManifest", testSavepointCorruptManifest},
	{"SelfContained", testSavepointSelfContained},
	{"PutValidation", testSavepointPutValidation},
	{"ManifestWriteFails", testSavepointManifestWriteFails},
	{"List", testSavepointList},
	{"Verify", testSavepointVerify},
	{"Delete", testSavepointDelete},
	{"IgnoredByCheckpoints", testSavepointsIgnoredByCheckpoints},
	{"SurviveRetention", testSavepointsSurviveRetention},
	{"Origin", testOrigin},
	{"OriginCorrupt", testOriginCorrupt},
	{"RetainKeepsOrigin", testRetainKeepsOrigin},
	{"LoadLatestSince", testLoadLatestSince},
	{"LoadCheckpoint", testLoadCheckpoint},
	{"DeleteAttempt", testSavepointDeleteAttempt},
}

// savepointID is the checkpoint id of the savepoints the tests take.
const savepointID = 7

// keyGroups are the key-group ranges of the default tasks in savepoints.
var keyGroups = map[string][2]uint32{"src#0": {0, 0}, "sum#0": {0, 64}, "sum#1": {64, 128}}

// putSavepointStates stores the tasks' states in savepoint name and
// returns the manifest entries, with operator ids and key-group ranges.
func putSavepointStates(t *testing.T, c *snapshots.Checkpoints, name string, tasks ...string) []*messages.TaskStateEntry {
	t.Helper()
	var entries []*messages.TaskStateEntry
	for _, task := range tasks {
		h, err := c.PutSavepointState(t.Context(), name, taskState(savepointID, task))
		if err != nil {
			t.Fatalf("PutSavepointState %q %s: %v", name, task, err)
		}
		if want := snapshots.SavepointStateKey(job, name, savepointID, task); h.GetKey() != want {
			t.Fatalf("handle key %q, want %q", h.GetKey(), want)
		}
		op, _, _ := strings.Cut(task, "#")
		kg := keyGroups[task]
		entries = append(entries, &messages.TaskStateEntry{
			TaskId: task, Operator: op, OperatorId: op + "-id", State: h,
			Parallelism: 2, KeyGroupStart: kg[0], KeyGroupEnd: kg[1],
		})
	}
	return entries
}

// savepointManifest returns the manifest of savepoint name with entries.
func savepointManifest(name string, entries []*messages.TaskStateEntry) *messages.Manifest {
	return &messages.Manifest{
		Job: job, CheckpointId: savepointID, Epoch: 2, TimestampUnixNano: savepointID * 1e9,
		Savepoint: name, MaxParallelism: 128, Tasks: entries,
		Operators: []*messages.OperatorEntry{
			{OperatorId: "src-id", Name: "src", Kind: "source", Parallelism: 1, Splits: true},
			{OperatorId: "sum-id", Name: "sum", Kind: "operator", Parallelism: 2, Keyed: true,
				States: []*messages.StateDescriptor{{Name: "sum", Kind: "value", KeyType: "string", ValueType: "int64", ValueCodec: "int64"}}},
		},
	}
}

// putSavepoint writes a complete savepoint of the default tasks.
func putSavepoint(t *testing.T, c *snapshots.Checkpoints, name string) *messages.Manifest {
	t.Helper()
	m := savepointManifest(name, putSavepointStates(t, c, name, defaultTasks...))
	if err := c.PutSavepointManifest(t.Context(), m); err != nil {
		t.Fatalf("PutSavepointManifest %q: %v", name, err)
	}
	return m
}

// wantSavepoint checks that LoadSavepoint returns m and the states that
// putSavepointStates wrote.
func wantSavepoint(t *testing.T, c *snapshots.Checkpoints, m *messages.Manifest) {
	t.Helper()
	r, err := c.LoadSavepoint(t.Context(), m.GetSavepoint())
	if err != nil {
		t.Fatalf("LoadSavepoint %q: %v", m.GetSavepoint(), err)
	}
	if !proto.Equal(r.Manifest, m) {
		t.Errorf("LoadSavepoint %q: manifest %v, want %v", m.GetSavepoint(), r.Manifest, m)
	}
	if len(r.States) != len(m.GetTasks()) {
		t.Errorf("LoadSavepoint %q: %d states for %d tasks", m.GetSavepoint(), len(r.States), len(m.GetTasks()))
	}
	for _, e := range m.GetTasks() {
		if st, want := r.States[e.GetTaskId()], taskState(savepointID, e.GetTaskId()); !proto.Equal(st, want) {
			t.Errorf("state of %s = %v, want %v", e.GetTaskId(), st, want)
		}
	}
}

// wantLoadFails checks that LoadSavepoint fails with an error wrapping
// want that names the savepoint and the key, and returns nothing.
func wantLoadFails(t *testing.T, c *snapshots.Checkpoints, name, key string, want error) {
	t.Helper()
	r, err := c.LoadSavepoint(t.Context(), name)
	if r != nil || !errors.Is(err, want) {
		t.Fatalf("LoadSavepoint %q = %v, %v; want an error wrapping %v", name, r, err, want)
	}
	for _, s := range []string{fmt.Sprintf("%q", name), key} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("LoadSavepoint error %q does not name %s", err, s)
		}
	}
}

func testSavepointRoundTrip(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	m := putSavepoint(t, c, "v1")
	wantSavepoint(t, c, m)
	if got, err := c.ReadSavepointManifest(t.Context(), "v1"); err != nil || !proto.Equal(got, m) {
		t.Errorf("ReadSavepointManifest = %v, %v; want %v", got, err, m)
	}
	fresh, _ := newCheckpoints(s)
	wantSavepoint(t, fresh, m)
	want := []string{snapshots.SavepointManifestKey(job, "v1")}
	for _, task := range defaultTasks {
		want = append(want, snapshots.SavepointStateKey(job, "v1", savepointID, task))
	}
	slices.Sort(want)
	wantKeys(t, s, "", want...)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

// testSavepointExists checks SavepointExists and that a second manifest
// under a name is refused without touching the first.
func testSavepointExists(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	wantExists := func(name string, want bool) {
		t.Helper()
		if got, err := c.SavepointExists(ctx, name); got != want || err != nil {
			t.Errorf("SavepointExists(%q) = %t, %v; want %t", name, got, err, want)
		}
	}
	wantExists("v1", false)
	entries := putSavepointStates(t, c, "v1", defaultTasks...)
	wantExists("v1", false) // states only: incomplete
	m := savepointManifest("v1", entries)
	if err := c.PutSavepointManifest(ctx, m); err != nil {
		t.Fatal(err)
	}
	wantExists("v1", true)
	wantExists("v", false) // a prefix of the name is another name
	wantExists("v10", false)
	complete(t, c, savepointID) // a checkpoint of the same id is no savepoint
	wantExists("chk-00000000000000000007", false)

	again := savepointManifest("v1", entries)
	again.Epoch = 9
	err := c.PutSavepointManifest(ctx, again)
	if !errors.Is(err, snapshots.ErrSavepointExists) || !strings.Contains(err.Error(), snapshots.SavepointManifestKey(job, "v1")) {
		t.Fatalf("second PutSavepointManifest = %v; want ErrSavepointExists naming the manifest", err)
	}
	wantSavepoint(t, c, m) // unchanged
	if _, err := c.SavepointExists(ctx, "a/b"); !errors.Is(err, snapshots.ErrInvalidSavepointName) {
		t.Errorf("SavepointExists(a/b) = %v, want ErrInvalidSavepointName", err)
	}
}

// testSavepointCorruptState checks that a corrupt state makes LoadSavepoint
// fail, naming the key, rather than fall back to a checkpoint.
func testSavepointCorruptState(t *testing.T, newStore newStoreFunc) {
	for _, cr := range corruptions {
		t.Run(cr.name, func(t *testing.T) {
			s := newStore(t)
			c, _ := newCheckpoints(s)
			complete(t, c, 1) // something a fallback could return
			putSavepoint(t, c, "v1")
			key := snapshots.SavepointStateKey(job, "v1", savepointID, "sum#1")
			other := mustGet(t, s, snapshots.SavepointStateKey(job, "v1", savepointID, "sum#0"))
			mustPut(t, s, key, cr.fn(mustGet(t, s, key), other))
			wantLoadFails(t, c, "v1", key, snapshots.ErrCorrupt)
			fresh, _ := newCheckpoints(s)
			wantLoadFails(t, fresh, "v1", key, snapshots.ErrCorrupt)
		})
	}
}

func testSavepointMissingState(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	putSavepoint(t, c, "v1")
	key := snapshots.SavepointStateKey(job, "v1", savepointID, "src#0")
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	wantLoadFails(t, c, "v1", key, snapshots.ErrNotFound)

	putSavepointStates(t, c, "v2", defaultTasks...) // incomplete
	wantLoadFails(t, c, "v2", snapshots.SavepointManifestKey(job, "v2"), snapshots.ErrNotFound)
	wantLoadFails(t, c, "v3", snapshots.SavepointManifestKey(job, "v3"), snapshots.ErrNotFound)
}

func testSavepointCorruptManifest(t *testing.T, newStore newStoreFunc) {
	for _, tc := range []struct {
		name string
		fn   func(s snapshots.Store) []byte
	}{
		{"garbage", func(snapshots.Store) []byte { return []byte{0xff, 0xff, 0xff} }},
		{"flipped bit", func(s snapshots.Store) []byte {
			d := mustGet(t, s, snapshots.SavepointManifestKey(job, "v1"))
			d[len(d)-3] ^= 1
			return d
		}},
		{"another savepoint's manifest", func(s snapshots.Store) []byte {
			return mustGet(t, s, snapshots.SavepointManifestKey(job, "v2"))
		}},
		{"a checkpoint's manifest", func(s snapshots.Store) []byte {
			return mustGet(t, s, snapshots.ManifestKey(job, 1))
		}},
		{"a state, not a manifest", func(s snapshots.Store) []byte {
			return mustGet(t, s, snapshots.SavepointStateKey(job, "v1", savepointID, "src#0"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			c, _ := newCheckpoints(s)
			complete(t, c, 1)
			putSavepoint(t, c, "v1")
			putSavepoint(t, c, "v2")
			key := snapshots.SavepointManifestKey(job, "v1")
			mustPut(t, s, key, tc.fn(s))
			wantLoadFails(t, c, "v1", key, snapshots.ErrCorrupt)
			if _, err := c.ReadSavepointManifest(t.Context(), "v1"); !errors.Is(err, snapshots.ErrCorrupt) {
				t.Errorf("ReadSavepointManifest = %v, want ErrCorrupt", err)
			}
		})
	}
	t.Run("another job's manifest", func(t *testing.T) {
		s := newStore(t)
		other := snapshots.NewCheckpoints(s, "other", nil)
		h, err := other.PutSavepointState(t.Context(), "v1", taskState(savepointID, "src#0"))
		if err != nil {
			t.Fatal(err)
		}
		m := savepointManifest("v1", []*messages.TaskStateEntry{{TaskId: "src#0", State: h}})
		m.Job = "other"
		if err := other.PutSavepointManifest(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		c, _ := newCheckpoints(s)
		key := snapshots.SavepointManifestKey(job, "v1")
		mustPut(t, s, key, mustGet(t, s, snapshots.SavepointManifestKey("other", "v1")))
		wantLoadFails(t, c, "v1", key, snapshots.ErrCorrupt)
	})
}

// testSavepointSelfContained checks that a savepoint may only reference
// its own objects: PutSavepointManifest refuses others, and a manifest
// that references them anyway is corrupt.
func testSavepointSelfContained(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	chk := complete(t, c, 1)
	other := putSavepoint(t, c, "v2")
	for name, outside := range map[string]*messages.TaskStateEntry{
		"a checkpoint's state":      chk.GetTasks()[0],
		"another savepoint's state": other.GetTasks()[0],
	} {
		entries := append(putSavepointStates(t, c, "v1", defaultTasks[1:]...), outside)
		m := savepointManifest("v1", entries)
		if err := c.PutSavepointManifest(ctx, m); err == nil || !strings.Contains(err.Error(), outside.GetState().GetKey()) {
			t.Errorf("PutSavepointManifest referencing %s = %v; want a refusal naming %s", name, err, outside.GetState().GetKey())
		}
		if ok, _ := c.SavepointExists(ctx, "v1"); ok {
			t.Fatalf("the refused manifest referencing %s was written", name)
		}
		data, err := snapshots.EncodeObject(snapshots.KindManifest, m)
		if err != nil {
			t.Fatal(err)
		}
		key := snapshots.SavepointManifestKey(job, "v1")
		mustPut(t, s, key, data)
		wantLoadFails(t, c, "v1", key, snapshots.ErrCorrupt)
		if err := s.Delete(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
}

func testSavepointPutValidation(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	for _, name := range []string{"", "a/b", `a\b`, "..", ".tmp-x", "a\x00b", "tab\there", "\xff", strings.Repeat("x", 129)} {
		if _, err := c.PutSavepointState(ctx, name, taskState(1, "src#0")); !errors.Is(err, snapshots.ErrInvalidSavepointName) {
			t.Errorf("PutSavepointState(%q) = %v, want ErrInvalidSavepointName", name, err)
		}
		m := &messages.Manifest{Job: job, CheckpointId: 1, Savepoint: name}
		if err := c.PutSavepointManifest(ctx, m); !errors.Is(err, snapshots.ErrInvalidSavepointName) {
			t.Errorf("PutSavepointManifest(%q) = %v, want ErrInvalidSavepointName", name, err)
		}
	}
	for _, task := range []string{"", "a/b"} {
		if _, err := c.PutSavepointState(ctx, "v1", &messages.TaskState{TaskId: task}); err == nil {
			t.Errorf("PutSavepointState with task id %q succeeded", task)
		}
	}
	entries := putSavepointStates(t, c, "v1", "sum#0")
	good := savepointManifest("v1", entries)
	for name, change := range map[string]func(m *messages.Manifest){
		"other job":        func(m *messages.Manifest) { m.Job = "other" },
		"id 0":             func(m *messages.Manifest) { m.CheckpointId = 0 },
		"no handle":        func(m *messages.Manifest) { m.Tasks[0].State = nil },
		"twice":            func(m *messages.Manifest) { m.Tasks = append(m.Tasks, m.Tasks[0]) },
		"bad task id":      func(m *messages.Manifest) { m.Tasks[0].TaskId = "" },
		"reversed range":   func(m *messages.Manifest) { m.Tasks[0].KeyGroupStart, m.Tasks[0].KeyGroupEnd = 9, 3 },
		"range too far":    func(m *messages.Manifest) { m.Tasks[0].KeyGroupEnd = 129 },
		"state elsewhere":  func(m *messages.Manifest) { m.Tasks[0].State.Key = snapshots.StateKey(job, 1, "sum#0") },
		"no savepoint set": func(m *messages.Manifest) { m.Savepoint = "" },
	} {
		m := proto.CloneOf(good)
		change(m)
		if err := c.PutSavepointManifest(ctx, m); err == nil {
			t.Errorf("PutSavepointManifest %s succeeded", name)
		}
	}
	if err := c.PutSavepointManifest(ctx, nil); err == nil {
		t.Error("PutSavepointManifest(nil) succeeded")
	}
	wantKeys(t, s, "", snapshots.SavepointStateKey(job, "v1", savepointID, "sum#0"))
	// A savepoint's manifest is not a checkpoint's.
	if err := c.PutManifest(ctx, &messages.Manifest{Job: job, CheckpointId: 1, Savepoint: "v1"}); err == nil {
		t.Error("PutManifest of a manifest naming a savepoint succeeded")
	}
}

// testSavepointManifestWriteFails checks that PutSavepointManifest tells
// the truth when the store's Put fails, as PutManifest does.
func testSavepointManifestWriteFails(t *testing.T, newStore newStoreFunc) {
	t.Run("landed", func(t *testing.T) {
		s := newStore(t)
		c, logs := newCheckpoints(&faultyStore{Store: s, putLands: true})
		m := putSavepoint(t, c, "v1") // fails the test unless nil
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), `savepoint=v1`) {
			t.Errorf("no warning about the failed write of savepoint v1 logged:\n%s", logs)
		}
		wantSavepoint(t, c, m)
	})
	t.Run("absent", func(t *testing.T) {
		s := newStore(t)
		c, _ := newCheckpoints(&faultyStore{Store: s, putFails: true})
		err := c.PutSavepointManifest(t.Context(), savepointManifest("v1", putSavepointStates(t, c, "v1", defaultTasks...)))
		if !errors.Is(err, errInjected) || errors.Is(err, snapshots.ErrManifestInDoubt) {
			t.Fatalf("PutSavepointManifest = %v, want the Put's error, not in doubt", err)
		}
		wantNotFound(t, s, snapshots.SavepointManifestKey(job, "v1"))
	})
	t.Run("in doubt", func(t *testing.T) {
		s := newStore(t)
		c, _ := newCheckpoints(&faultyStore{Store: s, putFails: true, getFails: true})
		err := c.PutSavepointManifest(t.Context(), savepointManifest("v1", putSavepointStates(t, c, "v1", defaultTasks...)))
		if !errors.Is(err, snapshots.ErrManifestInDoubt) || !strings.Contains(err.Error(), `savepoint "v1"`) ||
			!strings.Contains(err.Error(), snapshots.SavepointManifestKey(job, "v1")) {
			t.Fatalf("PutSavepointManifest = %v, want ErrManifestInDoubt naming the savepoint and its manifest", err)
		}
	})
}

func testSavepointList(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	if infos, err := c.Savepoints(ctx); len(infos) != 0 || err != nil {
		t.Errorf("Savepoints on an empty store = %+v, %v; want none", infos, err)
	}
	mb := putSavepoint(t, c, "b")
	putSavepointStates(t, c, "a", "src#0") // incomplete
	mab := putSavepoint(t, c, "a-b")       // sorts before "a/" in key order
	putSavepoint(t, c, "c")
	mustPut(t, s, snapshots.SavepointManifestKey(job, "c"), []byte("garbage"))
	complete(t, c, 1)
	other := snapshots.NewCheckpoints(s, job+"2", nil) // another job's savepoints are not ours
	if _, err := other.PutSavepointState(ctx, "z", taskState(1, "src#0")); err != nil {
		t.Fatal(err)
	}
	infos, err := c.Savepoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
	}
	if want := []string{"a", "a-b", "b", "c"}; !slices.Equal(names, want) {
		t.Fatalf("Savepoints = %+v; want the names %q", infos, want)
	}
	a, ab, b, cc := infos[0], infos[1], infos[2], infos[3]
	if a.Complete || a.Objects != 1 || a.Manifest != nil || a.Err != nil {
		t.Errorf("Savepoints[a] = %+v, want incomplete, 1 object", a)
	}
	if !ab.Complete || ab.Objects != 4 || !proto.Equal(ab.Manifest, mab) || ab.Err != nil {
		t.Errorf("Savepoints[a-b] = %+v, want complete, 4 objects, its manifest", ab)
	}
	if !b.Complete || b.Objects != 4 || !proto.Equal(b.Manifest, mb) || b.Err != nil {
		t.Errorf("Savepoints[b] = %+v, want complete, 4 objects, its manifest", b)
	}
	if !cc.Complete || cc.Objects != 4 || cc.Manifest != nil || !errors.Is(cc.Err, snapshots.ErrCorrupt) {
		t.Errorf("Savepoints[c] = %+v, want complete, 4 objects, a corrupt manifest", cc)
	}
}

func testSavepointVerify(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	putSavepoint(t, c, "v1")
	if err := c.VerifySavepoint(ctx, "v1"); err != nil {
		t.Errorf("VerifySavepoint of a good savepoint: %v", err)
	}
	putSavepointStates(t, c, "v2", "src#0")
	if err := c.VerifySavepoint(ctx, "v2"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("VerifySavepoint of an incomplete savepoint: %v, want ErrNotFound", err)
	}
	corrupt := snapshots.SavepointStateKey(job, "v1", savepointID, "sum#0")
	missing := snapshots.SavepointStateKey(job, "v1", savepointID, "sum#1")
	mustPut(t, s, corrupt, []byte("garbage"))
	if err := s.Delete(ctx, missing); err != nil {
		t.Fatal(err)
	}
	err := c.VerifySavepoint(ctx, "v1")
	if !errors.Is(err, snapshots.ErrCorrupt) || !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("VerifySavepoint = %v, want both ErrCorrupt and ErrNotFound", err)
	}
	for _, want := range []string{corrupt, missing, `"v1"`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("VerifySavepoint error %v does not name %s", err, want)
		}
	}
	mustPut(t, s, snapshots.SavepointManifestKey(job, "v1"), []byte("garbage"))
	if err := c.VerifySavepoint(ctx, "v1"); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("VerifySavepoint with a corrupt manifest: %v, want ErrCorrupt", err)
	}
}

func testSavepointDelete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	complete(t, c, 1)
	m2 := putSavepoint(t, c, "v2")
	putSavepoint(t, c, "v1")
	putSavepointStates(t, c, "aborted", "src#0", "sum#0")
	keep := append(mustList(t, s, snapshots.CheckpointPrefix(job, 1)), mustList(t, s, snapshots.SavepointPrefix(job, "v2"))...)
	for _, name := range []string{"v1", "aborted"} {
		if err := c.DeleteSavepoint(ctx, name); err != nil {
			t.Fatalf("DeleteSavepoint(%q): %v", name, err)
		}
		if err := c.DeleteSavepoint(ctx, name); !errors.Is(err, snapshots.ErrNotFound) || !strings.Contains(err.Error(), name) {
			t.Errorf("DeleteSavepoint(%q) again = %v; want ErrNotFound naming it", name, err)
		}
	}
	wantKeys(t, s, "", keep...)
	wantSavepoint(t, c, m2)
	wantLoaded(t, c, 1)
	if err := c.DeleteSavepoint(ctx, "../x"); !errors.Is(err, snapshots.ErrInvalidSavepointName) {
		t.Errorf("DeleteSavepoint(../x) = %v, want ErrInvalidSavepointName", err)
	}
	if err := c.DeleteSavepoint(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if infos, err := c.Savepoints(ctx); len(infos) != 0 || err != nil {
		t.Errorf("Savepoints after deleting all = %+v, %v", infos, err)
	}
	wantKeys(t, s, "", mustList(t, s, snapshots.CheckpointPrefix(job, 1))...)
}

// testSavepointsIgnoredByCheckpoints checks that savepoints and the origin
// are invisible to the checkpoint scans.
func testSavepointsIgnoredByCheckpoints(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	putSavepoint(t, c, "v1")
	putSavepointStates(t, c, "v2", "src#0")
	putOrigin(t, c, &messages.Origin{Savepoint: "v1", CheckpointId: savepointID, FirstId: 8})
	if id, err := c.MaxID(ctx); id != 0 || err != nil {
		t.Errorf("MaxID with only savepoints = %d, %v; want 0", id, err)
	}
	if infos, err := c.List(ctx); len(infos) != 0 || err != nil {
		t.Errorf("List with only savepoints = %+v, %v; want none", infos, err)
	}
	if r := loadLatest(t, c); r != nil {
		t.Errorf("LoadLatest with only savepoints = checkpoint %d", r.Manifest.GetCheckpointId())
	}
	complete(t, c, 1)
	putStates(t, c, 2, "src#0")
	infos, err := c.List(ctx)
	if err != nil || len(infos) != 2 || infos[0].ID != 1 || infos[1].ID != 2 {
		t.Errorf("List = %+v, %v; want checkpoints 1 and 2", infos, err)
	}
	if id, err := c.MaxID(ctx); id != 2 || err != nil {
		t.Errorf("MaxID = %d, %v; want 2", id, err)
	}
	wantLoaded(t, c, 1)
}

// testSavepointsSurviveRetention checks that Retain, DeleteIncomplete and
// DeleteAll never touch a savepoint, complete or not, and that DeleteAll
// deletes the origin but leaves the lease.
func testSavepointsSurviveRetention(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	putSavepoint(t, c, "v1")
	putSavepointStates(t, c, "aborted", "src#0")
	hold(t, c, "a", false)
	leaseKeys := []string{snapshots.LeaseClaimKey(job, 1), snapshots.LeaseRenewalKey(job, 1), snapshots.LeaseSealKey(job, 1)}
	for id := range uint64(4) {
		complete(t, c, id+1)
	}
	putStates(t, c, 5, defaultTasks...) // aborted
	putSavepoint(t, c, "v2")
	putOrigin(t, c, &messages.Origin{Savepoint: "v1", CheckpointId: savepointID, FirstId: 1})
	savepoints := mustList(t, s, snapshots.SavepointsPrefix(job))
	if len(savepoints) != 9 {
		t.Fatalf("savepoint keys %q, want 9", savepoints)
	}
	wantSavepoints := func(op string) {
		t.Helper()
		if got := mustList(t, s, snapshots.SavepointsPrefix(job)); !slices.Equal(got, savepoints) {
			t.Errorf("after %s the savepoint keys are\n\t%q\nwant\n\t%q", op, got, savepoints)
		}
	}
	if err := c.Retain(ctx, 1, 6); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantSavepoints("Retain")
	if keys := mustList(t, s, snapshots.CheckpointsPrefix(job)); !slices.Equal(keys, keysOf(t, s, 3, 4)) {
		t.Errorf("Retain left the checkpoint keys %q, want checkpoint 4's and its fallback 3's", keys)
	}
	putStates(t, c, 6, "src#0")
	if n, err := c.DeleteIncomplete(ctx, 7); n != 1 || err != nil {
		t.Errorf("DeleteIncomplete = %d, %v; want 1", n, err)
	}
	wantSavepoints("DeleteIncomplete")
	if n, err := c.DeleteAll(ctx); n != 2 || err != nil {
		t.Errorf("DeleteAll = %d, %v; want 2", n, err)
	}
	wantSavepoints("DeleteAll")
	want := append(slices.Clone(savepoints), leaseKeys...)
	slices.Sort(want)
	wantKeys(t, s, "", want...)
	if o, err := c.ReadOrigin(ctx); o != nil || err != nil {
		t.Errorf("ReadOrigin after DeleteAll = %v, %v; want nil, nil", o, err)
	}
	if err := c.CheckLease(ctx); err != nil {
		t.Errorf("CheckLease after DeleteAll: %v", err)
	}
	if err := c.DeleteSavepoint(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSavepoint(ctx, "v2"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSavepoint(ctx, "aborted"); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, s, "", leaseKeys...)
}

func putOrigin(t *testing.T, c *snapshots.Checkpoints, o *messages.Origin) {
	t.Helper()
	if err := c.PutOrigin(t.Context(), o); err != nil {
		t.Fatalf("PutOrigin(%v): %v", o, err)
	}
}

func wantOrigin(t *testing.T, c *snapshots.Checkpoints, want *messages.Origin) {
	t.Helper()
	got, err := c.ReadOrigin(t.Context())
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("ReadOrigin = %v, %v; want %v", got, err, want)
	}
}

func testOrigin(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	wantOrigin(t, c, nil)
	sp := &messages.Origin{Savepoint: "v1", CheckpointId: savepointID, FirstId: 12, TimestampUnixNano: 5e9}
	putOrigin(t, c, sp)
	wantOrigin(t, c, sp)
	wantKeys(t, s, "", snapshots.OriginKey(job))
	chk := &messages.Origin{CheckpointId: 3, FirstId: 13}
	putOrigin(t, c, chk) // replaces
	wantOrigin(t, c, chk)
	other, _ := newCheckpoints(s)
	wantOrigin(t, other, chk)
	wantOrigin(t, snapshots.NewCheckpoints(s, job+"2", nil), nil)

	for name, o := range map[string]*messages.Origin{
		"nil":                nil,
		"nothing named":      {FirstId: 1},
		"first id 0":         {CheckpointId: 3},
		"bad savepoint name": {Savepoint: "a/b", FirstId: 1},
	} {
		if err := c.PutOrigin(ctx, o); err == nil || !strings.Contains(err.Error(), snapshots.OriginKey(job)) {
			t.Errorf("PutOrigin %s = %v; want a refusal naming the key", name, err)
		}
	}
	wantOrigin(t, c, chk)
	for range 2 {
		if err := c.DeleteOrigin(ctx); err != nil {
			t.Fatalf("DeleteOrigin: %v", err)
		}
	}
	wantOrigin(t, c, nil)
	wantKeys(t, s, "")
}

func testOriginCorrupt(t *testing.T, newStore newStoreFunc) {
	valid, err := snapshots.EncodeObject(snapshots.KindOrigin, &messages.Origin{CheckpointId: 3, FirstId: 4})
	if err != nil {
		t.Fatal(err)
	}
	zero, err := snapshots.EncodeObject(snapshots.KindOrigin, &messages.Origin{CheckpointId: 3})
	if err != nil {
		t.Fatal(err)
	}
	lease, err := snapshots.EncodeObject(snapshots.KindLease, &messages.Lease{Holder: "a", FirstEpoch: 1})
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"garbage":     []byte("garbage"),
		"flipped bit": func() []byte { d := slices.Clone(valid); d[len(d)-2] ^= 1; return d }(),
		"first id 0":  zero,
		"a lease":     lease,
	} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			c, _ := newCheckpoints(s)
			mustPut(t, s, snapshots.OriginKey(job), data)
			o, err := c.ReadOrigin(t.Context())
			if o != nil || !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), snapshots.OriginKey(job)) {
				t.Fatalf("ReadOrigin = %v, %v; want ErrCorrupt naming the key", o, err)
			}
			complete(t, c, 1)
			complete(t, c, 2)
			if err := c.Retain(t.Context(), 1, 3); !errors.Is(err, snapshots.ErrCorrupt) {
				t.Errorf("Retain with a corrupt origin = %v, want ErrCorrupt", err)
			}
			if len(keysOf(t, s, 1)) == 0 {
				t.Error("Retain with a corrupt origin deleted checkpoint 1")
			}
		})
	}
}

// testRetainKeepsOrigin checks that retention keeps the checkpoint a job
// was started from until the job has a usable checkpoint of its own.
func testRetainKeepsOrigin(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	for id := range uint64(4) {
		complete(t, c, id+1)
	}
	putOrigin(t, c, &messages.Origin{CheckpointId: 2, FirstId: 10})
	want := keysOf(t, s, 2, 4)
	if err := c.Retain(ctx, 1, 5); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, snapshots.CheckpointsPrefix(job), want...)

	complete(t, c, 10)
	mustPut(t, s, snapshots.StateKey(job, 10, "src#0"), []byte("garbage")) // unusable: not yet the job's own
	want = keysOf(t, s, 2, 4, 10)
	c, _ = newCheckpoints(s) // one that did not write 10, so reads its states
	if err := c.Retain(ctx, 1, 11); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, snapshots.CheckpointsPrefix(job), want...)

	complete(t, c, 11)
	want = keysOf(t, s, 11)
	if err := c.Retain(ctx, 1, 12); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, snapshots.CheckpointsPrefix(job), want...)

	putOrigin(t, c, &messages.Origin{Savepoint: "v1", CheckpointId: savepointID, FirstId: 20})
	complete(t, c, 12)
	if err := c.Retain(ctx, 1, 13); err != nil { // a savepoint origin keeps no checkpoint
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, snapshots.CheckpointsPrefix(job), keysOf(t, s, 12)...)
}

func testLoadLatestSince(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	for _, id := range []uint64{1, 2, 3, 5} {
		complete(t, c, id)
	}
	putStates(t, c, 6, defaultTasks...) // incomplete
	since := func(first uint64) (*snapshots.Restorable, error) {
		t.Helper()
		fresh, _ := newCheckpoints(s)
		return fresh.LoadLatestSince(ctx, first)
	}
	for first, want := range map[uint64]uint64{0: 5, 1: 5, 4: 5, 5: 5} {
		if r, err := since(first); err != nil || r.Manifest.GetCheckpointId() != want {
			t.Errorf("LoadLatestSince(%d) = %v, %v; want checkpoint %d", first, r, err, want)
		}
	}
	for _, first := range []uint64{6, 7, 1 << 63} {
		if r, err := since(first); r != nil || err != nil {
			t.Errorf("LoadLatestSince(%d) = %v, %v; want nil, nil", first, r, err)
		}
	}
	corrupt := snapshots.StateKey(job, 5, "sum#0")
	mustPut(t, s, corrupt, []byte("garbage"))
	if r, err := since(2); err != nil || r.Manifest.GetCheckpointId() != 3 {
		t.Errorf("LoadLatestSince(2) with 5 corrupt = %v, %v; want checkpoint 3", r, err)
	}
	r, err := since(4)
	if r != nil || !errors.Is(err, snapshots.ErrNoUsableCheckpoint) || !strings.Contains(err.Error(), corrupt) {
		t.Fatalf("LoadLatestSince(4) with 5 corrupt = %v, %v; want ErrNoUsableCheckpoint naming %s", r, err, corrupt)
	}
	if strings.Contains(err.Error(), "checkpoint 3") {
		t.Errorf("LoadLatestSince(4) error %q names checkpoint 3, below the first", err)
	}
}

func testLoadCheckpoint(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	m1 := complete(t, c, 1)
	complete(t, c, 2)
	putStates(t, c, 3, defaultTasks...) // incomplete
	r, err := c.LoadCheckpoint(ctx, 1)
	if err != nil || !proto.Equal(r.Manifest, m1) || len(r.States) != len(defaultTasks) {
		t.Fatalf("LoadCheckpoint(1) = %v, %v; want checkpoint 1", r, err)
	}
	for _, task := range defaultTasks {
		if !proto.Equal(r.States[task], taskState(1, task)) {
			t.Errorf("state of %s = %v", task, r.States[task])
		}
	}
	corrupt := snapshots.StateKey(job, 2, "sum#1")
	mustPut(t, s, corrupt, []byte("garbage"))
	for _, tc := range []struct {
		id   uint64
		key  string
		want error
	}{
		{2, corrupt, snapshots.ErrCorrupt},
		{3, snapshots.ManifestKey(job, 3), snapshots.ErrNotFound},
		{4, snapshots.ManifestKey(job, 4), snapshots.ErrNotFound},
	} {
		fresh, _ := newCheckpoints(s)
		r, err := fresh.LoadCheckpoint(ctx, tc.id)
		if r != nil || !errors.Is(err, tc.want) {
			t.Errorf("LoadCheckpoint(%d) = %v, %v; want an error wrapping %v, no fallback", tc.id, r, err, tc.want)
			continue
		}
		for _, s := range []string{fmt.Sprintf("checkpoint %d", tc.id), tc.key} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("LoadCheckpoint(%d) error %q does not name %s", tc.id, err, s)
			}
		}
	}
}

// testSavepointDeleteAttempt: cleaning up a failed attempt at a savepoint
// deletes that attempt's objects only: never the complete savepoint of the
// same name, which it refuses to delete as an attempt.
func testSavepointDeleteAttempt(t *testing.T, newStore newStoreFunc) {
	c := snapshots.NewCheckpoints(newStore(t), job, nil)
	m := putSavepoint(t, c, "v1")
	// A later attempt at the same name, which fails: its states land, its
	// manifest is refused.
	for _, task := range []string{"sum#0", "sum#1"} {
		if _, err := c.PutSavepointState(t.Context(), "v1", taskState(savepointID+1, task)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := c.DeleteSavepointAttempt(t.Context(), "v1", savepointID+1)
	if err != nil || n != 2 {
		t.Fatalf("DeleteSavepointAttempt = %d, %v; want the attempt's 2 objects", n, err)
	}
	wantSavepoint(t, c, m)
	if _, err := c.DeleteSavepointAttempt(t.Context(), "v1", savepointID); !errors.Is(err, snapshots.ErrSavepointExists) {
		t.Errorf("deleting the complete savepoint as an attempt: %v, want ErrSavepointExists", err)
	}
	wantSavepoint(t, c, m)
	if n, err := c.DeleteSavepointAttempt(t.Context(), "none", 3); n != 0 || err != nil {
		t.Errorf("an attempt that stored nothing: %d, %v", n, err)
	}
}
