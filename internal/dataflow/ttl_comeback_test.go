package dataflow

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// ttlChain takes the checkpoints of task p#0 of a ttlJob as the runtime
// does: full ones, or incremental ones that store only the key groups
// written since the last checkpoint and refer back to the stored section
// of every other (the first is full); and on disk, the heap part so and
// the database's files. restoreTo loads the newest as a restore would.
type ttlChain struct {
	disk, incremental bool
	n                 int
	st                *messages.TaskState
	files             *DiskFiles
	// groups is, for incremental heap checkpoints, the newest stored
	// section of each key group: what the newest checkpoint refers to.
	groups map[uint32]*messages.KeyGroupState
}

func (c *ttlChain) checkpoint(t *testing.T, inst Instance) {
	t.Helper()
	c.n++
	dirty := make([]uint64, KeyGroupWords(DefaultMaxParallelism))
	inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(dirty)
	full := !c.incremental || c.groups == nil
	var st messages.TaskState
	switch {
	case c.disk:
		files, err := inst.(DiskCheckpointer).SnapshotFiles(&st, dirty, full, fmt.Sprint(c.n))
		if err != nil {
			t.Fatal(err)
		}
		if err := files.Take(); err != nil {
			t.Fatal(err)
		}
		c.files = files
		c.st = wireRoundTrip(t, &st)
		return
	case full:
		if err := inst.Snapshot(&st); err != nil {
			t.Fatal(err)
		}
		c.groups = map[uint32]*messages.KeyGroupState{}
	default:
		if err := inst.(KeyGroupSnapshotter).SnapshotKeyGroups(&st, dirty); err != nil {
			t.Fatal(err)
		}
		for kg := range uint32(DefaultMaxParallelism) { // a selected key group absent from st is empty
			if groupSet(dirty).has(int(kg)) {
				delete(c.groups, kg)
			}
		}
	}
	back := wireRoundTrip(t, &st)
	for _, g := range back.GetKeyGroups() {
		c.groups[g.GetKeyGroup()] = g
	}
	back.KeyGroups = nil
	for _, kg := range slices.Sorted(maps.Keys(c.groups)) {
		back.KeyGroups = append(back.KeyGroups, c.groups[kg])
	}
	c.st = back
}

// restoreTo restores the newest checkpoint into a new instance of p and
// returns it; the chain goes on from there, as after a recovery.
func (c *ttlChain) restoreTo(t *testing.T, p *Plan) Instance {
	t.Helper()
	inst := mustInstance(t, p, "p#0", 8, noopSender{})
	if err := inst.Restore(c.st); err != nil {
		t.Fatal(err)
	}
	if c.disk {
		dir := copyFiles(t, inst, c.files, fmt.Sprint("restore-", c.n))
		if _, err := inst.(DiskCheckpointer).RestoreFiles(dir, c.files.Desc, true); err != nil {
			t.Fatal(err)
		}
	}
	return inst
}

// TestExpiredStateStaysExpired: 200 keys written with a time-to-live of
// 1s, a checkpoint, 3s without input, another checkpoint: a next run that
// keeps, removes, doubles or lengthens the time-to-live reads none of
// them, and neither does a run restored from that run's own checkpoint, on
// the heap and on disk, with full and incremental checkpoints. A key
// written 0.3s before the second checkpoint is still read: it had not
// expired (but in the run after one that kept 1s, which restores it after
// it expired).
func TestExpiredStateStaysExpired(t *testing.T) {
	for _, backend := range []string{"heap", "disk"} {
		for _, mode := range []string{"full", "incremental"} {
			for _, next := range []time.Duration{0, time.Second, 2 * time.Second, 10 * time.Second} {
				t.Run(fmt.Sprintf("%s/%s/ttl=%v", backend, mode, next), func(t *testing.T) {
					if backend == "disk" {
						onDisk(t)
					}
					c := &ttlChain{disk: backend == "disk", incremental: mode == "incremental"}
					first := &ttlJob{ttl: time.Second}
					inst := mustInstance(t, first.plan(t), "p#0", 8, noopSender{})
					var keys, reads []ttlCmd
					for i := range 200 {
						keys = append(keys, set(fmt.Sprint("k", i), int64(i)))
						reads = append(reads, get(fmt.Sprint("k", i)))
					}
					reads = append(reads, get("fresh"))
					first.at(t, inst, 10, keys...) // (a write time of 0 would read as none)
					first.now = int64(10500 * time.Millisecond)
					c.checkpoint(t, inst)
					first.at(t, inst, 13.2, set("fresh", 7))
					first.now = int64(13500 * time.Millisecond)
					c.checkpoint(t, inst)

					// The next run, and a run restored from its checkpoint.
					second := &ttlJob{ttl: next}
					second.now = int64(14 * time.Second)
					inst = c.restoreTo(t, second.plan(t))
					checkNoneBack(t, "the next run", second.at(t, inst, 14, slices.Clone(reads)...), true) // a batch given goes back to a pool
					second.now = int64(14100 * time.Millisecond)
					c.checkpoint(t, inst)
					third := &ttlJob{}
					third.now = int64(14500 * time.Millisecond)
					inst = c.restoreTo(t, third.plan(t))
					// Key fresh, written at 13.2s, is live at 14.5s unless the next run
					// kept the time-to-live of 1s.
					checkNoneBack(t, "the run after", third.at(t, inst, 14.5, slices.Clone(reads)...), next != time.Second)
				})
			}
		}
	}
}

// checkNoneBack fails when a read of the 200 expired keys found anything,
// or the read of key fresh did not find it live when it should (fresh).
func checkNoneBack(t *testing.T, run string, got []ttlRead, fresh bool) {
	t.Helper()
	back := 0
	for _, r := range got[:len(got)-1] {
		if r.HasV || r.HasX || r.Len > 0 || r.All > 0 {
			back++
		}
	}
	if back > 0 {
		t.Errorf("%s read %d of the 200 entries that had expired before the checkpoint", run, back)
	}
	want := gone("fresh")
	if fresh {
		want = live("fresh", 7)
	}
	if f := got[len(got)-1]; f != want {
		t.Errorf("%s read %+v for the key written 0.3s before the checkpoint, want %+v", run, f, want)
	}
}

// TestStateTTLExpiryMarksWritten: on the heap, an entry removed because it
// expired, by a read or by the clean-up after a batch, marks its key group
// written, so that an incremental checkpoint stores the group again
// instead of referring back to the object that holds the entry.
func TestStateTTLExpiryMarksWritten(t *testing.T) {
	j := &ttlJob{ttl: time.Second}
	inst := mustInstance(t, j.plan(t), "p#0", 8, noopSender{})
	j.at(t, inst, 10, set("a", 1), set("b", 2))
	dirty := func() groupSet {
		d := make(groupSet, KeyGroupWords(DefaultMaxParallelism))
		inst.(KeyGroupSnapshotter).TakeDirtyKeyGroups(d)
		return d
	}
	dirty()
	kg := func(k string) int { return int(HashString(k) % DefaultMaxParallelism) }
	if kg("a") == kg("b") || kg("a") == kg("c") || kg("b") == kg("c") {
		t.Fatal("keys a, b and c share a key group: pick others")
	}
	// At 20s a read of a finds it expired; the clean-up after the batch
	// removes b; nothing else is written.
	j.at(t, inst, 20, get("a"))
	if d := dirty(); !d.has(kg("a")) || !d.has(kg("b")) || d.countIn(0, DefaultMaxParallelism) != 2 {
		t.Fatalf("written key groups after expiry: %v; want those of a (%d) and b (%d)", d, kg("a"), kg("b"))
	}
}
