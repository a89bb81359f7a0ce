package diskstate

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// restoreCopy copies checkpoint c's files into a new directory, as a
// download would, and opens them.
func restoreCopy(t *testing.T, d *DB, c *Checkpoint, name string) *Reader {
	t.Helper()
	dir, err := d.PrepareRestore(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Files {
		data, err := os.ReadFile(filepath.Join(c.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, err := OpenReader(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

func put(t *testing.T, d *DB, from, to int, v byte) {
	t.Helper()
	b := d.NewBatch()
	for i := from; i < to; i++ {
		if err := b.Set(Prefix(nil, i, 1), []byte{v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
}

func scanAll(t *testing.T, scan func([]byte, []byte, func(k, v []byte) error) error) map[int]byte {
	t.Helper()
	got := map[int]byte{}
	if err := scan(nil, nil, func(k, v []byte) error {
		kg, _, _, _ := Split(k)
		got[kg] = v[0]
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestCheckpointIsConsistentAndShared: a checkpoint holds the writes made
// before it, memtable included, and none after; the next one shares the
// tables that did not change, byte for byte, under the same names.
func TestCheckpointIsConsistentAndShared(t *testing.T) {
	d := open(t)
	defer d.Close()
	put(t, d, 0, 1000, 1)
	c1, err := d.Checkpoint("1")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, 500, 1500, 2) // after the checkpoint
	c2, err := d.Checkpoint("2")
	if err != nil {
		t.Fatal(err)
	}
	r1 := restoreCopy(t, d, c1, "1")
	got := scanAll(t, r1.Scan)
	if len(got) != 1000 || got[0] != 1 || got[999] != 1 {
		t.Fatalf("checkpoint 1 holds %d keys (key 999 = %d), want 1000 written as 1", len(got), got[999])
	}
	got = scanAll(t, restoreCopy(t, d, c2, "2").Scan)
	if len(got) != 1500 || got[0] != 1 || got[500] != 2 || got[1499] != 2 {
		t.Fatalf("checkpoint 2 holds %d keys, want 1500 with 500.. written as 2", len(got))
	}
	var tables1, shared []string
	for _, f := range c1.Files {
		if IsTable(f) {
			tables1 = append(tables1, f)
			if slices.Contains(c2.Files, f) {
				a, _ := os.ReadFile(filepath.Join(c1.Dir, f))
				b, _ := os.ReadFile(filepath.Join(c2.Dir, f))
				if !bytes.Equal(a, b) {
					t.Errorf("table %s differs between the checkpoints", f)
				}
				shared = append(shared, f)
			}
		}
	}
	if len(tables1) == 0 || len(shared) == 0 {
		t.Errorf("checkpoint 1's tables %v, shared with 2: %v; want some shared", tables1, shared)
	}
	if err := c1.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(c1.Dir); !os.IsNotExist(err) {
		t.Errorf("the removed checkpoint's directory: %v", err)
	}
	dir := d.checkpointsDir()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Close left the checkpoints' directory: %v", err)
	}
	if _, err := d.Checkpoint("3"); err != ErrClosed {
		t.Errorf("Checkpoint after Close = %v, want ErrClosed", err)
	}
}

// TestPendingCheckpointHoldsLaterWrites: a checkpoint begun and taken
// later, from another goroutine, holds the database as it was when it
// began; the writes made meanwhile are read back at once (Get and Scan),
// reach the database after Take, and are in the next checkpoint.
func TestPendingCheckpointHoldsLaterWrites(t *testing.T) {
	d := open(t)
	defer d.Close()
	put(t, d, 0, 1000, 1)
	p, err := d.BeginCheckpoint("1")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, 500, 1500, 2) // held
	b := d.NewBatch()
	if err := b.Delete(Prefix(nil, 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
	if v, ok, err := d.Get(nil, Prefix(nil, 600, 1)); err != nil || !ok || v[0] != 2 {
		t.Fatalf("Get of a held write = %v %v %v, want 2", v, ok, err)
	}
	if _, ok, err := d.Get(nil, Prefix(nil, 0, 1)); err != nil || ok {
		t.Fatalf("Get of a held delete = %v %v, want absent", ok, err)
	}
	if got := scanAll(t, d.Scan); len(got) != 1499 || got[1499] != 2 || got[1] != 1 {
		t.Fatalf("Scan while held: %d keys, want 1499", len(got))
	}
	type taken struct {
		c   *Checkpoint
		err error
	}
	ch := make(chan taken)
	go func() { c, err := p.Take(); ch <- taken{c, err} }()
	c1 := <-ch
	if c1.err != nil {
		t.Fatal(c1.err)
	}
	if _, err := p.Take(); err != ErrReleased {
		t.Errorf("a second Take = %v, want ErrReleased", err)
	}
	p.Release() // after Take: nothing
	got := scanAll(t, restoreCopy(t, d, c1.c, "1").Scan)
	if len(got) != 1000 || got[0] != 1 || got[999] != 1 {
		t.Fatalf("the pending checkpoint holds %d keys (key 999 = %d), want the 1000 written before it began", len(got), got[999])
	}
	c2, err := d.Checkpoint("2") // applies the held writes first
	if err != nil {
		t.Fatal(err)
	}
	got = scanAll(t, restoreCopy(t, d, c2, "2").Scan)
	if len(got) != 1499 || got[1] != 1 || got[500] != 2 || got[1499] != 2 {
		t.Fatalf("the next checkpoint holds %d keys, want 1499 with the held writes", len(got))
	}
}

// TestPendingCheckpointBoundsHeldWrites: writes held for a pending
// checkpoint never reach the memtable's size: Apply then waits for the
// checkpoint to be taken and applies them; the checkpoint, taken
// meanwhile from another goroutine, holds none of them.
func TestPendingCheckpointBoundsHeldWrites(t *testing.T) {
	const memtable = 1 << 20
	d, err := Open(Config{Dir: t.TempDir(), MemTableBytes: memtable}, "bound")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	put(t, d, 100, 101, 7)
	p, err := d.BeginCheckpoint("1")
	if err != nil {
		t.Fatal(err)
	}
	taken := make(chan *Checkpoint, 1)
	go func() {
		c, err := p.Take()
		if err != nil {
			t.Error(err)
		}
		taken <- c
	}()
	b := d.NewBatch()
	for i := range 8 {
		if err := b.Set(Prefix(nil, i, 1), make([]byte, 256<<10)); err != nil {
			t.Fatal(err)
		}
		if err := d.Apply(b); err != nil {
			t.Fatal(err)
		}
		if d.held != nil && d.held.Len() >= memtable {
			t.Fatalf("after %d writes of 256 KiB, %d bytes held for a pending checkpoint with a memtable of %d", i+1, d.held.Len(), memtable)
		}
	}
	c := <-taken
	if c == nil {
		t.FailNow()
	}
	if got := scanAll(t, restoreCopy(t, d, c, "1").Scan); len(got) != 1 || got[100] != 7 {
		t.Fatalf("the checkpoint holds %v, want only key group 100", got)
	}
	if n := len(scanAll(t, d.Scan)); n != 9 {
		t.Fatalf("%d keys after the checkpoint, want 9", n)
	}
	p2, err := d.BeginCheckpoint("2")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, 200, 201, 1)
	p2.Release() // given up: the held write reaches the database
	if v, ok, err := d.Get(nil, Prefix(nil, 200, 1)); err != nil || !ok || v[0] != 1 {
		t.Fatalf("a write held for a released checkpoint: %v %v %v", v, ok, err)
	}
	if d.held != nil {
		t.Error("writes still held after the release")
	}
}

// TestPendingCheckpointTakenDuringScan: a checkpoint taken while a scan
// iterates the writes held for it leaves them held until the scan ends,
// however much the scan's function reads, writes and scans meanwhile (it
// once closed the batch under the iterator); a checkpoint asked for inside
// a scan is refused.
func TestPendingCheckpointTakenDuringScan(t *testing.T) {
	const memtable = 1 << 20
	d, err := Open(Config{Dir: t.TempDir(), MemTableBytes: memtable}, "scan")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	put(t, d, 0, 10, 1)
	p, err := d.BeginCheckpoint("1")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, 10, 20, 2) // held
	seen := 0
	err = d.Scan(Prefix(nil, 0, 1), Prefix(nil, 20, 1), func(k, v []byte) error {
		seen++
		if seen == 1 {
			if _, err := p.Take(); err != nil {
				return err
			}
			if _, err := d.BeginCheckpoint("inner"); err == nil {
				t.Error("a checkpoint begun inside a scan was not refused")
			}
		}
		if _, ok, err := d.Get(nil, Prefix(nil, 15, 1)); err != nil || !ok {
			t.Fatalf("Get inside the scan: %v %v", ok, err)
		}
		// Past the bound of held writes: Apply would wait for the
		// checkpoint and apply them.
		b := d.NewBatch()
		if err := b.Set(Prefix(nil, 100+seen, 1), make([]byte, memtable)); err != nil {
			return err
		}
		if err := d.Apply(b); err != nil {
			return err
		}
		if n := len(scanAll(t, d.Scan)); n != 20+seen {
			t.Errorf("a nested scan sees %d keys, want %d", n, 20+seen)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if seen != 20 {
		t.Fatalf("the scan saw %d keys, want 20", seen)
	}
	got := scanAll(t, d.Scan) // settles: the held writes reach the database
	if d.held != nil {
		t.Error("writes still held after the scan and the checkpoint")
	}
	if len(got) != 40 || got[0] != 1 || got[19] != 2 {
		t.Fatalf("after the scan: %d keys, want 40", len(got))
	}
}
