package dataflow

import (
	"fmt"
	"maps"
	"testing"

	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/messages"
)

// keptCmd is a command of keptJob's operator: set the key's value to N,
// clear it, or (neither) read it.
type keptCmd struct {
	Key        string
	Set, Clear bool
	N          int64
}

// keptJob keeps an int64 per key and records what each command's read
// saw.
type keptJob struct {
	reads  []string
	states map[string]*ValueState[string, int64]
}

func (j *keptJob) plan(t *testing.T) *Plan {
	j.states = map[string]*ValueState[string, int64]{}
	g := New("kept", MaxParallelism(16))
	k := KeyBy(FromSlice(g, "src", []keptCmd{}), func(c keptCmd) string { return c.Key })
	Sink(Process(k, "p", func(s *KeyedSetup[string]) ProcessFunc[string, keptCmd, string] {
		v := Value[int64](s, "n")
		j.states[s.TaskID()] = v
		return func(ctx *Context[string], c keptCmd, _ *Collector[string]) error {
			switch {
			case c.Set:
				v.Set(c.N)
			case c.Clear:
				v.Clear()
			}
			x, ok := v.Get()
			j.reads = append(j.reads, fmt.Sprintf("%s=%d/%t", c.Key, x, ok))
			return nil
		}
	}), "sink", discard[string])
	return mustPlan(t, g)
}

// run processes cmds as one batch and returns what their reads saw.
func (j *keptJob) run(t *testing.T, inst Instance, cmds ...keptCmd) []string {
	t.Helper()
	j.reads = nil
	if err := inst.ProcessBatch(0, cmds, nil); err != nil {
		t.Fatal(err)
	}
	return j.reads
}

// TestDiskKeptValues: a value the task wrote or read is read again from
// memory, without a read of the database, and reads what the database
// holds: after a set, a clear, and a key found absent.
func TestDiskKeptValues(t *testing.T) {
	onDisk(t)
	var j keptJob
	p := j.plan(t)
	inst := mustInstance(t, p, "p#0", 64, noopSender{})
	v := j.states["p#0"]
	db := v.setup.disk.db
	var cmds []keptCmd
	for i := range 100 {
		cmds = append(cmds, keptCmd{Key: fmt.Sprintf("k%d", i), Set: true, N: int64(i)})
	}
	cmds = append(cmds, keptCmd{Key: "absent"})
	j.run(t, inst, cmds...)
	j.run(t, inst, keptCmd{Key: "k7", Clear: true})

	gets := db.Gets()
	var reads []keptCmd
	for i := range 100 {
		reads = append(reads, keptCmd{Key: fmt.Sprintf("k%d", i)})
	}
	reads = append(reads, keptCmd{Key: "absent"})
	got := j.run(t, inst, reads...)
	if n := db.Gets() - gets; n != 0 {
		t.Errorf("reading 101 keys written, cleared or found absent before read the database %d times, want 0", n)
	}
	for i, r := range got {
		want := fmt.Sprintf("k%d=%d/true", i, i)
		switch {
		case i == 7:
			want = "k7=0/false"
		case i == 100:
			want = "absent=0/false"
		}
		if r != want {
			t.Errorf("read %d: %s, want %s", i, r, want)
		}
	}
	if want := valuesOf(v); len(want) != 99 {
		t.Errorf("the database holds %d values, want 99", len(want))
	}
}

// TestDiskKeptValuesBounded: the values kept stay within the state's share
// of the memory for them, forgetting others, and every read reads what
// was written, kept or not.
func TestDiskKeptValuesBounded(t *testing.T) {
	onDisk(t)
	testDisk.CacheBytes = 5 << 20 // a cache no other test shares: 1.25 MiB for kept values
	var j keptJob
	p := j.plan(t)
	inst := mustInstance(t, p, "p#0", 64, noopSender{})
	v := j.states["p#0"]
	share := v.setup.disk.db.KeptShare()
	if share <= 0 || share > 5<<20/4 {
		t.Fatalf("the task's share of kept values is %d B, want at most a quarter of 5 MiB", share)
	}
	const keys = 40000 // about 60 B counted each: twice the share
	want := map[string]int64{}
	for round := range 2 {
		var cmds []keptCmd
		for i := range keys {
			key := fmt.Sprintf("key-%d", i)
			cmds = append(cmds, keptCmd{Key: key, Set: true, N: int64(i * (round + 1))})
			want[key] = int64(i * (round + 1))
			if len(cmds) == 500 {
				j.run(t, inst, cmds...)
				cmds = cmds[:0]
				if b := v.d.keptBytes; b > share {
					t.Fatalf("the state keeps %d B of values, more than its share of %d B", b, share)
				}
			}
		}
	}
	if n := len(v.d.kept); n == 0 || n >= keys {
		t.Errorf("%d values kept of %d, want some and not all", n, keys)
	}
	var reads []keptCmd
	for i := range keys {
		reads = append(reads, keptCmd{Key: fmt.Sprintf("key-%d", i)})
	}
	for i, r := range j.run(t, inst, reads...) {
		key := fmt.Sprintf("key-%d", i)
		if w := fmt.Sprintf("%s=%d/true", key, want[key]); r != w {
			t.Fatalf("%s, want %s", r, w)
		}
	}
	if got := valuesOf(v); !maps.Equal(got, want) {
		t.Errorf("the database holds %d values, not the %d written", len(got), len(want))
	}
}

// TestDiskKeptValuesDroppedByAdopt: what a task keeps in memory of its
// database goes when a checkpoint's files replace the database: a key read
// absent before reads the checkpoint's value after.
func TestDiskKeptValuesDroppedByAdopt(t *testing.T) {
	onDisk(t)
	var j keptJob
	p := j.plan(t)
	src := mustInstance(t, p, "p#0", 64, noopSender{})
	j.run(t, src, keptCmd{Key: "a", Set: true, N: 5})
	var st messages.TaskState
	c, err := src.(DiskCheckpointer).SnapshotFiles(&st, nil, true, "1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Take(); err != nil {
		t.Fatal(err)
	}

	dst := mustInstance(t, p, "p#0", 64, noopSender{})
	if err := dst.Restore(wireRoundTrip(t, &st)); err != nil {
		t.Fatal(err)
	}
	if got := j.run(t, dst, keptCmd{Key: "a"}); got[0] != "a=0/false" { // kept: absent
		t.Fatalf("before the files: %s, want a=0/false", got[0])
	}
	if v := j.states["p#0"]; len(v.d.kept) != 1 {
		t.Fatalf("%d values kept, want the key read absent", len(v.d.kept))
	}
	rep, err := dst.(DiskCheckpointer).RestoreFiles(copyFiles(t, dst, c, "p#0"), c.Desc, true)
	if err != nil || !rep.Adopted {
		t.Fatalf("RestoreFiles: adopted %t, %v; want the files adopted", rep.Adopted, err)
	}
	if got := j.run(t, dst, keptCmd{Key: "a"}); got[0] != "a=5/true" {
		t.Errorf("after the files: %s, want the checkpoint's a=5/true", got[0])
	}
}

// TestKeptShareDividedAmongDatabases: the memory for kept values, a
// quarter of CacheBytes, is shared equally by the open databases.
func TestKeptShareDividedAmongDatabases(t *testing.T) {
	cfg := diskstate.Config{Dir: t.TempDir(), CacheBytes: 7 << 20, MemTableBytes: 1 << 20} // a size no other test uses
	a, err := diskstate.Open(cfg, "a")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.KeptShare(), int64(7<<20/4); got != want {
		t.Errorf("one database: share %d, want %d", got, want)
	}
	b, err := diskstate.Open(cfg, "b")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.KeptShare(), int64(7<<20/4/2); got != want || b.KeptShare() != want {
		t.Errorf("two databases: shares %d and %d, want %d", got, b.KeptShare(), want)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got, want := a.KeptShare(), int64(7<<20/4); got != want {
		t.Errorf("one again: share %d, want %d", got, want)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestStagedWrites: the writes staged by a flush reach the batch only when
// unstaged (sorted by key), and of two writes of one key the later wins.
func TestStagedWrites(t *testing.T) {
	db, err := diskstate.Open(diskstate.Config{Dir: t.TempDir(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20}, "stage")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d := &diskKeyed{db: db, batch: db.NewBatch(), staging: true}
	for _, w := range []struct {
		key, value string
		del        bool
	}{{"b", "1", false}, {"c", "1", false}, {"a", "1", false}, {"b", "2", false}, {"c", "", true}} {
		if err := d.write([]byte(w.key), []byte(w.value), w.del); err != nil {
			t.Fatal(err)
		}
	}
	if !d.batch.Empty() || len(d.stagedWrites) != 5 {
		t.Fatalf("staged %d writes, batch empty %t; want 5 staged and nothing in the batch yet", len(d.stagedWrites), d.batch.Empty())
	}
	d.staging = false
	if err := d.unstage(); err != nil {
		t.Fatal(err)
	}
	if err := db.Apply(d.batch); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := db.Scan(nil, nil, func(k, v []byte) error { got = append(got, string(k)+"="+string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != "[a=1 b=2]" {
		t.Errorf("the database holds %v, want [a=1 b=2]", got)
	}
}
