package diskstate

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// lines counts the records a slog.Logger makes, keeping their messages.
type lines struct {
	mu   sync.Mutex
	msgs []string
}

func (l *lines) Enabled(context.Context, slog.Level) bool { return true }

func (l *lines) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "held_back" {
			msg += " held_back=" + a.Value.String()
		}
		return true
	})
	l.msgs = append(l.msgs, msg)
	return nil
}

func (l *lines) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *lines) WithGroup(string) slog.Handler      { return l }

func (l *lines) errors() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// within runs fn and fails t unless it returns within a minute (a bound
// on a hang, not on speed).
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- fn() }()
	select {
	case v := <-done:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return within a minute", what)
		panic("unreachable")
	}
}

// fill writes n entries of 1 KiB in key group kg.
func fill(t *testing.T, d *DB, kg, n int) error {
	t.Helper()
	b := d.NewBatch()
	val := make([]byte, 1<<10)
	for i := range n {
		if err := b.Set(append(Prefix(nil, kg, 1), byte(i>>8), byte(i)), val); err != nil {
			t.Fatal(err)
		}
		if b.Len() >= 64<<10 {
			if err := d.Apply(b); err != nil {
				return err
			}
		}
	}
	return d.Apply(b)
}

// TestRemovedDirectoryFails removes the directory of a database that has
// a table flushed and open, a checkpoint begun and writes in its
// memtable, as a cleaner of temporary files would: taking the
// checkpoint returns the failure instead of waiting for a flush that
// never ends; Apply, Get, Scan, Snapshot and BeginCheckpoint return it at
// once; the function given to OnFailure learns it once; the log holds a
// few lines about it; and Close returns, leaving no goroutine behind
// (TestMain checks).
func TestRemovedDirectoryFails(t *testing.T) {
	var log lines
	d, err := Open(Config{Dir: t.TempDir(), CacheBytes: 1 << 20, MemTableBytes: 1 << 20, Logger: slog.New(&log)}, "job/op#0")
	if err != nil {
		t.Fatal(err)
	}
	notified := make(chan error, 2)
	d.OnFailure(func(err error) { notified <- err })
	if err := fill(t, d, 1, 100); err != nil {
		t.Fatal(err)
	}
	c, err := d.Checkpoint("1") // flushes a table
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := d.Get(nil, append(Prefix(nil, 1, 1), 0, 5)); err != nil || !ok {
		t.Fatalf("Get = %t, %v", ok, err) // the table is open now
	}
	if err := fill(t, d, 2, 100); err != nil { // in the memtable only
		t.Fatal(err)
	}
	p, err := d.BeginCheckpoint("2")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(d.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "Take", func() error { _, err := p.Take(); return err }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Take = %v, want ErrFailed", err)
	}
	var first error
	select {
	case first = <-notified:
	case <-time.After(time.Minute):
		t.Fatal("OnFailure's function not called within a minute of the failure")
	}
	if !errors.Is(first, ErrFailed) || !strings.Contains(first.Error(), d.Dir()) {
		t.Fatalf("the failure %v does not wrap ErrFailed and name the directory", first)
	}
	// Every call returns the failure now. A write too large for the
	// memtables waits for a flush in pebble: that ends too.
	if err := within(t, "Apply", func() error { return fill(t, d, 3, 8<<10) }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Apply = %v, want ErrFailed", err)
	}
	if err := within(t, "Get", func() error { _, _, err := d.Get(nil, append(Prefix(nil, 1, 1), 0, 5)); return err }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Get = %v, want ErrFailed", err)
	}
	if err := within(t, "Scan", func() error { return d.Scan(nil, nil, func(k, v []byte) error { return nil }) }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Scan = %v, want ErrFailed", err)
	}
	if err := within(t, "Snapshot", func() error { _, err := d.Snapshot(); return err }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Snapshot = %v, want ErrFailed", err)
	}
	if err := within(t, "BeginCheckpoint", func() error { _, err := d.BeginCheckpoint("3"); return err }); !errors.Is(err, ErrFailed) {
		t.Fatalf("BeginCheckpoint = %v, want ErrFailed", err)
	}
	if err := d.Err(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Err = %v", err)
	}
	late := make(chan error, 1) // a function given after the failure learns it at once
	d.OnFailure(func(err error) { late <- err })
	if err := <-late; err != first {
		t.Fatalf("the failure changed: %v, then %v", first, err)
	}
	within(t, "Close", d.Close)
	select {
	case err := <-notified:
		t.Fatalf("OnFailure's function called twice: %v", err)
	default:
	}
	if got := log.errors(); len(got) > 20 {
		t.Fatalf("%d log lines about the failure, want at most 20: %q", len(got), got[:20])
	} else {
		t.Logf("log lines: %q", got)
	}
}

// TestRemovedDirectoryFailsCheckpoint removes the directory of a database
// with nothing to flush: the next checkpoint finds it gone.
func TestRemovedDirectoryFailsCheckpoint(t *testing.T) {
	d := open(t)
	if err := fill(t, d, 1, 10); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(d.Dir()); err != nil {
		t.Fatal(err)
	}
	if err := within(t, "Checkpoint", func() error { _, err := d.Checkpoint("1"); return err }); !errors.Is(err, ErrFailed) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Checkpoint = %v, want ErrFailed and os.ErrNotExist", err)
	}
	if err := within(t, "Close", d.Close); err != nil {
		t.Logf("Close: %v", err)
	}
	if _, err := os.Stat(d.checkpointsDir()); !os.IsNotExist(err) {
		t.Fatalf("the checkpoints' directory outlives Close: %v", err)
	}
}

// TestFlushFailsUnderTake removes the directory of a database while a
// checkpoint's Take, past its look at the directory, flushes writes: the
// flush fails, pebble retries it, and Take returns the failure instead
// of waiting for good.
func TestFlushFailsUnderTake(t *testing.T) {
	d := open(t)
	if err := fill(t, d, 1, 100); err != nil {
		t.Fatal(err)
	}
	afterDirCheck = func(d *DB) {
		if err := os.RemoveAll(d.Dir()); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterDirCheck = nil })
	err := within(t, "Checkpoint", func() error { _, err := d.Checkpoint("1"); return err })
	if !errors.Is(err, ErrFailed) || !strings.Contains(err.Error(), "background error") {
		t.Fatalf("Checkpoint = %v, want ErrFailed from a background error", err)
	}
	within(t, "Close", d.Close)
}

// TestWriteFailsAfterRemoval removes the directory of a database that
// only takes writes, more than its memtables hold: a write fails with
// the failure of the flush, none waits for good, and Close returns.
func TestWriteFailsAfterRemoval(t *testing.T) {
	d := open(t)
	if err := os.RemoveAll(d.Dir()); err != nil {
		t.Fatal(err)
	}
	err := within(t, "writes", func() error {
		for kg := range 1000 { // 1000 MiB: far beyond any memtable
			if err := fill(t, d, kg, 1<<10); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, ErrFailed) {
		t.Fatalf("writes = %v, want ErrFailed", err)
	}
	within(t, "Close", d.Close)
}

func TestThrottle(t *testing.T) {
	now := time.Unix(0, 0)
	th := newThrottle(10*time.Second, func() time.Time { return now })
	admit := func(msg string, wantLog bool, wantHeld int) {
		t.Helper()
		if ok, held := th.admit(msg); ok != wantLog || held != wantHeld {
			t.Fatalf("at %v, admit(%q) = %t, %d; want %t, %d", now.Sub(time.Unix(0, 0)), msg, ok, held, wantLog, wantHeld)
		}
	}
	admit("creating object 000004: no such file", true, 0)
	admit("creating object 000005: no such file", false, 0) // the same but for a number
	admit("flush: disk full", true, 0)                      // another error
	now = now.Add(9 * time.Second)
	admit("creating object 000006: no such file", false, 0)
	admit("flush: disk full", false, 0)
	now = now.Add(time.Second)
	admit("creating object 000007: no such file", true, 2) // an interval on: with the count held back
	if got := th.drain(); len(got) != 1 || got[0].msg != "flush: disk full" || got[0].n != 1 {
		t.Fatalf("drain = %+v", got)
	}
	if got := th.drain(); len(got) != 0 {
		t.Fatalf("drain again = %+v", got)
	}
	// Distinct messages beyond the bound share one count.
	th = newThrottle(10*time.Second, func() time.Time { return now })
	for i := range maxDistinct - 1 {
		admit(strings.Repeat("x", i+1), true, 0)
	}
	admit("one more", true, 0)
	admit("and another", true, 0) // the first of the rest
	admit("and yet another", false, 0)
	admit("and one more", false, 0)
	if got := th.drain(); len(got) != 1 || got[0].n != 2 {
		t.Fatalf("drain = %+v", got)
	}
	if k := throttleKey("a 12 b 3.4"); k != "a # b #.#" {
		t.Fatalf("throttleKey = %q", k)
	}
}

// TestDefaultDir: without Dir, the databases go under the user's cache
// directory, not the temporary one, and a database closed leaves nothing
// there.
func TestDefaultDir(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", filepath.Join(home, "cache"))
	chosen := defaultDir
	defaultDir = sync.OnceValue(chooseDefaultDir) // chosen again, under this environment
	t.Cleanup(func() { defaultDir = chosen })
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(cache, "snapflow", "state")
	if got := (Config{}).parent(); got != want {
		t.Fatalf("the default directory is %s, want %s", got, want)
	}
	d, err := Open(Config{CacheBytes: 1 << 20, MemTableBytes: 1 << 20}, "job/op#0")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(d.Dir()) != want {
		t.Fatalf("the database is in %s, want a directory of %s", d.Dir(), want)
	}
	if err := fill(t, d, 1, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Checkpoint("1"); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if left, err := os.ReadDir(want); err != nil || len(left) != 0 {
		t.Fatalf("left in %s after Close: %v %v", want, left, err)
	}
}
