package snapshotstest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

var leaseTests = []test{
	{"Empty", testLeaseEmpty},
	{"Successive", testLeaseSuccessive},
	{"Check", testLeaseCheck},
	{"EmptyHolder", testLeaseEmptyHolder},
	{"Corrupt", testLeaseCorrupt},
	{"IgnoredByCheckpoints", testLeaseIgnoredByCheckpoints},
	{"Window", testLeaseWindow},
	{"WindowAfterCleanup", testLeaseWindowAfterCleanup},
}

// claim claims the lease of c's job for holder and checks the result
// against the lease in the store.
func claim(t *testing.T, c *snapshots.Checkpoints, holder string, minEpoch uint64) *messages.Lease {
	t.Helper()
	before := time.Now().UnixNano()
	l, err := c.ClaimLease(t.Context(), holder, minEpoch)
	after := time.Now().UnixNano()
	if err != nil {
		t.Fatalf("ClaimLease(%q, %d): %v", holder, minEpoch, err)
	}
	if l.GetHolder() != holder || l.GetTakenUnixNano() < before || l.GetTakenUnixNano() > after {
		t.Fatalf("ClaimLease(%q, %d) = %v; want holder %q taken in [%d, %d]", holder, minEpoch, l, holder, before, after)
	}
	wantLease(t, c, l)
	return l
}

// wantLease checks that c reads want as its job's lease.
func wantLease(t *testing.T, c *snapshots.Checkpoints, want *messages.Lease) {
	t.Helper()
	got, err := c.ReadLease(t.Context())
	if err != nil || !proto.Equal(got, want) {
		t.Fatalf("ReadLease = %v, %v; want %v", got, err, want)
	}
}

// wantLost checks that holder's CheckLease fails with ErrLeaseLost and
// says who holds the lease now.
func wantLost(t *testing.T, c *snapshots.Checkpoints, holder string, now *messages.Lease) {
	t.Helper()
	err := c.CheckLease(t.Context(), holder)
	if !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("CheckLease(%q) = %v; want ErrLeaseLost", holder, err)
	}
	want := []string{holder, snapshots.LeaseKey(c.Job())}
	if now == nil {
		want = append(want, "no lease")
	} else {
		taken := time.Unix(0, now.GetTakenUnixNano()).UTC().Format(time.RFC3339Nano)
		want = append(want, `"`+now.GetHolder()+`"`, taken)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("CheckLease(%q) = %q; want it to name %q", holder, err, w)
		}
	}
}

func testLeaseEmpty(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	if l, err := c.ReadLease(t.Context()); l != nil || err != nil {
		t.Fatalf("ReadLease on an empty store = %v, %v; want nil, nil", l, err)
	}
	wantLost(t, c, "a", nil)
	if l := claim(t, c, "a", 0); l.GetFirstEpoch() != 1 {
		t.Errorf("first claim with minEpoch 0: FirstEpoch %d, want 1", l.GetFirstEpoch())
	}
	if err := c.CheckLease(t.Context(), "a"); err != nil {
		t.Errorf("CheckLease by the holder: %v", err)
	}
	wantKeys(t, s, "", snapshots.LeaseKey(job))

	other := snapshots.NewCheckpoints(s, job+"2", nil) // another job's lease is its own
	if l, err := other.ReadLease(t.Context()); l != nil || err != nil {
		t.Fatalf("ReadLease of another job = %v, %v; want nil, nil", l, err)
	}
	if l := claim(t, other, "b", 7); l.GetFirstEpoch() != 7 {
		t.Errorf("first claim with minEpoch 7: FirstEpoch %d, want 7", l.GetFirstEpoch())
	}
	if err := c.CheckLease(t.Context(), "a"); err != nil {
		t.Errorf("CheckLease after another job's claim: %v", err)
	}
}

func testLeaseSuccessive(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	const e = snapshots.EpochsPerLease
	prev := claim(t, c, "a", 0)
	for _, step := range []struct {
		holder   string
		minEpoch uint64
		want     uint64
	}{
		{"b", 0, 1 + e},
		{"c", 5, 1 + 2*e},       // minEpoch below the previous holder's epochs
		{"d", 2 + 2*e, 1 + 3*e}, // minEpoch among them
		{"e", 10 * e, 10 * e},   // minEpoch above them
		{"e", 0, 11 * e},        // the same holder again
		{"f", 12*e - 1, 12 * e}, // minEpoch the previous holder's last epoch
		{"g", 13*e + 1, 13*e + 1},
	} {
		// Every claim starts at least EpochsPerLease above the previous one.
		want := max(step.minEpoch, prev.GetFirstEpoch()+e)
		if want != step.want {
			t.Fatalf("bad step %+v: the rule gives %d", step, want)
		}
		l := claim(t, c, step.holder, step.minEpoch)
		if l.GetFirstEpoch() != step.want {
			t.Errorf("claim by %q with minEpoch %d after first epoch %d: FirstEpoch %d, want %d",
				step.holder, step.minEpoch, prev.GetFirstEpoch(), l.GetFirstEpoch(), step.want)
		}
		prev = l
	}
	fresh, _ := newCheckpoints(s) // another process reads the same lease
	wantLease(t, fresh, prev)
}

func testLeaseCheck(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	a, _ := newCheckpoints(s)
	b, _ := newCheckpoints(s) // another coordinator process
	claim(t, a, "coordinator-a", 0)
	if err := a.CheckLease(t.Context(), "coordinator-a"); err != nil {
		t.Fatalf("CheckLease by the holder: %v", err)
	}
	wantLost(t, b, "coordinator-b", mustReadLease(t, b))
	lb := claim(t, b, "coordinator-b", 0)
	wantLost(t, a, "coordinator-a", lb)
	if err := b.CheckLease(t.Context(), "coordinator-b"); err != nil {
		t.Fatalf("CheckLease by the new holder: %v", err)
	}
	if err := a.CheckLease(t.Context(), "coordinator-b"); err != nil {
		t.Fatalf("CheckLease by the new holder through another Checkpoints: %v", err)
	}
	// The lease is gone (deleted by hand): nobody holds the job.
	if err := s.Delete(t.Context(), snapshots.LeaseKey(job)); err != nil {
		t.Fatal(err)
	}
	wantLost(t, b, "coordinator-b", nil)
}

func mustReadLease(t *testing.T, c *snapshots.Checkpoints) *messages.Lease {
	t.Helper()
	l, err := c.ReadLease(t.Context())
	if err != nil {
		t.Fatalf("ReadLease: %v", err)
	}
	return l
}

func testLeaseEmptyHolder(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	if l, err := c.ClaimLease(t.Context(), "", 0); !errors.Is(err, snapshots.ErrInvalidLease) {
		t.Errorf("ClaimLease with an empty holder = %v, %v; want ErrInvalidLease", l, err)
	}
	wantKeys(t, s, "")
	claim(t, c, "a", 0)
	if err := c.CheckLease(t.Context(), ""); !errors.Is(err, snapshots.ErrInvalidLease) {
		t.Errorf("CheckLease with an empty holder = %v; want ErrInvalidLease", err)
	}
}

// testLeaseCorrupt damages the lease object by hand: reading it, checking
// it and claiming over it all fail with ErrCorrupt (never ErrLeaseLost,
// which would tell a holder something false), and a claim leaves the
// damaged object for an operator to inspect.
func testLeaseCorrupt(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	key := snapshots.LeaseKey(job)
	claim(t, c, "a", 0)
	good := mustGet(t, s, key)
	encode := func(l *messages.Lease) []byte { return mustEncodeLease(t, l) }
	manifest, err := snapshots.EncodeObject(snapshots.KindManifest, manifestOf(1, nil))
	if err != nil {
		t.Fatal(err)
	}
	damaged := map[string][]byte{
		"garbage":        []byte("garbage"),
		"empty":          {},
		"manifest kind":  manifest,
		"no holder":      encode(&messages.Lease{FirstEpoch: 3, TakenUnixNano: 1}),
		"first epoch 0":  encode(&messages.Lease{Holder: "a", TakenUnixNano: 1}),
		"truncated":      good[:len(good)-1],
		"trailing bytes": append(slices.Clip(good), 0),
	}
	for i := range good {
		b := slices.Clone(good)
		b[i] ^= 0xff
		damaged[fmt.Sprintf("byte %d flipped", i)] = b
	}
	for name, data := range damaged {
		mustPut(t, s, key, data)
		if l, err := c.ReadLease(t.Context()); !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: ReadLease = %v, %v; want ErrCorrupt naming %s", name, l, err, key)
		}
		if err := c.CheckLease(t.Context(), "a"); !errors.Is(err, snapshots.ErrCorrupt) || errors.Is(err, snapshots.ErrLeaseLost) {
			t.Errorf("%s: CheckLease = %v; want ErrCorrupt, not ErrLeaseLost", name, err)
		}
		if l, err := c.ClaimLease(t.Context(), "b", 0); !errors.Is(err, snapshots.ErrCorrupt) {
			t.Errorf("%s: ClaimLease = %v, %v; want ErrCorrupt", name, l, err)
		}
		if got := mustGet(t, s, key); !slices.Equal(got, data) {
			t.Errorf("%s: ClaimLease replaced the damaged lease", name)
		}
	}
}

// testLeaseIgnoredByCheckpoints checks that the lease is invisible to the
// checkpoint scans and survives every deletion of checkpoints, DeleteAll
// included: starting a job over must not let a stale coordinator take it
// back.
func testLeaseIgnoredByCheckpoints(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	c, _ := newCheckpoints(s)
	ctx := t.Context()
	la := claim(t, c, "a", 0) // on an empty store: still no checkpoint
	if id, err := c.MaxID(ctx); id != 0 || err != nil {
		t.Errorf("MaxID with only a lease = %d, %v; want 0", id, err)
	}
	if infos, err := c.List(ctx); len(infos) != 0 || err != nil {
		t.Errorf("List with only a lease = %+v, %v; want none", infos, err)
	}
	if r := loadLatest(t, c); r != nil {
		t.Errorf("LoadLatest with only a lease = checkpoint %d", r.Manifest.GetCheckpointId())
	}

	complete(t, c, 1)
	complete(t, c, 2)
	putStates(t, c, 3, "src#0") // aborted
	complete(t, c, 4)
	putStates(t, c, 5, "src#0") // in flight
	if err := s.Delete(ctx, snapshots.LeaseKey(job)); err != nil {
		t.Fatal(err)
	}
	without, err := c.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mustPut(t, s, snapshots.LeaseKey(job), mustEncodeLease(t, la))
	with, err := c.List(ctx)
	if err != nil || !slices.EqualFunc(with, without, sameInfo) {
		t.Errorf("List with a lease = %+v, %v; want %+v", with, err, without)
	}
	if id, err := c.MaxID(ctx); id != 5 || err != nil {
		t.Errorf("MaxID = %d, %v; want 5", id, err)
	}
	if id, err := c.LatestCompleteID(ctx); id != 4 || err != nil {
		t.Errorf("LatestCompleteID = %d, %v; want 4", id, err)
	}
	if r := loadLatest(t, c); r == nil || r.Manifest.GetCheckpointId() != 4 {
		t.Errorf("LoadLatest = %v, want checkpoint 4", r)
	}

	want := append(keysOf(t, s, 2, 4, 5), snapshots.LeaseKey(job))
	slices.Sort(want)
	if err := c.Retain(ctx, 2, 5); err != nil {
		t.Fatalf("Retain: %v", err)
	}
	wantKeys(t, s, "", want...)
	putStates(t, c, 6, "src#0")
	if n, err := c.DeleteIncomplete(ctx, 6); n != 1 || err != nil {
		t.Errorf("DeleteIncomplete(6) = %d, %v; want 1 (checkpoint 5)", n, err)
	}
	if n, err := c.DeleteAll(ctx); n != 3 || err != nil {
		t.Errorf("DeleteAll = %d, %v; want 3 (checkpoints 2, 4, 6)", n, err)
	}
	wantKeys(t, s, "", snapshots.LeaseKey(job))
	fresh, _ := newCheckpoints(s)
	wantLease(t, fresh, la)
	if err := fresh.CheckLease(ctx, "a"); err != nil {
		t.Errorf("CheckLease after DeleteAll: %v", err)
	}
	if lb := claim(t, fresh, "b", 0); lb.GetFirstEpoch() < la.GetFirstEpoch()+snapshots.EpochsPerLease {
		t.Errorf("claim after DeleteAll: FirstEpoch %d, want at least %d", lb.GetFirstEpoch(), la.GetFirstEpoch()+snapshots.EpochsPerLease)
	}
}

func sameInfo(a, b snapshots.Info) bool {
	return a.ID == b.ID && a.Complete == b.Complete && a.Time.Equal(b.Time) && a.Tasks == b.Tasks &&
		a.Bytes == b.Bytes && a.Objects == b.Objects && (a.Err == nil) == (b.Err == nil)
}

func mustEncodeLease(t *testing.T, l *messages.Lease) []byte {
	t.Helper()
	data, err := snapshots.EncodeObject(snapshots.KindLease, l)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// windowStart plays the start of the window that CheckLease documents:
// coordinator A completes checkpoint 1, stores every state of checkpoint 2
// and checks its lease; then coordinator B claims the lease and reads
// MaxID. It returns both and the id B numbers its checkpoints from.
func windowStart(t *testing.T, s snapshots.Store) (a, b *snapshots.Checkpoints, aManifest *messages.Manifest, bFirstID uint64, lb *messages.Lease) {
	t.Helper()
	a, _ = newCheckpoints(s)
	la := claim(t, a, "a", 0)
	complete(t, a, 1)
	aManifest = manifestOf(2, putStates(t, a, 2, defaultTasks...))
	aManifest.Epoch = la.GetFirstEpoch()
	if err := a.CheckLease(t.Context(), "a"); err != nil {
		t.Fatalf("A's CheckLease: %v", err)
	}
	b, _ = newCheckpoints(s)
	lb = claim(t, b, "b", 0)
	maxID, err := b.MaxID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if maxID < aManifest.GetCheckpointId() {
		t.Fatalf("B's MaxID after its claim = %d, below A's checkpoint %d in flight", maxID, aManifest.GetCheckpointId())
	}
	return a, b, aManifest, maxID + 1, lb
}

// testLeaseWindow: A's manifest written after B's claim completes a
// checkpoint with an id below all of B's; recovery restores it until B
// completes one, and A's next check fails.
func testLeaseWindow(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	a, b, am, next, lb := windowStart(t, s)
	if err := a.PutManifest(t.Context(), am); err != nil { // in the window
		t.Fatal(err)
	}
	wantLost(t, a, "a", lb)
	if r := loadLatest(t, b); r == nil || !proto.Equal(r.Manifest, am) {
		t.Fatalf("LoadLatest = %v, want A's checkpoint %d", r, am.GetCheckpointId())
	}
	if next <= am.GetCheckpointId() {
		t.Fatalf("B's first checkpoint %d is not above A's %d", next, am.GetCheckpointId())
	}
	m := manifestOf(next, putStates(t, b, next, defaultTasks...))
	m.Epoch = lb.GetFirstEpoch()
	if err := b.CheckLease(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	if err := b.PutManifest(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	if r := loadLatest(t, b); r == nil || r.Manifest.GetCheckpointId() != next || r.Manifest.GetEpoch() != lb.GetFirstEpoch() {
		t.Fatalf("LoadLatest = %v, want B's checkpoint %d", r, next)
	}
}

// testLeaseWindowAfterCleanup: B's start-up retention deletes A's
// checkpoint in flight before A's manifest lands; that checkpoint is then
// complete but unusable, and recovery falls back to the one before it.
func testLeaseWindowAfterCleanup(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	a, b, am, next, _ := windowStart(t, s)
	if err := b.Retain(t.Context(), 1, next); err != nil {
		t.Fatal(err)
	}
	if err := a.PutManifest(t.Context(), am); err != nil { // in the window
		t.Fatal(err)
	}
	c, logs := newCheckpoints(s) // a later coordinator
	if r := loadLatest(t, c); r == nil || r.Manifest.GetCheckpointId() != 1 {
		t.Fatalf("LoadLatest = %v, want checkpoint 1", r)
	}
	if !strings.Contains(logs.String(), "unusable") {
		t.Errorf("LoadLatest skipped checkpoint %d without logging it:\n%s", am.GetCheckpointId(), logs)
	}
}
