package diskstate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// fillGroups writes, in groups of per key groups at a time each flushed
// by a checkpoint, keys keys of 100 bytes in each of the key groups
// [0, groups), so that most tables hold a few key groups only; and one
// table over all of them (a key in each). It returns the checkpoint taken
// last, and what the database holds by key.
func fillGroups(t *testing.T, d *DB, groups, per, keys int) (*Checkpoint, map[string]string) {
	t.Helper()
	want := map[string]string{}
	set := func(b *Batch, kg, i int) {
		k := string(Prefix(nil, kg, 1)) + fmt.Sprintf("key-%05d", i)
		v := fmt.Sprintf("%-100d", kg*1_000_000+i)
		if err := b.Set([]byte(k), []byte(v)); err != nil {
			t.Fatal(err)
		}
		want[k] = v
	}
	var c *Checkpoint
	for from := 0; from < groups; from += per {
		b := d.NewBatch()
		for kg := from; kg < min(from+per, groups); kg++ {
			for i := range keys {
				set(b, kg, i)
			}
		}
		if err := d.Apply(b); err != nil {
			t.Fatal(err)
		}
		var err error
		if c, err = d.Checkpoint(fmt.Sprint(from)); err != nil { // a flush
			t.Fatal(err)
		}
	}
	b := d.NewBatch()
	for kg := range groups {
		set(b, kg, keys)
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
	c, err := d.Checkpoint("all")
	if err != nil {
		t.Fatal(err)
	}
	return c, want
}

// copyOnly copies the files of checkpoint c that keep says to a new
// directory of d's, as a restore's download does, and returns it.
func copyOnly(t *testing.T, d *DB, c *Checkpoint, name string, keep func(string) bool) string {
	t.Helper()
	dir, err := d.PrepareRestore(name)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range c.Files {
		if !keep(f) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(c.Dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// inGroups returns want's keys of the key groups [start, end), with their
// values.
func inGroups(want map[string]string, start, end int) map[string]string {
	out := map[string]string{}
	for k, v := range want {
		if kg, _, _, _ := Split([]byte(k)); kg >= start && kg < end {
			out[k] = v
		}
	}
	return out
}

func readAll(t *testing.T, scan func([]byte, []byte, func(k, v []byte) error) error) map[string]string {
	t.Helper()
	got := map[string]string{}
	var last []byte
	if err := scan(nil, nil, func(k, v []byte) error {
		if last != nil && bytes.Compare(k, last) <= 0 {
			return fmt.Errorf("key %x after %x: out of order", k, last)
		}
		last = append(last[:0], k...)
		got[string(k)] = string(v)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestAdoptKeyGroupsAndIngest: a task restored at another parallelism
// downloads only the tables that hold keys of its key groups (TablesFor),
// adopts the checkpoint that holds most of them without its other key
// groups (excised, its tables missing), and ingests its key groups of
// another checkpoint. The database then holds exactly its key groups, in
// order; it goes on taking writes, and its next checkpoint is complete
// (it opens with every file checked) and restores the same. The files it
// ingested are its own, not links.
func TestAdoptKeyGroupsAndIngest(t *testing.T) {
	const groups, per, keys = 32, 4, 40
	src := open(t)
	defer src.Close()
	c, want := fillGroups(t, src, groups, per, keys)
	other := open(t) // another task's, over the same key groups with other values
	defer other.Close()
	c2, want2 := fillGroups(t, other, groups, per, keys/2)

	d := open(t)
	defer d.Close()
	const start, end = 10, 20 // the task's key groups; [20, 26) come from the other checkpoint
	dir := copyOnly(t, d, c, "base", func(f string) bool { return !IsTable(f) })
	tables, err := TablesFor(dir, start, end)
	if err != nil {
		t.Fatal(err)
	}
	var all int
	for _, f := range c.Files {
		if IsTable(f) {
			all++
		}
	}
	if len(tables) == 0 || len(tables) >= all {
		t.Fatalf("TablesFor key groups [%d, %d) of %d: %d of the %d tables, want some but not all", start, end, groups, len(tables), all)
	}
	copyOnly(t, d, c, "base", func(f string) bool { return !IsTable(f) || tables[f] })
	excised, err := d.AdoptKeyGroups(dir, start, end)
	if err != nil {
		t.Fatalf("AdoptKeyGroups with %d of %d tables: %v", len(tables), all, err)
	}
	if excised != 2 {
		t.Errorf("excised %d ranges, want 2 (below %d and from %d)", excised, start, end)
	}
	if got, w := readAll(t, d.Scan), inGroups(want, start, end); !mapsEqual(got, w) {
		t.Fatalf("after adopting key groups [%d, %d): %d keys, want %d", start, end, len(got), len(w))
	}
	if _, ok, err := d.Get(nil, Prefix(nil, start-1, 1)); ok || err != nil {
		t.Errorf("a key of key group %d, excised: found %t, %v", start-1, ok, err)
	}

	// Key groups [20, 26) of the other checkpoint, ingested.
	dir2 := copyOnly(t, d, c2, "other", func(f string) bool { return true })
	r, err := OpenPartialReader(dir2)
	if err != nil {
		t.Fatal(err)
	}
	in, err := d.NewIngest("other")
	if err != nil {
		t.Fatal(err)
	}
	err = r.Scan(GroupStart(nil, 20), GroupEnd(nil, 25), func(k, v []byte) error { return in.Set(k, v) })
	r.Close()
	if err != nil {
		t.Fatal(err)
	}
	st, err := in.Finish()
	if err != nil {
		t.Fatal(err)
	}
	w := inGroups(want, start, end)
	for k, v := range inGroups(want2, 20, 26) {
		w[k] = v
	}
	if st.Tables != 1 || st.Entries != int64(len(w)-len(inGroups(want, start, end))) || st.Bytes <= 0 {
		t.Errorf("ingested %+v, want 1 table of the %d entries of key groups [20, 26)", st, len(w)-len(inGroups(want, start, end)))
	}
	if _, err := os.Stat(in.dir); !os.IsNotExist(err) {
		t.Errorf("the ingest's directory outlives Finish: %v", err)
	}
	if got := readAll(t, d.Scan); !mapsEqual(got, w) {
		t.Fatalf("after the ingest: %d keys, want %d", len(got), len(w))
	}
	// Every table file of the database is its own (one link): neither
	// a checkpoint's copy nor the ingest's directory shares it.
	entries, err := os.ReadDir(d.Dir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil || !IsTable(e.Name()) {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
			t.Errorf("table %s has %d links, want 1", e.Name(), st.Nlink)
		}
	}

	// Writes go on; the next checkpoint opens with every file checked and
	// holds the same.
	b := d.NewBatch()
	k := Prefix(nil, 15, 1)
	if err := b.Set(k, []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
	w[string(k)] = "new"
	c3, err := d.Checkpoint("after")
	if err != nil {
		t.Fatal(err)
	}
	r3 := restoreCopy(t, d, c3, "after")
	if got := readAll(t, r3.Scan); !mapsEqual(got, w) {
		t.Fatalf("the checkpoint after the rescale: %d keys, want %d", len(got), len(w))
	}
	// The files of the excised key groups are not in it.
	for f := range slices.Values(c3.Files) {
		if IsTable(f) && slices.Contains(c.Files, f) && !tables[f] {
			t.Errorf("the checkpoint after the rescale holds %s, a table of other key groups", f)
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
