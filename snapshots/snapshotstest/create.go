package snapshotstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

var createTests = []test{
	{"Fresh", testCreateFresh},
	{"Existing", testCreateExisting},
	{"AfterDelete", testCreateAfterDelete},
	{"InvalidKey", testCreateInvalidKey},
	{"CancelledContext", testCreateCancelled},
	{"ConcurrentClaimants", testCreateConcurrent},
}

// creator returns s as a snapshots.Creator, or skips: conditional creation
// is optional.
func creator(t *testing.T, s snapshots.Store) snapshots.Creator {
	t.Helper()
	c, ok := s.(snapshots.Creator)
	if !ok {
		t.Skipf("%s is not a snapshots.Creator: it cannot create objects conditionally", s)
	}
	return c
}

func testCreateFresh(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c := creator(t, s)
	if err := c.Create(t.Context(), "job/leases/a", []byte("one")); err != nil {
		t.Fatalf("Create on a free key: %v", err)
	}
	if got := mustGet(t, s, "job/leases/a"); string(got) != "one" {
		t.Errorf("Get after Create = %q, want %q", got, "one")
	}
	wantKeys(t, s, "job/", "job/leases/a")
}

func testCreateExisting(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c := creator(t, s)
	mustPut(t, s, "k", []byte("put"))
	err := c.Create(t.Context(), "k", []byte("create"))
	if !errors.Is(err, snapshots.ErrExists) {
		t.Fatalf("Create on a key Put wrote: %v, want ErrExists", err)
	}
	if err := c.Create(t.Context(), "k", []byte("put")); !errors.Is(err, snapshots.ErrExists) {
		t.Errorf("Create of the very same bytes on a taken key: %v, want ErrExists", err)
	}
	if got := mustGet(t, s, "k"); string(got) != "put" {
		t.Errorf("a failed Create changed the object: %q, want %q", got, "put")
	}
	wantKeys(t, s, "", "k")
}

func testCreateAfterDelete(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c := creator(t, s)
	if err := c.Create(t.Context(), "a/b", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(t.Context(), "a/b"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(t.Context(), "a/b", []byte("2")); err != nil {
		t.Fatalf("Create after Delete: %v", err)
	}
	if got := mustGet(t, s, "a/b"); string(got) != "2" {
		t.Errorf("Get = %q, want %q", got, "2")
	}
}

func testCreateInvalidKey(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c := creator(t, s)
	for _, key := range []string{"", "/abs", "a//b", "a/../b", "a/.tmp-x"} {
		if err := c.Create(t.Context(), key, []byte("x")); !errors.Is(err, snapshots.ErrInvalidKey) {
			t.Errorf("Create %q: %v, want ErrInvalidKey", key, err)
		}
	}
	wantKeys(t, s, "")
}

func testCreateCancelled(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c := creator(t, s)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.Create(ctx, "k", []byte("x")); !errors.Is(err, context.Canceled) {
		t.Errorf("Create with a done context: %v, want context.Canceled", err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Get after a cancelled Create: %v, want ErrNotFound", err)
	}
}

// testCreateConcurrent races claimants for each of several keys: exactly
// one wins each key, and the object holds the winner's bytes.
func testCreateConcurrent(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c := creator(t, s)
	const keys, claimants = 4, 8
	type result struct {
		key, claimant int
		err           error
	}
	results := make(chan result, keys*claimants)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for k := range keys {
		for n := range claimants {
			wg.Go(func() {
				<-start
				err := c.Create(t.Context(), fmt.Sprintf("job/leases/%d", k), fmt.Appendf(nil, "claimant %d", n))
				results <- result{k, n, err}
			})
		}
	}
	close(start)
	wg.Wait()
	close(results)
	winners := make([][]int, keys)
	for r := range results {
		switch {
		case r.err == nil:
			winners[r.key] = append(winners[r.key], r.claimant)
		case !errors.Is(r.err, snapshots.ErrExists):
			t.Errorf("key %d, claimant %d: %v, want nil or ErrExists", r.key, r.claimant, r.err)
		}
	}
	for k, w := range winners {
		if len(w) != 1 {
			t.Errorf("key %d: claimants %v won, want exactly one", k, w)
			continue
		}
		if got, want := mustGet(t, s, fmt.Sprintf("job/leases/%d", k)), fmt.Appendf(nil, "claimant %d", w[0]); !bytes.Equal(got, want) {
			t.Errorf("key %d holds %q, but %q won", k, got, want)
		}
	}
}
