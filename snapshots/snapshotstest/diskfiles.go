package snapshotstest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

var diskFileTests = []test{
	{"Retained", testDiskFilesRetained},
	{"Verified", testDiskFilesVerified},
	{"Refused", testDiskFilesRefused},
}

// putDiskState stores, for checkpoint id, task sum#0's state with a disk
// state of the files new (stored now) and kept (entries of an earlier
// checkpoint), and returns its entry.
func putDiskState(t *testing.T, c *snapshots.Checkpoints, id uint64, kept []*messages.StateFile, fresh ...string) *messages.TaskStateEntry {
	t.Helper()
	disk := &messages.DiskCheckpoint{KeyGroupStart: 0, KeyGroupEnd: 8, Files: slices.Clone(kept),
		States: []*messages.DiskStateID{{Id: 1, Name: "sum"}}}
	for _, name := range fresh {
		f, err := c.PutStateFile(t.Context(), id, 0, "sum#0", name, randomBytes(4096, id<<8|uint64(len(name))))
		if err != nil {
			t.Fatalf("PutStateFile %d %s: %v", id, name, err)
		}
		disk.Files = append(disk.Files, f)
	}
	h, err := c.PutTaskStateDisk(t.Context(), id, taskState(id, "sum#0"), nil, disk)
	if err != nil {
		t.Fatalf("PutTaskStateDisk %d: %v", id, err)
	}
	if got, want := snapshots.StateSize(h), h.GetSize()+uint64(4096*len(disk.Files)); got != want {
		t.Errorf("StateSize = %d, want %d (the object and %d files)", got, want, len(disk.Files))
	}
	if got, want := snapshots.UploadedSize(h), h.GetSize()+uint64(4096*len(fresh)); got != want {
		t.Errorf("UploadedSize = %d, want %d (the object and the %d files stored now)", got, want, len(fresh))
	}
	return &messages.TaskStateEntry{TaskId: "sum#0", State: h}
}

// testDiskFilesRetained: a checkpoint's files that a later checkpoint
// references outlive the checkpoint's deletion; the others go with it.
func testDiskFilesRetained(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	e1 := putDiskState(t, c, 1, nil, "000004.sst", "000005.sst", "MANIFEST-000001")
	putManifest(t, c, 1, []*messages.TaskStateEntry{e1})
	f1 := e1.GetState().GetDisk().GetFiles()
	// Checkpoint 2 keeps 000004.sst, drops 000005.sst, adds 000007.sst.
	e2 := putDiskState(t, c, 2, f1[:1], "000007.sst", "MANIFEST-000001")
	putManifest(t, c, 2, []*messages.TaskStateEntry{e2})
	e3 := putDiskState(t, c, 3, e2.GetState().GetDisk().GetFiles()[:2], "MANIFEST-000001")
	putManifest(t, c, 3, []*messages.TaskStateEntry{e3})
	// Deleting 1, then 2, deletes their objects except the files that the
	// newer checkpoints still reference.
	for _, id := range []uint64{1, 2} {
		if err := c.Delete(t.Context(), id); err != nil {
			t.Fatalf("Delete(%d): %v", id, err)
		}
	}
	got := mustList(t, s, snapshots.CheckpointsPrefix(job))
	for _, f := range e3.GetState().GetDisk().GetFiles() {
		if !slices.Contains(got, f.GetKey()) {
			t.Errorf("Delete removed %s, which checkpoint 3 references", f.GetKey())
		}
	}
	for _, gone := range []string{f1[1].GetKey(), f1[2].GetKey(), e2.GetState().GetDisk().GetFiles()[2].GetKey(), snapshots.ManifestKey(job, 1), e1.GetState().GetKey()} {
		if slices.Contains(got, gone) {
			t.Errorf("Delete kept %s, which no checkpoint references", gone)
		}
	}
	wantLoaded(t, c, 3)
	if err := c.Verify(t.Context(), 3); err != nil {
		t.Errorf("Verify(3): %v", err)
	}
}

// testDiskFilesVerified: a corrupt, short or missing file makes its
// checkpoint fail verification, naming the file's object, and the restore
// of the files checks them too.
func testDiskFilesVerified(t *testing.T, newStore newStoreFunc) {
	for _, damage := range []string{"corrupt", "short", "missing"} {
		t.Run(damage, func(t *testing.T) {
			s := newStore(t)
			c, _ := newCheckpoints(s)
			e := putDiskState(t, c, 1, nil, "000004.sst", "000005.sst")
			putManifest(t, c, 1, []*messages.TaskStateEntry{e})
			f := e.GetState().GetDisk().GetFiles()[1]
			good := mustGet(t, s, f.GetKey())
			want := snapshots.ErrCorrupt
			switch damage {
			case "corrupt":
				bad := slices.Clone(good)
				bad[100] ^= 1
				mustPut(t, s, f.GetKey(), bad)
			case "short":
				mustPut(t, s, f.GetKey(), good[:len(good)-1])
			case "missing":
				if err := s.Delete(t.Context(), f.GetKey()); err != nil {
					t.Fatal(err)
				}
				want = snapshots.ErrNotFound
			}
			// A fresh Checkpoints: this one knows the files it stored good.
			c2, _ := newCheckpoints(s)
			err := c2.Verify(t.Context(), 1)
			if !errors.Is(err, want) || !strings.Contains(fmt.Sprint(err), f.GetKey()) {
				t.Errorf("Verify = %v, want %v naming %s", err, want, f.GetKey())
			}
			if _, err := c2.ReadStateFile(t.Context(), f); !errors.Is(err, want) {
				t.Errorf("ReadStateFile = %v, want %v", err, want)
			}
			if data, err := c2.ReadStateFile(t.Context(), e.GetState().GetDisk().GetFiles()[0]); err != nil || len(data) != 4096 {
				t.Errorf("ReadStateFile of the intact file = %d bytes, %v", len(data), err)
			}
		})
	}
}

// testDiskFilesRefused: a disk state that lists a file stored elsewhere
// than a state file of an earlier or the same checkpoint of the job, or
// under another file's name, or twice, is refused before any write.
func testDiskFilesRefused(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ok, err := c.PutStateFile(t.Context(), 2, 0, "sum#0", "000004.sst", []byte("sst"))
	if err != nil {
		t.Fatal(err)
	}
	with := func(f *messages.StateFile) *messages.StateFile {
		return &messages.StateFile{Name: f.GetName(), Key: f.GetKey(), Size: f.GetSize(), Crc32C: f.GetCrc32C()}
	}
	later := with(ok)
	later.Key = snapshots.StateFileKey(job, 3, 0, "sum#0", "000004.sst")
	other := with(ok)
	other.Key = snapshots.StateFileKey("other", 1, 0, "sum#0", "000004.sst")
	renamed := with(ok)
	renamed.Name = "000009.sst"
	state := with(ok)
	state.Key = snapshots.StateKey(job, 1, "sum#0")
	for name, files := range map[string][]*messages.StateFile{
		"a later checkpoint's": {later},
		"another job's":        {other},
		"another file's":       {renamed},
		"a state object":       {state},
		"twice":                {ok, with(ok)},
	} {
		disk := &messages.DiskCheckpoint{KeyGroupEnd: 8, Files: files}
		if h, err := c.PutTaskStateDisk(t.Context(), 2, taskState(2, "sum#1"), nil, disk); err == nil {
			t.Errorf("%s: PutTaskStateDisk = %v, want an error", name, h)
		}
	}
	if _, err := c.PutStateFile(t.Context(), 2, 0, "sum#0", "../x", []byte("x")); !errors.Is(err, snapshots.ErrInvalidKey) {
		t.Errorf("PutStateFile of ../x = %v, want ErrInvalidKey", err)
	}
	wantKeys(t, s, snapshots.CheckpointPrefix(job, 2), ok.GetKey())
}
