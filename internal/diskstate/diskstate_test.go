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
