package diskstate

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func open(t *testing.T) *DB {
	t.Helper()
	d, err := Open(Config{Dir: t.TempDir(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20}, "job/op#0")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestSnapshotIsolationAndClose(t *testing.T) {
	d := open(t)
	b := d.NewBatch()
	for i := range 100 {
		if err := b.Set(Prefix(nil, i, 1), []byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
	s, err := d.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Delete(Prefix(nil, 5, 1)); err != nil {
		t.Fatal(err)
	}
	if err := d.Apply(b); err != nil {
		t.Fatal(err)
	}
	count := func(scan func([]byte, []byte, func(k, v []byte) error) error) int {
		n := 0
		if err := scan(nil, nil, func(k, v []byte) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if got, now := count(s.Scan), count(d.Scan); got != 100 || now != 99 {
		t.Fatalf("snapshot holds %d keys and the database %d, want 100 and 99", got, now)
	}
	// A scan under way holds Close off; one after Close fails.
	inScan, release := make(chan struct{}), make(chan struct{})
	scanned := make(chan error)
	go func() {
		scanned <- s.Scan(nil, nil, func(k, v []byte) error {
			if k[1] == 0 {
				close(inScan)
				<-release
			}
			return nil
		})
	}()
	<-inScan
	closed := make(chan error)
	go func() { closed <- d.Close() }()
	close(release)
	if err := <-scanned; err != nil {
		t.Fatalf("the scan under way: %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := s.Scan(nil, nil, func(k, v []byte) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("a scan after Close: %v, want ErrClosed", err)
	}
	s.Close() // after the DB's Close: nothing to release
	if _, err := os.Stat(d.Dir()); !os.IsNotExist(err) {
		t.Fatalf("the directory %s is still there after Close: %v", d.Dir(), err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

func TestKeyLayout(t *testing.T) {
	k := MapKey(nil, 300, 2, []byte("user"), []byte("field"))
	kg, sid, rest, ok := Split(k)
	if !ok || kg != 300 || sid != 2 {
		t.Fatalf("Split = %d %d %v", kg, sid, ok)
	}
	key, uk, ok := SplitMap(rest)
	if !ok || string(key) != "user" || string(uk) != "field" {
		t.Fatalf("SplitMap = %q %q %v", key, uk, ok)
	}
	// A key that is a prefix of another key has its own range of user keys.
	a, b := MapPrefix(nil, 1, 0, []byte("ab")), MapPrefix(nil, 1, 0, []byte("abc"))
	if bytes.HasPrefix(b, a) {
		t.Fatalf("the entries of key ab would include those of abc")
	}
	if end := PrefixEnd([]byte{1, 0xff}); !bytes.Equal(end, []byte{2}) {
		t.Fatalf("PrefixEnd = %v", end)
	}
	if end := PrefixEnd([]byte{0xff, 0xff}); end != nil {
		t.Fatalf("PrefixEnd of all 0xff = %v, want nil", end)
	}
	if !bytes.Equal(GroupEnd(nil, 7), GroupStart(nil, 8)) || GroupEnd(nil, MaxKeyGroups-1) != nil {
		t.Fatal("GroupEnd is not the next group's start")
	}
	for _, c := range []Config{{CacheBytes: -1}, {MemTableBytes: -1}, {MemTableBytes: 1000}} {
		if c.Check() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// count reads the keys of [lo, hi) through an iterator of d, and returns
// it, closed.
func count(t *testing.T, d *DB, lo, hi []byte) (int, *Iter) {
	t.Helper()
	it, err := d.NewIter(lo, hi)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n, it
}

// TestIterReuse: an iterator closed is reused by the next range read, with
// the new bounds, until a write (the database's or one held for a pending
// checkpoint), after which the next read sees the write through a new one;
// nested reads take iterators of their own; once the held writes are
// applied, reads no longer go through them; and Close releases the
// iterators kept (pebble reports leaked iterators otherwise).
func TestIterReuse(t *testing.T) {
	d := open(t)
	put(t, d, 0, 10, 1)
	n, first := count(t, d, nil, nil)
	if n != 10 {
		t.Fatalf("%d keys, want 10", n)
	}
	n, again := count(t, d, Prefix(nil, 2, 1), Prefix(nil, 5, 1))
	if n != 3 || again != first {
		t.Fatalf("a second read: %d keys, want 3; reused its iterator: %t", n, again == first)
	}
	put(t, d, 10, 20, 1)
	n, after := count(t, d, nil, nil)
	if n != 20 || after == first {
		t.Fatalf("after a write: %d keys, want 20; reused the iterator made before: %t", n, after == first)
	}
	// Nested: an iterator each, both kept for reuse.
	outer, err := d.NewIter(nil, Prefix(nil, 5, 1))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for ok := outer.First(); ok; ok = outer.Next() {
		if n, _ := count(t, d, Prefix(nil, 5, 1), nil); n != 15 {
			t.Fatalf("a nested read: %d keys, want 15", n)
		}
		seen++
	}
	if err := outer.Close(); err != nil || seen != 5 || len(d.iters) != 2 {
		t.Fatalf("the outer read: %d keys, want 5, %v; %d iterators kept, want 2", seen, err, len(d.iters))
	}
	// A pending checkpoint: its held writes are read through.
	p, err := d.BeginCheckpoint("1")
	if err != nil {
		t.Fatal(err)
	}
	put(t, d, 20, 30, 2)
	n, held := count(t, d, nil, nil)
	if n != 30 || held.held == nil {
		t.Fatalf("with writes held: %d keys, want 30; read through them: %t", n, held.held != nil)
	}
	if _, err := p.Take(); err != nil {
		t.Fatal(err)
	}
	put(t, d, 30, 31, 3) // applies the held writes, and closes the iterators over them
	if n, it := count(t, d, nil, nil); n != 31 || it.held != nil || d.held != nil {
		t.Fatalf("after the checkpoint: %d keys, want 31; read through held writes: %t", n, it.held != nil)
	}
	if len(d.iters) == 0 {
		t.Fatal("no iterator kept for Close to release")
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
