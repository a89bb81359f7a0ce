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
// writes its key groups of one stored database into tables, downloads only
// the tables of another that hold keys of its key groups (TablesFor), and
// adopts that one without its other key groups (excised, their tables
// missing), ingesting the tables written. The database then holds exactly
// its key groups, in order; it goes on taking writes, and its next
// checkpoint is complete (it opens with every file checked) and restores
// the same. Its tables are its own, not links. Tables ingested into a
// database that adopts nothing are read the same.
func TestAdoptKeyGroupsAndIngest(t *testing.T) {
	const per, keys = 4, 40
	src := open(t) // a stored task of key groups [0, 20)
	defer src.Close()
	c, want := fillGroups(t, src, 20, per, keys)
	other := open(t) // one of [0, 32), with other values
	defer other.Close()
	c2, want2 := fillGroups(t, other, 32, per, keys/2)

	d := open(t)
	defer d.Close()
	const start, end = 10, 26 // the task's key groups: [10, 20) from src, [20, 26) from other
	ingest := func(d *DB, name string) Tables {
		t.Helper()
		dir := copyOnly(t, d, c2, name, func(string) bool { return true })
		r, err := OpenPartialReader(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		in, err := d.NewIngest(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Scan(GroupStart(nil, 20), GroupEnd(nil, end-1), in.Set); err != nil {
			t.Fatal(err)
		}
		tables, err := in.Close()
		if err != nil {
			t.Fatal(err)
		}
		return tables
	}
	tables := ingest(d, "other")
	w := inGroups(want, start, end)
	for k, v := range inGroups(want2, 20, end) {
		w[k] = v
	}
	if n := int64(len(inGroups(want2, 20, end))); tables.Len() != 1 || tables.Entries != n || tables.Bytes <= 0 {
		t.Errorf("wrote %d tables of %d bytes, %d entries; want 1 of the %d entries of key groups [20, %d)", tables.Len(), tables.Bytes, tables.Entries, n, end)
	}

	dir := copyOnly(t, d, c, "base", func(f string) bool { return !IsTable(f) })
	needed, err := TablesFor(dir, start, end)
	if err != nil {
		t.Fatal(err)
	}
	var all int
	for _, f := range c.Files {
		if IsTable(f) {
			all++
		}
	}
	if len(needed) == 0 || len(needed) >= all {
		t.Fatalf("TablesFor key groups [%d, %d) of [0, 20): %d of the %d tables, want some but not all", start, end, len(needed), all)
	}
	copyOnly(t, d, c, "base", func(f string) bool { return !IsTable(f) || needed[f] })
	excised, err := d.AdoptKeyGroups(dir, start, end, []Tables{tables})
	if err != nil {
		t.Fatalf("AdoptKeyGroups with %d of %d tables: %v", len(needed), all, err)
	}
	if excised != 1 {
		t.Errorf("excised %d ranges, want 1 (below %d)", excised, start)
	}
	if _, err := os.Stat(tables.dir); !os.IsNotExist(err) {
		t.Errorf("the directory of the tables ingested outlives the adoption: %v", err)
	}
	if got := readAll(t, d.Scan); !mapsEqual(got, w) {
		t.Fatalf("after adopting key groups [%d, %d) with the tables: %d keys, want %d", start, end, len(got), len(w))
	}
	if _, ok, err := d.Get(nil, Prefix(nil, start-1, 1)); ok || err != nil {
		t.Errorf("a key of key group %d, excised: found %t, %v", start-1, ok, err)
	}
	// Every table file of the database is its own (one link): neither
	// a checkpoint's copy nor the tables' directory shares it.
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
		if IsTable(f) && slices.Contains(c.Files, f) && !needed[f] {
			t.Errorf("the checkpoint after the rescale holds %s, a table of other key groups", f)
		}
	}

	// Into a database that adopts nothing.
	fresh := open(t)
	defer fresh.Close()
	if err := fresh.IngestTables([]Tables{ingest(fresh, "other")}); err != nil {
		t.Fatal(err)
	}
	if got, w := readAll(t, fresh.Scan), inGroups(want2, 20, end); !mapsEqual(got, w) {
		t.Fatalf("tables ingested into a new database: %d keys, want %d", len(got), len(w))
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
