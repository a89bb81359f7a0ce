package snapshots_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// leaseStore wraps a store and interferes with the lease object.
type leaseStore struct {
	snapshots.Store
	// afterPut runs after a successful Put of a lease.
	afterPut func(ctx context.Context)
	// failGet and failPut make reads and writes of the lease fail.
	failGet, failPut bool
}

var errLeaseStore = errors.New("injected lease store fault")

func isLease(key string) bool { return strings.HasSuffix(key, "/lease") }

func (s *leaseStore) Put(ctx context.Context, key string, data []byte) error {
	if s.failPut && isLease(key) {
		return errLeaseStore
	}
	if err := s.Store.Put(ctx, key, data); err != nil {
		return err
	}
	if s.afterPut != nil && isLease(key) {
		s.afterPut(ctx)
	}
	return nil
}

func (s *leaseStore) Get(ctx context.Context, key string) ([]byte, error) {
	if s.failGet && isLease(key) {
		return nil, errLeaseStore
	}
	return s.Store.Get(ctx, key)
}

func putLease(t *testing.T, s snapshots.Store, job string, l *messages.Lease) {
	t.Helper()
	data, err := snapshots.EncodeObject(snapshots.KindLease, l)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), snapshots.LeaseKey(job), data); err != nil {
		t.Fatal(err)
	}
}

// TestClaimLeaseOverwrittenAtOnce: a claim that lands between another
// claim's write and its read-back makes that claim fail with ErrLeaseLost.
func TestClaimLeaseOverwrittenAtOnce(t *testing.T) {
	mem := snapshots.NewMem()
	s := &leaseStore{Store: mem}
	s.afterPut = func(context.Context) {
		s.afterPut = nil
		putLease(t, mem, "job", &messages.Lease{Holder: "other", FirstEpoch: 1, TakenUnixNano: 1})
	}
	c := snapshots.NewCheckpoints(s, "job", nil)
	l, err := c.ClaimLease(t.Context(), "me", 0)
	if !errors.Is(err, snapshots.ErrLeaseLost) || !strings.Contains(err.Error(), `"other"`) {
		t.Fatalf("ClaimLease = %v, %v; want ErrLeaseLost naming the other holder", l, err)
	}
	if err := c.CheckLease(t.Context(), "me"); !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("CheckLease after the lost claim = %v; want ErrLeaseLost", err)
	}
}

// TestLeaseStoreFailures: a store failure is returned as it is, never as a
// lost lease, and a failed claim leaves the previous lease.
func TestLeaseStoreFailures(t *testing.T) {
	mem := snapshots.NewMem()
	prev := &messages.Lease{Holder: "a", FirstEpoch: 1, TakenUnixNano: 1}
	putLease(t, mem, "job", prev)
	s := &leaseStore{Store: mem, failGet: true}
	c := snapshots.NewCheckpoints(s, "job", nil)
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errLeaseStore) || errors.Is(err, snapshots.ErrLeaseLost) || !strings.Contains(err.Error(), `"job"`) {
			t.Errorf("%s = %v; want the store's error, naming the job, not ErrLeaseLost", what, err)
		}
	}
	_, err := c.ReadLease(t.Context())
	if !errors.Is(err, errLeaseStore) {
		t.Errorf("ReadLease = %v; want the store's error", err)
	}
	check("CheckLease", c.CheckLease(t.Context(), "a"))
	_, err = c.ClaimLease(t.Context(), "b", 0)
	check("ClaimLease with a failing read", err)
	s.failGet, s.failPut = false, true
	_, err = c.ClaimLease(t.Context(), "b", 0)
	check("ClaimLease with a failing write", err)
	if err := c.CheckLease(t.Context(), "a"); err != nil {
		t.Errorf("CheckLease by the previous holder after the failed claims: %v", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := snapshots.NewCheckpoints(snapshots.NewMem(), "job", nil).CheckLease(ctx, "a"); !errors.Is(err, context.Canceled) ||
		errors.Is(err, snapshots.ErrLeaseLost) {
		t.Errorf("CheckLease with a cancelled context on an empty store = %v; want context.Canceled, not ErrLeaseLost", err)
	}
}

// TestClaimLeaseEpochsExhausted: a claim whose first epoch would overflow
// is refused and leaves the lease alone; the last possible one succeeds.
func TestClaimLeaseEpochsExhausted(t *testing.T) {
	s := snapshots.NewMem()
	c := snapshots.NewCheckpoints(s, "job", nil)
	last := uint64(math.MaxUint64) - snapshots.EpochsPerLease
	full := &messages.Lease{Holder: "a", FirstEpoch: last + 1, TakenUnixNano: 1}
	putLease(t, s, "job", full)
	if l, err := c.ClaimLease(t.Context(), "b", 0); !errors.Is(err, snapshots.ErrInvalidLease) {
		t.Fatalf("ClaimLease after first epoch %d = %v, %v; want ErrInvalidLease", full.GetFirstEpoch(), l, err)
	}
	if err := c.CheckLease(t.Context(), "a"); err != nil {
		t.Fatalf("the refused claim changed the lease: %v", err)
	}
	putLease(t, s, "job", &messages.Lease{Holder: "a", FirstEpoch: last, TakenUnixNano: 1})
	if l, err := c.ClaimLease(t.Context(), "b", 0); err != nil || l.GetFirstEpoch() != math.MaxUint64 {
		t.Fatalf("ClaimLease after first epoch %d = %v, %v; want first epoch %d", last, l, err, uint64(math.MaxUint64))
	}
}

// TestClaimLeaseLogs: a claim is logged with the holders and epochs.
func TestClaimLeaseLogs(t *testing.T) {
	var logs bytes.Buffer
	c := snapshots.NewCheckpoints(snapshots.NewMem(), "job", slog.New(slog.NewTextHandler(&logs, nil)))
	for _, h := range []string{"a", "b"} {
		if _, err := c.ClaimLease(t.Context(), h, 0); err != nil {
			t.Fatal(err)
		}
	}
	want := fmt.Sprintf("job=job holder=b first_epoch=%d previous_holder=a previous_first_epoch=1", 1+snapshots.EpochsPerLease)
	if !strings.Contains(logs.String(), "lease claimed") || !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant a line with %q", logs.String(), want)
	}
}

// A coordinator claims the job's lease when it starts, passing the epoch
// its newest checkpoint calls for, and checks the lease before each
// manifest it writes; once a new coordinator has claimed it, the old one
// stops.
func ExampleCheckpoints_ClaimLease() {
	ctx := context.Background()
	store := snapshots.NewMem()
	old := snapshots.NewCheckpoints(store, "wordcount", nil)
	l, err := old.ClaimLease(ctx, "coordinator@10.0.0.1:7000#1", 1)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first epoch of the first coordinator:", l.GetFirstEpoch())

	// The first coordinator hangs; a new one starts on the same store.
	cps := snapshots.NewCheckpoints(store, "wordcount", nil)
	l, err = cps.ClaimLease(ctx, "coordinator@10.0.0.2:7000#1", 5)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first epoch of the second coordinator:", l.GetFirstEpoch())
	fmt.Println("second may write a manifest:", cps.CheckLease(ctx, "coordinator@10.0.0.2:7000#1") == nil)

	// The first one wakes up and checks before its next manifest.
	err = old.CheckLease(ctx, "coordinator@10.0.0.1:7000#1")
	fmt.Println("first has lost the lease:", errors.Is(err, snapshots.ErrLeaseLost))
	// Output:
	// first epoch of the first coordinator: 1
	// first epoch of the second coordinator: 1048577
	// second may write a manifest: true
	// first has lost the lease: true
}
