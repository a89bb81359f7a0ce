package snapshots_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// leaseStore wraps a store and makes reads or writes of the lease's
// objects fail. It hides the store's Creator.
type leaseStore struct {
	snapshots.Store
	failGet, failPut bool
}

var errLeaseStore = errors.New("injected lease store fault")

func isLease(key string) bool { return strings.Contains(key, "/leases/") }

func (s *leaseStore) Put(ctx context.Context, key string, data []byte) error {
	if s.failPut && isLease(key) {
		return errLeaseStore
	}
	return s.Store.Put(ctx, key, data)
}

func (s *leaseStore) Get(ctx context.Context, key string) ([]byte, error) {
	if s.failGet && isLease(key) {
		return nil, errLeaseStore
	}
	return s.Store.Get(ctx, key)
}

func (s *leaseStore) List(ctx context.Context, prefix string) ([]string, error) {
	if s.failGet && isLease(prefix) {
		return nil, errLeaseStore
	}
	return s.Store.List(ctx, prefix)
}

func putClaim(t *testing.T, s snapshots.Store, job string, l *messages.Lease) {
	t.Helper()
	data, err := snapshots.EncodeObject(snapshots.KindLease, l)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(t.Context(), snapshots.LeaseClaimKey(job, l.GetGeneration()), data); err != nil {
		t.Fatal(err)
	}
}

// TestLeaseStoreFailures: a store failure is returned as it is, never as a
// lost lease.
func TestLeaseStoreFailures(t *testing.T) {
	mem := snapshots.NewMem()
	s := &leaseStore{Store: mem}
	c := snapshots.NewCheckpoints(s, "job", nil)
	if _, err := c.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	s.failGet = true
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, errLeaseStore) || errors.Is(err, snapshots.ErrLeaseLost) || !strings.Contains(err.Error(), `"job"`) {
			t.Errorf("%s = %v; want the store's error, naming the job, not ErrLeaseLost", what, err)
		}
	}
	check("CheckLease", c.CheckLease(t.Context()))
	check("RenewLease", c.RenewLease(t.Context()))
	_, err := snapshots.NewCheckpoints(s, "job", nil).AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "b"})
	check("AcquireLease with failing reads", err)
	s.failGet, s.failPut = false, true
	check("RenewLease with failing writes", c.RenewLease(t.Context()))
	s.failPut = false
	if err := c.CheckLease(t.Context()); err != nil {
		t.Errorf("CheckLease once the store works again: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := c.CheckLease(ctx); !errors.Is(err, context.Canceled) || errors.Is(err, snapshots.ErrLeaseLost) {
		t.Errorf("CheckLease with a cancelled context = %v; want context.Canceled, not ErrLeaseLost", err)
	}
}

// TestAcquireLeaseWithoutCreator: a store that cannot create objects
// conditionally still gets a lease, with a warning that says what that
// costs.
func TestAcquireLeaseWithoutCreator(t *testing.T) {
	var logs bytes.Buffer
	s := &leaseStore{Store: snapshots.NewMem()}
	a := snapshots.NewCheckpoints(s, "job", slog.New(slog.NewTextHandler(&logs, nil)))
	if _, err := a.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "a"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "cannot create objects conditionally") {
		t.Errorf("no warning about the missing conditional writes:\n%s", logs.String())
	}
	b := snapshots.NewCheckpoints(s, "job", nil)
	if _, err := b.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "b"}); !errors.Is(err, snapshots.ErrLeaseHeld) {
		t.Errorf("a second claimant: %v, want ErrLeaseHeld", err)
	}
}

// TestAcquireLeaseEpochsExhausted: a claim whose epochs would overflow is
// refused.
func TestAcquireLeaseEpochsExhausted(t *testing.T) {
	s := snapshots.NewMem()
	putClaim(t, s, "job", &messages.Lease{Holder: "a", FirstEpoch: math.MaxUint64 - snapshots.EpochsPerLease, Generation: 3, TakenUnixNano: 1})
	data, _ := snapshots.EncodeObject(snapshots.KindLeaseRenewal, &messages.LeaseRenewal{Generation: 3, Released: true})
	if err := s.Put(t.Context(), snapshots.LeaseRenewalKey("job", 3), data); err != nil {
		t.Fatal(err)
	}
	c := snapshots.NewCheckpoints(s, "job", nil)
	if l, err := c.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "b"}); !errors.Is(err, snapshots.ErrInvalidLease) {
		t.Fatalf("AcquireLease with no epochs left = %v, %v; want ErrInvalidLease", l, err)
	}
}

// TestAcquireLeaseAboveLegacy: the first generation's epochs lie above
// those of a coordinator lease of an earlier version (<job>/lease).
func TestAcquireLeaseAboveLegacy(t *testing.T) {
	s := snapshots.NewMem()
	data, _ := snapshots.EncodeObject(snapshots.KindLease, &messages.Lease{Holder: "old", FirstEpoch: 5 * snapshots.EpochsPerLease})
	if err := s.Put(t.Context(), "job/lease", data); err != nil {
		t.Fatal(err)
	}
	l, err := snapshots.NewCheckpoints(s, "job", nil).AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "new"})
	if err != nil || l.GetGeneration() != 1 || l.GetFirstEpoch() != 6*snapshots.EpochsPerLease {
		t.Fatalf("AcquireLease over a legacy lease = %v, %v; want generation 1 at first epoch %d", l, err, 6*snapshots.EpochsPerLease)
	}
}

// TestAcquireLeaseProcessGone: a holder on this machine whose process has
// exited is taken over at once, without waiting for its TTL.
func TestAcquireLeaseProcessGone(t *testing.T) {
	if snapshots.MachineID() == "" {
		t.Skip("this system cannot tell whether a process runs")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	s := snapshots.NewMem()
	putClaim(t, s, "job", &messages.Lease{Holder: "gone", FirstEpoch: 1, Generation: 1, TakenUnixNano: 1, Host: "here",
		Pid: int64(cmd.Process.Pid), Machine: snapshots.MachineID(), TtlNanos: math.MaxInt64})
	var logs bytes.Buffer
	c := snapshots.NewCheckpoints(s, "job", slog.New(slog.NewTextHandler(&logs, nil)))
	l, err := c.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "next"})
	if err != nil || l.GetGeneration() != 2 || l.GetTakenFrom() != "" {
		t.Fatalf("AcquireLease after the holder's process exited = %v, %v; want generation 2", l, err)
	}
	if want := fmt.Sprintf("its process %d on this host is gone", cmd.Process.Pid); !strings.Contains(logs.String(), want) {
		t.Errorf("log:\n%s\nwant %q", logs.String(), want)
	}
}

// A job's holder acquires the lease when it starts, seals it once it has
// read the store, renews it while it runs and checks it before it acts on
// a checkpoint; once another has taken the job over, it stops.
func ExampleCheckpoints_AcquireLease() {
	ctx := context.Background()
	store := snapshots.NewMem()
	old := snapshots.NewCheckpoints(store, "wordcount", nil)
	l, err := old.AcquireLease(ctx, snapshots.LeaseRequest{Holder: "wordcount"})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first holder: generation", l.GetGeneration(), "first epoch", l.GetFirstEpoch())
	if err := old.SealLease(ctx, 0, nil); err != nil {
		fmt.Println(err)
		return
	}

	// A second instance is refused while the first runs...
	next := snapshots.NewCheckpoints(store, "wordcount", nil)
	_, err = next.AcquireLease(ctx, snapshots.LeaseRequest{Holder: "wordcount"})
	fmt.Println("second refused:", errors.Is(err, snapshots.ErrLeaseHeld))

	// ... unless it takes over on purpose.
	l, err = next.AcquireLease(ctx, snapshots.LeaseRequest{Holder: "wordcount", TakeOver: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("second holder: generation", l.GetGeneration(), "first epoch", l.GetFirstEpoch())

	// The first one checks before its next write.
	err = old.CheckLease(ctx)
	fmt.Println("first has lost the lease:", errors.Is(err, snapshots.ErrLeaseLost))
	// Output:
	// first holder: generation 1 first epoch 1
	// second refused: true
	// second holder: generation 2 first epoch 1048577
	// first has lost the lease: true
}
