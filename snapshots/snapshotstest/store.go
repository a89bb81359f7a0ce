package snapshotstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

var storeTests = []test{
	{"RoundTrip", testRoundTrip},
	{"Overwrite", testOverwrite},
	{"GetMissing", testGetMissing},
	{"List", testList},
	{"Delete", testDelete},
	{"SpecialKeys", testSpecialKeys},
	{"InvalidKeys", testInvalidKeys},
	{"ConcurrentPuts", testConcurrentPuts},
	{"ConcurrentPutDelete", testConcurrentPutDelete},
	{"CancelledContext", testCancelledContext},
	{"Check", testCheck},
}

func mustPut(t *testing.T, s snapshots.Store, key string, data []byte) {
	t.Helper()
	if err := s.Put(t.Context(), key, data); err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
}

func mustGet(t *testing.T, s snapshots.Store, key string) []byte {
	t.Helper()
	data, err := s.Get(t.Context(), key)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	return data
}

func mustList(t *testing.T, s snapshots.Store, prefix string) []string {
	t.Helper()
	keys, err := s.List(t.Context(), prefix)
	if err != nil {
		t.Fatalf("List %q: %v", prefix, err)
	}
	return keys
}

func wantKeys(t *testing.T, s snapshots.Store, prefix string, want ...string) {
	t.Helper()
	if got := mustList(t, s, prefix); !slices.Equal(got, want) && (len(got) != 0 || len(want) != 0) {
		t.Errorf("List %q =\n\t%q\nwant\n\t%q", prefix, got, want)
	}
}

func wantNotFound(t *testing.T, s snapshots.Store, key string) {
	t.Helper()
	if data, err := s.Get(t.Context(), key); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Get %s = %d bytes, %v; want ErrNotFound", key, len(data), err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func testRoundTrip(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	objects := []struct {
		key  string
		data []byte
	}{
		{"rt/empty", []byte{}},
		{"rt/nil", nil},
		{"rt/small", []byte("hello")},
		{"rt/binary", []byte{0, 1, 2, 0xfe, 0xff}},
		{"rt/deep/er/than/that", []byte("deep")},
		{"rt/8MiB", randomBytes(8<<20, 1)},
	}
	for _, o := range objects {
		mustPut(t, s, o.key, o.data)
	}
	for _, o := range objects {
		if got := mustGet(t, s, o.key); !bytes.Equal(got, o.data) {
			t.Errorf("Get %s = %d bytes, want the %d put", o.key, len(got), len(o.data))
		}
	}
	// The store keeps its own copy in and hands out copies.
	in := []byte("original")
	mustPut(t, s, "rt/copy", in)
	in[0] = 'X'
	out := mustGet(t, s, "rt/copy")
	out[1] = 'Y'
	if got := mustGet(t, s, "rt/copy"); string(got) != "original" {
		t.Errorf("after changing the slices given to Put and by Get, Get = %q, want %q", got, "original")
	}
}

func testOverwrite(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	mustPut(t, s, "ow/k", []byte("a longer first version"))
	mustPut(t, s, "ow/k", []byte("v2"))
	if got := mustGet(t, s, "ow/k"); string(got) != "v2" {
		t.Errorf("Get after overwrite = %q, want %q", got, "v2")
	}
	mustPut(t, s, "ow/k", nil)
	if got := mustGet(t, s, "ow/k"); len(got) != 0 {
		t.Errorf("Get after overwrite with nothing = %q, want empty", got)
	}
	wantKeys(t, s, "", "ow/k")
}

func testGetMissing(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	wantNotFound(t, s, "no/such/key")
	mustPut(t, s, "gm/a/b", []byte("x"))
	wantNotFound(t, s, "gm/a")     // a prefix of a key, not an object
	wantNotFound(t, s, "gm/a/b/c") // below an object
	wantNotFound(t, s, "gm/a/bc")
	if err := s.Delete(t.Context(), "gm/a/b"); err != nil {
		t.Fatal(err)
	}
	wantNotFound(t, s, "gm/a/b")
	_, err := s.Get(t.Context(), "gm/missing")
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("gm/missing")) {
		t.Errorf("Get error %v does not name the key", err)
	}
}

func testList(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	wantKeys(t, s, "")
	keys := []string{"a/y", "ab", "b/c/d", "a#d", "a-c", "a/x/1", "a/x/2", "bb"}
	for _, k := range keys {
		mustPut(t, s, k, []byte(k))
	}
	// String order, not walk order: '#' < '-' < '/' < 'b'.
	wantKeys(t, s, "", "a#d", "a-c", "a/x/1", "a/x/2", "a/y", "ab", "b/c/d", "bb")
	wantKeys(t, s, "a", "a#d", "a-c", "a/x/1", "a/x/2", "a/y", "ab")
	wantKeys(t, s, "a/", "a/x/1", "a/x/2", "a/y")
	wantKeys(t, s, "a/x", "a/x/1", "a/x/2")
	wantKeys(t, s, "a/x/1", "a/x/1")
	wantKeys(t, s, "b", "b/c/d", "bb")
	wantKeys(t, s, "b/c", "b/c/d")
	wantKeys(t, s, "b/c/d/")
	wantKeys(t, s, "c")
	wantKeys(t, s, "zz/top/")
}

func testDelete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	mustPut(t, s, "d/x/1", []byte("1"))
	mustPut(t, s, "d/x/2", []byte("2"))
	mustPut(t, s, "d/y", []byte("y"))
	for range 2 {
		if err := s.Delete(ctx, "d/x/1"); err != nil {
			t.Fatalf("Delete d/x/1: %v", err)
		}
	}
	wantKeys(t, s, "d/", "d/x/2", "d/y")
	if err := s.Delete(ctx, "never/was/here"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
	if err := s.Delete(ctx, "d/x"); err != nil { // a prefix, not an object
		t.Errorf("Delete of a key prefix: %v", err)
	}
	wantKeys(t, s, "d/", "d/x/2", "d/y")
	if err := s.Delete(ctx, "d/x/2"); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, s, "d/", "d/y")
	mustPut(t, s, "d/x/3", []byte("3"))
	wantKeys(t, s, "d/", "d/x/3", "d/y")
}

func testSpecialKeys(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	keys := []string{
		"job/checkpoints/chk-00000000000000000001/sum#0.state",
		"job/checkpoints/chk-00000000000000000001/_manifest",
		"a-b_c.d#1",
		"x/#/-",
		"x/-#-/#-#",
		"UPPER/lower.Mixed",
		"dots.in.names/v1.2.3",
	}
	for i, k := range keys {
		mustPut(t, s, k, fmt.Appendf(nil, "object %d", i))
	}
	for i, k := range keys {
		if got, want := string(mustGet(t, s, k)), fmt.Sprintf("object %d", i); got != want {
			t.Errorf("Get %s = %q, want %q", k, got, want)
		}
	}
	want := slices.Clone(keys)
	slices.Sort(want)
	wantKeys(t, s, "", want...)
}

func testInvalidKeys(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	for _, key := range []string{
		"", "/abs", "../up", "a/../b", "a/..", "..", ".", "a/./b", "a//b", "a/", `a\b`, "nul\x00", ".tmp-x", "a/.tmp-x",
	} {
		if err := s.Put(ctx, key, []byte("x")); !errors.Is(err, snapshots.ErrInvalidKey) {
			t.Errorf("Put %q: %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(ctx, key); !errors.Is(err, snapshots.ErrInvalidKey) {
			t.Errorf("Get %q: %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, snapshots.ErrInvalidKey) {
			t.Errorf("Delete %q: %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"/abs", "../", "a/../", `a\`} {
		if _, err := s.List(ctx, prefix); !errors.Is(err, snapshots.ErrInvalidKey) {
			t.Errorf("List %q: %v, want ErrInvalidKey", prefix, err)
		}
	}
	wantKeys(t, s, "")
}

func testConcurrentPuts(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	const writers, perWriter = 8, 16
	var want []string
	var wg sync.WaitGroup
	for w := range writers {
		for i := range perWriter {
			want = append(want, fmt.Sprintf("cp/own%d/%02d", w, i), fmt.Sprintf("cp/shared/w%d-%02d", w, i))
		}
		wg.Go(func() {
			for i := range perWriter {
				for _, k := range []string{fmt.Sprintf("cp/own%d/%02d", w, i), fmt.Sprintf("cp/shared/w%d-%02d", w, i)} {
					if err := s.Put(t.Context(), k, []byte(k)); err != nil {
						t.Errorf("Put %s: %v", k, err)
					}
				}
			}
		})
	}
	wg.Wait()
	slices.Sort(want)
	wantKeys(t, s, "cp/", want...)
	for _, k := range want {
		if got := mustGet(t, s, k); string(got) != k {
			t.Errorf("Get %s = %q", k, got)
		}
	}
}

// testConcurrentPutDelete puts and deletes keys that share a directory, so
// that a store which removes empty directories races with its own puts.
func testConcurrentPutDelete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			ctx := t.Context()
			key := fmt.Sprintf("pd/a/b/k%d", w)
			for i := range 40 {
				data := fmt.Appendf(nil, "%d-%d", w, i)
				if err := s.Put(ctx, key, data); err != nil {
					t.Errorf("Put %s: %v", key, err)
					return
				}
				if got, err := s.Get(ctx, key); err != nil || !bytes.Equal(got, data) {
					t.Errorf("Get %s = %q, %v; want %q", key, got, err, data)
					return
				}
				if err := s.Delete(ctx, key); err != nil {
					t.Errorf("Delete %s: %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	wantKeys(t, s, "pd/")
}

func testCancelledContext(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	mustPut(t, s, "cc/kept", []byte("kept"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", op, err)
		}
	}
	check("Put", s.Put(ctx, "cc/new", []byte("x")))
	_, err := s.Get(ctx, "cc/kept")
	check("Get", err)
	_, err = s.List(ctx, "")
	check("List", err)
	check("Delete", s.Delete(ctx, "cc/kept"))
	check("Check", s.Check(ctx))
	wantNotFound(t, s, "cc/new")
	wantKeys(t, s, "", "cc/kept")
}

func testCheck(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	if err := s.Check(t.Context()); err != nil {
		t.Errorf("Check: %v", err)
	}
	if s.String() == "" {
		t.Error("String is empty")
	}
	wantKeys(t, s, "") // the check leaves nothing behind
}
