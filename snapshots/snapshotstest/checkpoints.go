package snapshotstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

const job = "job"

var checkpointTests = []test{
	{"LoadLatest", testLoadLatest},
	{"Empty", testEmpty},
	{"IncompleteIgnored", testIncompleteIgnored},
	{"CorruptStateFallsBack", testCorruptStateFallsBack},
	{"MissingStateFallsBack", testMissingStateFallsBack},
	{"CorruptManifestFallsBack", testCorruptManifestFallsBack},
	{"NoUsableCheckpoint", testNoUsableCheckpoint},
	{"LoadLatestCancelled", testLoadLatestCancelled},
	{"ManyTasks", testManyTasks},
	{"ReadTaskState", testReadTaskState},
	{"PutValidation", testPutValidation},
	{"List", testCheckpointList},
	{"MaxID", testMaxID}, // and LatestCompleteID
	{"Delete", testCheckpointDelete},
	{"Retain", testRetain},
	{"RetainKeepsReferenced", testRetainKeepsReferenced},
	{"RetainCorruptNewest", testRetainCorruptNewest},
	{"RetainUsable", testRetainUsable},
	{"RetainUnusableDoNotCount", testRetainUnusableDoNotCount},
	{"RetainNoUsable", testRetainNoUsable},
	{"RetainKeepsReferencedByUnusable", testRetainKeepsReferencedByUnusable},
	{"RetainVerifiesOnce", testRetainVerifiesOnce},
	{"ManifestWriteFails", testManifestWriteFails},
	{"DeleteIncomplete", testDeleteIncomplete},
	{"DeleteAll", testDeleteAll},
	{"Verify", testVerify},
}

// logBuffer collects log output for assertions.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newCheckpoints(s snapshots.Store) (*snapshots.Checkpoints, *logBuffer) {
	var logs logBuffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	return snapshots.NewCheckpoints(s, job, log), &logs
}

func taskState(id uint64, task string) *messages.TaskState {
	op, _, _ := strings.Cut(task, "#")
	return &messages.TaskState{
		Job:           job,
		TaskId:        task,
		Operator:      op,
		CheckpointId:  id,
		OperatorState: fmt.Appendf(nil, "%s@%d", task, id),
		KeyGroups: []*messages.KeyGroupState{{
			KeyGroup: 3,
			States: []*messages.NamedState{{
				Name:    "sum",
				Entries: []*messages.StateEntry{{Key: []byte("k"), Value: fmt.Appendf(nil, "%d", id)}},
			}},
		}},
	}
}

// putStates stores the tasks' states of checkpoint id and returns the
// manifest entries.
func putStates(t *testing.T, c *snapshots.Checkpoints, id uint64, tasks ...string) []*messages.TaskStateEntry {
	t.Helper()
	var entries []*messages.TaskStateEntry
	for _, task := range tasks {
		h, err := c.PutTaskState(t.Context(), id, taskState(id, task))
		if err != nil {
			t.Fatalf("PutTaskState %d %s: %v", id, task, err)
		}
		if h.GetKey() != snapshots.StateKey(job, id, task) {
			t.Fatalf("handle key %q, want %q", h.GetKey(), snapshots.StateKey(job, id, task))
		}
		entries = append(entries, &messages.TaskStateEntry{TaskId: task, State: h})
	}
	return entries
}

// manifestOf returns the manifest of checkpoint id with entries.
func manifestOf(id uint64, entries []*messages.TaskStateEntry) *messages.Manifest {
	return &messages.Manifest{Job: job, CheckpointId: id, Epoch: 1, TimestampUnixNano: int64(id) * 1e9, Tasks: entries}
}

func putManifest(t *testing.T, c *snapshots.Checkpoints, id uint64, entries []*messages.TaskStateEntry) *messages.Manifest {
	t.Helper()
	m := manifestOf(id, entries)
	if err := c.PutManifest(t.Context(), m); err != nil {
		t.Fatalf("PutManifest %d: %v", id, err)
	}
	return m
}

var defaultTasks = []string{"src#0", "sum#0", "sum#1"}

// complete writes a complete checkpoint of the default tasks.
func complete(t *testing.T, c *snapshots.Checkpoints, id uint64) *messages.Manifest {
	t.Helper()
	return putManifest(t, c, id, putStates(t, c, id, defaultTasks...))
}

func loadLatest(t *testing.T, c *snapshots.Checkpoints) *snapshots.Restorable {
	t.Helper()
	r, err := c.LoadLatest(t.Context())
	if err != nil {
		t.Fatalf("LoadLatest: %v", err)
	}
	return r
}

// wantLoaded checks that LoadLatest returns checkpoint id with the states
// written by complete or putStates.
func wantLoaded(t *testing.T, c *snapshots.Checkpoints, id uint64) {
	t.Helper()
	r := loadLatest(t, c)
	if r == nil {
		t.Fatalf("LoadLatest = nil, want checkpoint %d", id)
	}
	if got := r.Manifest.GetCheckpointId(); got != id {
		t.Fatalf("LoadLatest = checkpoint %d, want %d", got, id)
	}
	if len(r.States) != len(r.Manifest.GetTasks()) {
		t.Errorf("LoadLatest: %d states for %d tasks", len(r.States), len(r.Manifest.GetTasks()))
	}
	for _, e := range r.Manifest.GetTasks() {
		st := r.States[e.GetTaskId()]
		if want := taskState(st.GetCheckpointId(), e.GetTaskId()); !proto.Equal(st, want) {
			t.Errorf("state of %s = %v, want %v", e.GetTaskId(), st, want)
		}
	}
}

// wantLogged checks that the log holds an error about the checkpoint and key.
func wantLogged(t *testing.T, logs *logBuffer, id uint64, key string) {
	t.Helper()
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, fmt.Sprintf("checkpoint=%d ", id)) &&
			strings.Contains(line, key) {
			return
		}
	}
	t.Errorf("no error logged for checkpoint %d and key %s; log:\n%s", id, key, logs)
}

func testLoadLatest(t *testing.T, newStore newStoreFunc) {
	c, logs := newCheckpoints(newStore(t))
	complete(t, c, 1)
	m := complete(t, c, 2)
	wantLoaded(t, c, 2)
	r := loadLatest(t, c)
	if !proto.Equal(r.Manifest, m) {
		t.Errorf("manifest = %v, want %v", r.Manifest, m)
	}
	for _, task := range defaultTasks {
		if st := r.States[task]; st.GetCheckpointId() != 2 {
			t.Errorf("state of %s from checkpoint %d, want 2", task, st.GetCheckpointId())
		}
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs)
	}
}

func testEmpty(t *testing.T, newStore newStoreFunc) {
	c, _ := newCheckpoints(newStore(t))
	ctx := t.Context()
	if r := loadLatest(t, c); r != nil {
		t.Errorf("LoadLatest on an empty store = checkpoint %d, want nil", r.Manifest.GetCheckpointId())
	}
	if id, err := c.MaxID(ctx); id != 0 || err != nil {
		t.Errorf("MaxID = %d, %v; want 0, nil", id, err)
	}
	if infos, err := c.List(ctx); len(infos) != 0 || err != nil {
		t.Errorf("List = %v, %v; want none", infos, err)
	}
	if err := c.Retain(ctx, 1, 1); err != nil {
		t.Errorf("Retain: %v", err)
	}
	if err := c.Verify(ctx, 1); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Verify of a missing checkpoint: %v, want ErrNotFound", err)
	}
}

func testIncompleteIgnored(t *testing.T, newStore newStoreFunc) {
	c, _ := newCheckpoints(newStore(t))
	complete(t, c, 1)
	putStates(t, c, 2, defaultTasks...) // never completed
	wantLoaded(t, c, 1)
}

// corruptions turn a stored state object into something that must not load.
var corruptions = []struct {
	name string
	fn   func(data, other []byte) []byte
}{
	{"garbage", func([]byte, []byte) []byte { return []byte("this is not a protobuf envelope") }},
	{"empty", func([]byte, []byte) []byte { return nil }},
	{"truncated", func(d, _ []byte) []byte { return d[:len(d)-1] }},
	{"flipped bit", func(d, _ []byte) []byte { d = slices.Clone(d); d[len(d)/2] ^= 0x10; return d }},
	{"other task's state", func(_, o []byte) []byte { return o }},
}

func testCorruptStateFallsBack(t *testing.T, newStore newStoreFunc) {
	for _, cr := range corruptions {
		t.Run(cr.name, func(t *testing.T) {
			s := newStore(t)
			c, logs := newCheckpoints(s)
			complete(t, c, 1)
			complete(t, c, 2)
			key := snapshots.StateKey(job, 2, "sum#1")
			other := mustGet(t, s, snapshots.StateKey(job, 2, "sum#0"))
			mustPut(t, s, key, cr.fn(mustGet(t, s, key), other))
			wantLoaded(t, c, 1)
			wantLogged(t, logs, 2, key)
		})
	}
}

func testMissingStateFallsBack(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	complete(t, c, 1)
	complete(t, c, 2)
	key := snapshots.StateKey(job, 2, "src#0")
	if err := s.Delete(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	wantLoaded(t, c, 1)
	wantLogged(t, logs, 2, key)
}

func testCorruptManifestFallsBack(t *testing.T, newStore newStoreFunc) {
	for _, tc := range []struct {
		name string
		fn   func(s snapshots.Store) []byte
	}{
		{"garbage", func(snapshots.Store) []byte { return []byte{0xff, 0xff, 0xff} }},
		{"flipped bit", func(s snapshots.Store) []byte {
			d := mustGet(t, s, snapshots.ManifestKey(job, 2))
			d[len(d)-3] ^= 1
			return d
		}},
		{"another checkpoint's manifest", func(s snapshots.Store) []byte {
			return mustGet(t, s, snapshots.ManifestKey(job, 1))
		}},
		{"a state, not a manifest", func(s snapshots.Store) []byte {
			return mustGet(t, s, snapshots.StateKey(job, 2, "src#0"))
		}},
		{"a savepoint's manifest", func(s snapshots.Store) []byte {
			m := manifestOf(2, nil)
			m.Savepoint = "v1"
			data, err := snapshots.EncodeObject(snapshots.KindManifest, m)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			c, logs := newCheckpoints(s)
			complete(t, c, 1)
			complete(t, c, 2)
			key := snapshots.ManifestKey(job, 2)
			mustPut(t, s, key, tc.fn(s))
			wantLoaded(t, c, 1)
			wantLogged(t, logs, 2, key)
		})
	}
	t.Run("missing object in manifest", func(t *testing.T) {
		s := newStore(t)
		c, logs := newCheckpoints(s)
		complete(t, c, 1)
		entries := putStates(t, c, 2, defaultTasks...)
		missing := &messages.StateHandle{Key: snapshots.StateKey(job, 2, "ghost#0"), Size: 10, Crc32C: 1}
		entries = append(entries, &messages.TaskStateEntry{TaskId: "ghost#0", State: missing})
		putManifest(t, c, 2, entries)
		wantLoaded(t, c, 1)
		wantLogged(t, logs, 2, missing.GetKey())
	})
}

// testNoUsableCheckpoint checks that LoadLatest refuses to return nothing
// when complete checkpoints exist but none is usable, naming each.
func testNoUsableCheckpoint(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, logs := newCheckpoints(s)
	complete(t, c, 1)
	complete(t, c, 2)
	putStates(t, c, 3, defaultTasks...) // incomplete: not a candidate
	corrupt := snapshots.StateKey(job, 1, "sum#0")
	mustPut(t, s, corrupt, []byte("garbage"))
	missing := snapshots.StateKey(job, 2, "src#0")
	if err := s.Delete(t.Context(), missing); err != nil {
		t.Fatal(err)
	}
	fresh, _ := newCheckpoints(s)
	for name, c := range map[string]*snapshots.Checkpoints{"writer": c, "fresh": fresh} {
		r, err := c.LoadLatest(t.Context())
		if r != nil || !errors.Is(err, snapshots.ErrNoUsableCheckpoint) {
			t.Fatalf("%s: LoadLatest = %v, %v; want ErrNoUsableCheckpoint", name, r, err)
		}
		if !errors.Is(err, snapshots.ErrCorrupt) || !errors.Is(err, snapshots.ErrNotFound) {
			t.Errorf("%s: LoadLatest error %v does not wrap the causes (ErrCorrupt, ErrNotFound)", name, err)
		}
		for _, want := range []string{"checkpoint 1", "checkpoint 2", corrupt, missing, job} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: LoadLatest error %q does not name %s", name, err, want)
			}
		}
		if strings.Contains(err.Error(), "checkpoint 3") {
			t.Errorf("%s: LoadLatest error %q names the incomplete checkpoint 3", name, err)
		}
	}
	wantLogged(t, logs, 1, corrupt)
	wantLogged(t, logs, 2, missing)

	// Only incomplete checkpoints: nothing to restore, and no error.
	only, _ := newCheckpoints(newStore(t))
	putStates(t, only, 1, defaultTasks...)
	if r := loadLatest(t, only); r != nil {
		t.Errorf("LoadLatest with only an incomplete checkpoint = checkpoint %d, want nil", r.Manifest.GetCheckpointId())
	}
}

func testLoadLatestCancelled(t *testing.T, newStore newStoreFunc) {
	c, _ := newCheckpoints(newStore(t))
	complete(t, c, 1)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if r, err := c.LoadLatest(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("LoadLatest with a cancelled context = %v, %v; want context.Canceled", r, err)
	}
}

func testManyTasks(t *testing.T, newStore newStoreFunc) {
	c, _ := newCheckpoints(newStore(t))
	var tasks []string
	for i := range 40 {
		tasks = append(tasks, fmt.Sprintf("map#%d", i))
	}
	putManifest(t, c, 1, putStates(t, c, 1, tasks...))
	wantLoaded(t, c, 1)
}

func testReadTaskState(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	h := putStates(t, c, 1, "sum#0")[0].GetState()
	data := mustGet(t, s, h.GetKey())
	if h.GetSize() != uint64(len(data)) || h.GetCrc32C() != snapshots.Checksum(data) {
		t.Errorf("handle %v does not describe the %d stored bytes", h, len(data))
	}
	st, err := c.ReadTaskState(ctx, h)
	if err != nil || !proto.Equal(st, taskState(1, "sum#0")) {
		t.Errorf("ReadTaskState = %v, %v", st, err)
	}
	for _, tc := range []struct {
		name string
		h    *messages.StateHandle
		want error
	}{
		{"wrong size", &messages.StateHandle{Key: h.GetKey(), Size: h.GetSize() + 1, Crc32C: h.GetCrc32C()}, snapshots.ErrCorrupt},
		{"wrong crc", &messages.StateHandle{Key: h.GetKey(), Size: h.GetSize(), Crc32C: h.GetCrc32C() ^ 1}, snapshots.ErrCorrupt},
		{"missing", &messages.StateHandle{Key: snapshots.StateKey(job, 1, "nope#0")}, snapshots.ErrNotFound},
		{"invalid key", &messages.StateHandle{Key: "../x"}, snapshots.ErrInvalidKey},
		{"nil", nil, snapshots.ErrInvalidKey},
	} {
		_, err := c.ReadTaskState(ctx, tc.h)
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: ReadTaskState: %v, want %v", tc.name, err, tc.want)
		} else if tc.h.GetKey() != "" && !strings.Contains(err.Error(), tc.h.GetKey()) {
			t.Errorf("%s: error %q does not name the key", tc.name, err)
		}
	}
}

func testPutValidation(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	for _, task := range []string{"", "a/b"} {
		if _, err := c.PutTaskState(ctx, 1, &messages.TaskState{TaskId: task}); err == nil {
			t.Errorf("PutTaskState with task id %q succeeded", task)
		}
	}
	entries := putStates(t, c, 1, "sum#0")
	for name, m := range map[string]*messages.Manifest{
		"nil":         nil,
		"other job":   {Job: "other", CheckpointId: 1, Tasks: entries},
		"id 0":        {Job: job, Tasks: entries},
		"no handle":   {Job: job, CheckpointId: 1, Tasks: []*messages.TaskStateEntry{{TaskId: "sum#0"}}},
		"twice":       {Job: job, CheckpointId: 1, Tasks: append(slices.Clone(entries), entries...)},
		"bad task id": {Job: job, CheckpointId: 1, Tasks: []*messages.TaskStateEntry{{State: entries[0].GetState()}}},
		"bad key":     {Job: job, CheckpointId: 1, Tasks: []*messages.TaskStateEntry{{TaskId: "x#0", State: &messages.StateHandle{Key: "/x"}}}},
		"savepoint":   {Job: job, CheckpointId: 1, Savepoint: "v1", Tasks: entries},
		"reversed key groups": {Job: job, CheckpointId: 1, Tasks: []*messages.TaskStateEntry{
			{TaskId: "sum#0", State: entries[0].GetState(), KeyGroupStart: 5, KeyGroupEnd: 4}}},
		"key groups beyond max parallelism": {Job: job, CheckpointId: 1, MaxParallelism: 8, Tasks: []*messages.TaskStateEntry{
			{TaskId: "sum#0", State: entries[0].GetState(), KeyGroupStart: 4, KeyGroupEnd: 9}}},
	} {
		if err := c.PutManifest(ctx, m); err == nil {
			t.Errorf("PutManifest %s succeeded", name)
		}
	}
	wantKeys(t, s, "", snapshots.StateKey(job, 1, "sum#0"))
}

func testCheckpointList(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	m1 := complete(t, c, 1)
	putStates(t, c, 2, "src#0")
	complete(t, c, 3)
	mustPut(t, s, snapshots.ManifestKey(job, 3), []byte("garbage"))
	mustPut(t, s, snapshots.CheckpointsPrefix(job)+"not-a-checkpoint", []byte("x"))
	infos, err := c.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(infos) != 3 {
		t.Fatalf("List = %+v, want 3 checkpoints", infos)
	}
	var bytes1 int64
	for _, e := range m1.GetTasks() {
		bytes1 += int64(e.GetState().GetSize())
	}
	i1, i2, i3 := infos[0], infos[1], infos[2]
	if i1.ID != 1 || !i1.Complete || i1.Tasks != 3 || i1.Objects != 4 || i1.Bytes != bytes1 ||
		i1.Time.UnixNano() != m1.GetTimestampUnixNano() || i1.Err != nil {
		t.Errorf("List[0] = %+v, want checkpoint 1, complete, 3 tasks, 4 objects, %d bytes", i1, bytes1)
	}
	if i2.ID != 2 || i2.Complete || i2.Objects != 1 || i2.Tasks != 0 || !i2.Time.IsZero() {
		t.Errorf("List[1] = %+v, want checkpoint 2, incomplete, 1 object", i2)
	}
	if i3.ID != 3 || !i3.Complete || i3.Objects != 4 || !errors.Is(i3.Err, snapshots.ErrCorrupt) {
		t.Errorf("List[2] = %+v, want checkpoint 3, complete, 4 objects, a corrupt manifest", i3)
	}
}

func testMaxID(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	wantMax := func(want uint64) {
		t.Helper()
		if id, err := c.MaxID(t.Context()); id != want || err != nil {
			t.Errorf("MaxID = %d, %v; want %d", id, err, want)
		}
	}
	wantLatest := func(want uint64) {
		t.Helper()
		if id, err := c.LatestCompleteID(t.Context()); id != want || err != nil {
			t.Errorf("LatestCompleteID = %d, %v; want %d", id, err, want)
		}
	}
	wantLatest(0)
	wantMax(0)
	complete(t, c, 1)
	complete(t, c, 3)
	wantMax(3)
	wantLatest(3)
	putStates(t, c, 7, "src#0") // incomplete counts too
	wantMax(7)
	wantLatest(3) // but is not complete
	mustPut(t, s, snapshots.ManifestKey(job, 3), []byte("garbage"))
	wantLatest(3) // complete, though corrupt

	other := snapshots.NewCheckpoints(s, job+"2", nil) // another job is not ours
	if _, err := other.PutTaskState(t.Context(), 9, taskState(9, "src#0")); err != nil {
		t.Fatal(err)
	}
	wantMax(7)
	if err := c.Delete(t.Context(), 7); err != nil {
		t.Fatal(err)
	}
	wantMax(3)
}

func testCheckpointDelete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	complete(t, c, 1)
	complete(t, c, 2)
	keep := mustList(t, s, snapshots.CheckpointPrefix(job, 1))
	for range 2 {
		if err := c.Delete(t.Context(), 2); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	wantKeys(t, s, "", keep...)
	wantLoaded(t, c, 1)
}

func testRetain(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	for _, id := range []uint64{1, 2, 3, 5} {
		complete(t, c, id)
	}
	putStates(t, c, 4, defaultTasks...) // aborted
	putStates(t, c, 6, "src#0")         // in flight
	keysOf := func(ids ...uint64) []string {
		var keys []string
		for _, id := range ids {
			keys = append(keys, mustList(t, s, snapshots.CheckpointPrefix(job, id))...)
		}
		return keys
	}
	want := keysOf(3, 5, 6)
	if err := c.Retain(ctx, 2, 6); err != nil {
		t.Fatalf("Retain(2, 6): %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 5)

	want = keysOf(3, 5)                         // 3 is 5's fallback: they share no object
	if err := c.Retain(ctx, 0, 7); err != nil { // keep < 1 keeps one
		t.Fatalf("Retain(0, 7): %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 5)

	if err := c.Retain(ctx, 1, 100); err != nil {
		t.Fatalf("Retain(1, 100): %v", err)
	}
	wantKeys(t, s, "", want...)
}

// testRetainKeepsReferenced stores a checkpoint whose manifest reuses an
// older checkpoint's object, as an incremental checkpoint would.
func testRetainKeepsReferenced(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	m1 := complete(t, c, 1)
	reused := m1.GetTasks()[0]
	entries := append([]*messages.TaskStateEntry{reused}, putStates(t, c, 2, defaultTasks[1:]...)...)
	putManifest(t, c, 2, entries)
	// 1 shares an object with 2, so no fallback shares none yet: 1 is
	// kept, to become one.
	want := keysOf(t, s, 1, 2)
	if err := c.Retain(ctx, 1, 3); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 2)

	// 2 shares no object with 3: it is the fallback, with the object of 1
	// that it references.
	complete(t, c, 3)
	want = append(append([]string{reused.GetState().GetKey()}, keysOf(t, s, 2)...), keysOf(t, s, 3)...)
	slices.Sort(want)
	if err := c.Retain(ctx, 1, 4); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 3)
}

func testRetainCorruptNewest(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	for id := range uint64(3) {
		complete(t, c, id+1)
	}
	mustPut(t, s, snapshots.ManifestKey(job, 3), []byte("garbage"))
	want := keysOf(t, s, 1, 2, 3) // 1 is 2's fallback
	if err := c.Retain(t.Context(), 1, 4); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, "", want...)
	wantLoaded(t, c, 2)
}

func testVerify(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	complete(t, c, 1)
	if err := c.Verify(ctx, 1); err != nil {
		t.Errorf("Verify of a good checkpoint: %v", err)
	}
	putStates(t, c, 2, "src#0")
	if err := c.Verify(ctx, 2); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Verify of an incomplete checkpoint: %v, want ErrNotFound", err)
	}
	corrupt := snapshots.StateKey(job, 1, "sum#0")
	missing := snapshots.StateKey(job, 1, "sum#1")
	mustPut(t, s, corrupt, []byte("garbage"))
	if err := s.Delete(ctx, missing); err != nil {
		t.Fatal(err)
	}
	err := c.Verify(ctx, 1)
	if !errors.Is(err, snapshots.ErrCorrupt) || !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Verify = %v, want both ErrCorrupt and ErrNotFound", err)
	}
	if err == nil || !strings.Contains(err.Error(), corrupt) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Verify error %v does not name %s and %s", err, corrupt, missing)
	}
	mustPut(t, s, snapshots.ManifestKey(job, 1), []byte("garbage"))
	if err := c.Verify(ctx, 1); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("Verify with a corrupt manifest: %v, want ErrCorrupt", err)
	}
}
