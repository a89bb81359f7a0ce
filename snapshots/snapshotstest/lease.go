package snapshotstest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/protobuf/proto"
)

var leaseTests = []test{
	{"Empty", testLeaseEmpty},
	{"Released", testLeaseReleased},
	{"LiveHolderRefused", testLeaseLiveHolderRefused},
	{"TakeOverFences", testLeaseTakeOverFences},
	{"RenewingHolderRefused", testLeaseRenewingHolderRefused},
	{"SilentHolderExpires", testLeaseSilentHolderExpires},
	{"ConcurrentClaimants", testLeaseConcurrentClaimants},
	{"Corrupt", testLeaseCorrupt},
	{"IgnoredByCheckpoints", testLeaseIgnoredByCheckpoints},
	{"SameIDBothHolders", testLeaseSameIDBothHolders},
	{"LateManifestVoid", testLeaseLateManifestVoid},
	{"LateOriginIgnored", testLeaseLateOriginIgnored},
	{"DeletesOnlyOlderEpochs", testLeaseDeletesOnlyOlderEpochs},
	{"RetentionPausedAcrossTakeover", testLeaseRetentionPausedAcrossTakeover},
}

// acquire acquires the lease of c's job and checks it.
func acquire(t *testing.T, c *snapshots.Checkpoints, req snapshots.LeaseRequest) *messages.Lease {
	t.Helper()
	l, err := c.AcquireLease(t.Context(), req)
	if err != nil {
		t.Fatalf("AcquireLease(%+v): %v", req, err)
	}
	got, err := c.ReadLease(t.Context())
	if err != nil || !proto.Equal(got, l) {
		t.Fatalf("ReadLease after AcquireLease = %v, %v; want %v", got, err, l)
	}
	if !strings.Contains(l.GetHolder(), req.Holder) {
		t.Errorf("holder %q does not name the claimant %q", l.GetHolder(), req.Holder)
	}
	return l
}

// hold acquires the lease and seals it after reading the store, as a
// job's start does, and returns it.
func hold(t *testing.T, c *snapshots.Checkpoints, name string, takeOver bool) *messages.Lease {
	t.Helper()
	l := acquire(t, c, snapshots.LeaseRequest{Holder: name, TakeOver: takeOver})
	id, err := c.LatestCompleteID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	o, err := c.EffectiveOrigin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SealLease(t.Context(), id, o); err != nil {
		t.Fatalf("SealLease: %v", err)
	}
	return l
}

// holderCheckpoint stores the states of checkpoint id at epoch and writes
// its manifest, returning PutManifest's error.
func holderCheckpoint(t *testing.T, c *snapshots.Checkpoints, id, epoch uint64) (*messages.Manifest, error) {
	t.Helper()
	var entries []*messages.TaskStateEntry
	for _, task := range defaultTasks {
		st := taskState(id, task)
		st.Epoch = epoch
		h, err := c.PutTaskState(t.Context(), id, st)
		if err != nil {
			t.Fatalf("PutTaskState %d %s: %v", id, task, err)
		}
		if want := snapshots.EpochStateKey(job, id, epoch, task); h.GetKey() != want {
			t.Fatalf("handle key %q, want %q", h.GetKey(), want)
		}
		entries = append(entries, &messages.TaskStateEntry{TaskId: task, State: h})
	}
	m := manifestOf(id, entries)
	m.Epoch = epoch
	return m, c.PutManifest(t.Context(), m)
}

// wantLost checks that err wraps ErrLeaseLost and names the new holder.
func wantLost(t *testing.T, what string, err error, now *messages.Lease) {
	t.Helper()
	if !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("%s = %v; want ErrLeaseLost", what, err)
	}
	if !strings.Contains(err.Error(), now.GetHolder()) {
		t.Errorf("%s = %q; want it to name the new holder %q", what, err, now.GetHolder())
	}
}

// foreignClaim writes the claim of generation gen of a holder on another
// machine, with the given TTL, as if another host had acquired it.
func foreignClaim(t *testing.T, s snapshots.Store, gen uint64, ttl time.Duration) *messages.Lease {
	t.Helper()
	l := &messages.Lease{Holder: fmt.Sprintf("other@elsewhere:7-%d", gen), FirstEpoch: 1 + (gen-1)*snapshots.EpochsPerLease,
		TakenUnixNano: time.Now().UnixNano(), Generation: gen, Host: "elsewhere", Pid: 7, Machine: "another machine",
		RenewIntervalNanos: (ttl / 10).Nanoseconds(), TtlNanos: ttl.Nanoseconds()}
	mustPut(t, s, snapshots.LeaseClaimKey(job, gen), encode(t, snapshots.KindLease, l))
	return l
}

func renewal(t *testing.T, s snapshots.Store, gen, seq uint64, released bool) {
	t.Helper()
	mustPut(t, s, snapshots.LeaseRenewalKey(job, gen), encode(t, snapshots.KindLeaseRenewal,
		&messages.LeaseRenewal{Generation: gen, Seq: seq, Released: released}))
}

func encode(t *testing.T, kind string, m proto.Message) []byte {
	t.Helper()
	data, err := snapshots.EncodeObject(kind, m)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func testLeaseEmpty(t *testing.T, newStore newStoreFunc) {
	c, _ := newCheckpoints(newStore(t))
	if l, err := c.ReadLease(t.Context()); l != nil || err != nil {
		t.Fatalf("ReadLease on an empty store = %v, %v; want none", l, err)
	}
	if err := c.CheckLease(t.Context()); err != nil {
		t.Errorf("CheckLease without a lease: %v", err)
	}
	l := acquire(t, c, snapshots.LeaseRequest{Holder: "a"})
	if l.GetGeneration() != 1 || l.GetFirstEpoch() != 1 || l.GetPid() == 0 || l.GetTakenFrom() != "" {
		t.Errorf("first lease = %v; want generation 1, first epoch 1, a pid", l)
	}
	if !proto.Equal(c.Lease(), l) {
		t.Errorf("Lease = %v, want %v", c.Lease(), l)
	}
	for range 3 {
		if err := c.RenewLease(t.Context()); err != nil {
			t.Fatalf("RenewLease: %v", err)
		}
	}
	if err := c.CheckLease(t.Context()); err != nil {
		t.Errorf("CheckLease of the holder: %v", err)
	}
	if _, err := c.AcquireLease(t.Context(), snapshots.LeaseRequest{}); !errors.Is(err, snapshots.ErrInvalidLease) {
		t.Errorf("a second AcquireLease of one Checkpoints: %v, want ErrInvalidLease", err)
	}
}

func testLeaseReleased(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	a, _ := newCheckpoints(s)
	la := acquire(t, a, snapshots.LeaseRequest{Holder: "a"})
	if err := a.ReleaseLease(t.Context()); err != nil {
		t.Fatalf("ReleaseLease: %v", err)
	}
	if a.Lease() != nil {
		t.Errorf("Lease after ReleaseLease = %v, want nil", a.Lease())
	}
	b, _ := newCheckpoints(s)
	lb := acquire(t, b, snapshots.LeaseRequest{Holder: "b"})
	if lb.GetGeneration() != 2 || lb.GetFirstEpoch() != la.GetFirstEpoch()+snapshots.EpochsPerLease || lb.GetTakenFrom() != "" {
		t.Errorf("lease after a release = %v; want generation 2, first epoch %d, taken from nobody", lb, la.GetFirstEpoch()+snapshots.EpochsPerLease)
	}
}

// testLeaseLiveHolderRefused: a holder of this process is alive; a second
// claimant is refused at once, with an error that names the holder.
func testLeaseLiveHolderRefused(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	a, _ := newCheckpoints(s)
	la := acquire(t, a, snapshots.LeaseRequest{Holder: "a"})
	b, _ := newCheckpoints(s)
	_, err := b.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "b"})
	var held *snapshots.LeaseHeldError
	if !errors.As(err, &held) || !errors.Is(err, snapshots.ErrLeaseHeld) {
		t.Fatalf("AcquireLease against a live holder: %v; want a *LeaseHeldError", err)
	}
	for _, want := range []string{la.GetHolder(), fmt.Sprintf("pid %d", la.GetPid()), "take over"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if err := a.CheckLease(t.Context()); err != nil {
		t.Errorf("the holder's CheckLease after a refused claim: %v", err)
	}
}

// testLeaseTakeOverFences: a deliberate takeover fences the old holder:
// every write it makes afterwards fails with ErrLeaseLost, and a manifest
// it writes is in place but reported lost.
func testLeaseTakeOverFences(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	a, _ := newCheckpoints(s)
	la := hold(t, a, "a", false)
	if _, err := holderCheckpoint(t, a, 1, la.GetFirstEpoch()); err != nil {
		t.Fatal(err)
	}
	b, _ := newCheckpoints(s)
	lb := hold(t, b, "b", true)
	if lb.GetTakenFrom() != la.GetHolder() || lb.GetGeneration() != 2 {
		t.Errorf("taken-over lease = %v; want generation 2 taken from %q", lb, la.GetHolder())
	}
	wantLost(t, "CheckLease", a.CheckLease(ctx), lb)
	wantLost(t, "RenewLease", a.RenewLease(ctx), lb)
	_, err := holderCheckpoint(t, a, 2, la.GetFirstEpoch())
	wantLost(t, "PutManifest", err, lb)
	wantLost(t, "Retain", a.Retain(ctx, 1, 3), lb)
	_, err = a.DeleteIncomplete(ctx, 3)
	wantLost(t, "DeleteIncomplete", err, lb)
	wantLost(t, "PutOrigin", a.PutOrigin(ctx, &messages.Origin{CheckpointId: 1, FirstId: 3}), lb)
	_, err = a.DeleteAll(ctx)
	wantLost(t, "DeleteAll", err, lb)
	if err := a.ReleaseLease(ctx); err != nil {
		t.Errorf("ReleaseLease of a lost lease: %v", err)
	}
	if err := b.CheckLease(ctx); err != nil {
		t.Errorf("the new holder's CheckLease: %v", err)
	}
	// A's manifest of checkpoint 2 landed after B sealed: it is void.
	if r := loadLatest(t, b); r == nil || r.Manifest.GetCheckpointId() != 1 {
		t.Errorf("LoadLatest = %v, want checkpoint 1 (2 is void)", r)
	}
}

// testLeaseRenewingHolderRefused: a holder on another machine that keeps
// renewing is refused after one of its renewals is seen.
func testLeaseRenewingHolderRefused(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	other := foreignClaim(t, s, 1, time.Hour) // never expires while the test runs
	renewal(t, s, 1, 1, false)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { // renews until the claimant gives up
		for seq := uint64(2); ctx.Err() == nil; seq++ {
			if err := s.Put(ctx, snapshots.LeaseRenewalKey(job, 1), encode(t, snapshots.KindLeaseRenewal,
				&messages.LeaseRenewal{Generation: 1, Seq: seq})); err != nil && ctx.Err() == nil {
				t.Errorf("renew: %v", err)
				return
			}
		}
	})
	b, _ := newCheckpoints(s)
	_, err := b.AcquireLease(ctx, snapshots.LeaseRequest{Holder: "b"})
	cancel()
	var held *snapshots.LeaseHeldError
	if !errors.As(err, &held) || held.Holder.GetHolder() != other.GetHolder() || !strings.Contains(err.Error(), "renewed") {
		t.Fatalf("AcquireLease against a renewing holder: %v; want a *LeaseHeldError naming %q that says it renewed", err, other.GetHolder())
	}
}

// testLeaseSilentHolderExpires: a holder on another machine that neither
// renews nor released is taken over once its TTL has passed.
func testLeaseSilentHolderExpires(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	other := foreignClaim(t, s, 1, 200*time.Millisecond)
	renewal(t, s, 1, 5, false)
	b, logs := newCheckpoints(s)
	start := time.Now()
	lb := acquire(t, b, snapshots.LeaseRequest{Holder: "b"})
	if waited := time.Since(start); waited < 200*time.Millisecond {
		t.Errorf("took a silent holder's lease after %v, before its TTL of 200ms", waited)
	}
	if lb.GetGeneration() != 2 || lb.GetFirstEpoch() != other.GetFirstEpoch()+snapshots.EpochsPerLease {
		t.Errorf("lease = %v; want generation 2 above %v", lb, other)
	}
	if !strings.Contains(logs.String(), "has not renewed") {
		t.Errorf("the takeover of a silent holder was not logged:\n%s", logs)
	}
	// A released lease is taken at once, whatever its TTL.
	if err := b.ReleaseLease(t.Context()); err != nil {
		t.Fatal(err)
	}
	c, _ := newCheckpoints(s)
	if lc := acquire(t, c, snapshots.LeaseRequest{Holder: "c"}); lc.GetGeneration() != 3 {
		t.Errorf("lease after a release = %v, want generation 3", lc)
	}
}

// testLeaseConcurrentClaimants: claimants racing for a free lease: exactly
// one holds it, the others are refused naming a holder.
func testLeaseConcurrentClaimants(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	if _, ok := s.(snapshots.Creator); !ok {
		t.Skipf("%s cannot create objects conditionally: concurrent claimants may both win", s)
	}
	const n = 6
	var wg sync.WaitGroup
	var mu sync.Mutex
	var won []*messages.Lease
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			c, _ := newCheckpoints(s)
			<-start
			l, err := c.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: fmt.Sprintf("c%d", i)})
			switch {
			case err == nil:
				mu.Lock()
				won = append(won, l)
				mu.Unlock()
			case !errors.Is(err, snapshots.ErrLeaseHeld):
				t.Errorf("claimant %d: %v, want nil or ErrLeaseHeld", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d claimants hold the lease, want exactly 1: %v", len(won), won)
	}
	c, _ := newCheckpoints(s)
	if got, err := c.ReadLease(t.Context()); err != nil || !proto.Equal(got, won[0]) {
		t.Errorf("ReadLease = %v, %v; want the winner %v", got, err, won[0])
	}
}

func testLeaseCorrupt(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	key := snapshots.LeaseClaimKey(job, 1)
	mustPut(t, s, key, []byte("not a lease"))
	c, _ := newCheckpoints(s)
	if _, err := c.ReadLease(t.Context()); !errors.Is(err, snapshots.ErrCorrupt) || !strings.Contains(err.Error(), key) {
		t.Errorf("ReadLease of a corrupt claim: %v; want ErrCorrupt naming %s", err, key)
	}
	if _, err := c.AcquireLease(t.Context(), snapshots.LeaseRequest{Holder: "b"}); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("AcquireLease over a corrupt claim: %v; want ErrCorrupt", err)
	}
	mustPut(t, s, snapshots.LeaseSealKey(job, 1), []byte("not a seal"))
	if _, err := c.LoadLatest(t.Context()); !errors.Is(err, snapshots.ErrCorrupt) {
		t.Errorf("LoadLatest with a corrupt seal: %v; want ErrCorrupt (the void checkpoints are unknown)", err)
	}
}

// testLeaseIgnoredByCheckpoints: the lease's objects are not checkpoints:
// listing, retention, cleanup and DeleteAll leave them.
func testLeaseIgnoredByCheckpoints(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	c, _ := newCheckpoints(s)
	l := hold(t, c, "a", false)
	if id, err := c.MaxID(ctx); id != 0 || err != nil {
		t.Errorf("MaxID with only a lease = %d, %v; want 0", id, err)
	}
	if infos, err := c.List(ctx); len(infos) != 0 || err != nil {
		t.Errorf("List with only a lease = %+v, %v; want none", infos, err)
	}
	if r := loadLatest(t, c); r != nil {
		t.Errorf("LoadLatest with only a lease = checkpoint %d", r.Manifest.GetCheckpointId())
	}
	for id := uint64(1); id <= 3; id++ {
		if _, err := holderCheckpoint(t, c, id, l.GetFirstEpoch()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Retain(ctx, 1, 4); err != nil {
		t.Fatal(err)
	}
	if n, err := c.DeleteAll(ctx); n == 0 || err != nil {
		t.Errorf("DeleteAll = %d, %v; want some checkpoints deleted", n, err)
	}
	keys := mustList(t, s, "")
	want := []string{snapshots.LeaseClaimKey(job, 1), snapshots.LeaseRenewalKey(job, 1), snapshots.LeaseSealKey(job, 1)}
	if !slices.Equal(keys, want) {
		t.Errorf("keys after DeleteAll = %q, want the lease's %q", keys, want)
	}
	if err := c.CheckLease(ctx); err != nil {
		t.Errorf("CheckLease after DeleteAll: %v", err)
	}
}

// testLeaseSameIDBothHolders: holder A has checkpoint 2 in flight when B
// takes over and numbers its first checkpoint 2 too. Their states never
// share a key, only one manifest of id 2 can be written, and B's
// checkpoints all verify.
func testLeaseSameIDBothHolders(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	a, _ := newCheckpoints(s)
	la := hold(t, a, "a", false)
	if _, err := holderCheckpoint(t, a, 1, la.GetFirstEpoch()); err != nil {
		t.Fatal(err)
	}
	b, _ := newCheckpoints(s)
	lb := hold(t, b, "b", true)
	// Both store the states of checkpoint 2; B's manifest comes first.
	bm, err := holderCheckpoint(t, b, 2, lb.GetFirstEpoch())
	if err != nil {
		t.Fatalf("B's checkpoint 2: %v", err)
	}
	_, err = holderCheckpoint(t, a, 2, la.GetFirstEpoch())
	if !errors.Is(err, snapshots.ErrCheckpointTaken) && !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("A's manifest of checkpoint 2 over B's: %v; want ErrCheckpointTaken or ErrLeaseLost", err)
	}
	// A's abort clean-up of checkpoint 2 is refused; B's objects stay.
	if _, err := a.DeleteIncomplete(ctx, 3); !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Errorf("A's DeleteIncomplete after the takeover: %v, want ErrLeaseLost", err)
	}
	if err := b.Verify(ctx, 2); err != nil {
		t.Errorf("B's checkpoint 2 does not verify: %v", err)
	}
	if r := loadLatest(t, b); r == nil || !proto.Equal(r.Manifest, bm) {
		t.Errorf("LoadLatest = %v, want B's checkpoint 2", r)
	}
	// Now the other order: A's late manifest of 3 lands first; it is void,
	// and B's checkpoint 3 is refused as taken, so B goes on with 4.
	if _, err := holderCheckpoint(t, a, 3, la.GetFirstEpoch()); !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("A's late checkpoint 3: %v, want ErrLeaseLost (in place, but lost)", err)
	}
	if _, err := holderCheckpoint(t, b, 3, lb.GetFirstEpoch()); !errors.Is(err, snapshots.ErrCheckpointTaken) {
		t.Fatalf("B's checkpoint 3 over A's void manifest: %v, want ErrCheckpointTaken", err)
	}
	if r := loadLatest(t, b); r == nil || r.Manifest.GetCheckpointId() != 2 {
		t.Errorf("LoadLatest = %v, want checkpoint 2 (3 is void)", r)
	}
	if _, err := holderCheckpoint(t, b, 4, lb.GetFirstEpoch()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []uint64{2, 4} {
		if err := b.Verify(ctx, id); err != nil {
			t.Errorf("B's checkpoint %d does not verify: %v", id, err)
		}
	}
	if err := b.Retain(ctx, 2, 5); err != nil {
		t.Fatal(err)
	}
	infos, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []uint64
	for _, in := range infos {
		ids = append(ids, in.ID)
	}
	if !slices.Equal(ids, []uint64{2, 4}) {
		t.Errorf("checkpoints after B's retention = %v, want [2 4] (1 older, 3 void)", ids)
	}
}

// testLeaseLateManifestVoid: a manifest that an old holder writes after
// the new one sealed is void for every reader, while one written before
// the new holder looked stays valid.
func testLeaseLateManifestVoid(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	a, _ := newCheckpoints(s)
	la := hold(t, a, "a", false)
	if _, err := holderCheckpoint(t, a, 1, la.GetFirstEpoch()); err != nil {
		t.Fatal(err)
	}
	b, _ := newCheckpoints(s)
	acquire(t, b, snapshots.LeaseRequest{Holder: "b", TakeOver: true})
	// A writes 2 after B's claim but before B looks: B finds it.
	if _, err := holderCheckpoint(t, a, 2, la.GetFirstEpoch()); !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("A's checkpoint 2: %v, want ErrLeaseLost", err)
	}
	id, err := b.LatestCompleteID(t.Context())
	if err != nil || id != 2 {
		t.Fatalf("LatestCompleteID = %d, %v; want 2", id, err)
	}
	if err := b.SealLease(t.Context(), id, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := holderCheckpoint(t, a, 5, la.GetFirstEpoch()); !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Fatalf("A's checkpoint 5: %v, want ErrLeaseLost", err)
	}
	reader, _ := newCheckpoints(s) // another process, holding nothing
	if r := loadLatest(t, reader); r == nil || r.Manifest.GetCheckpointId() != 2 {
		t.Errorf("LoadLatest = %v, want checkpoint 2 (5 is void)", r)
	}
	if _, err := reader.LoadCheckpoint(t.Context(), 5); !errors.Is(err, snapshots.ErrVoid) {
		t.Errorf("LoadCheckpoint(5): %v, want ErrVoid", err)
	}
	infos, err := reader.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(infos, func(in snapshots.Info) bool { return in.ID == 5 }); i < 0 || !errors.Is(infos[i].Err, snapshots.ErrVoid) {
		t.Errorf("List = %+v; want checkpoint 5 listed as void", infos)
	}
}

// testLeaseLateOriginIgnored: an origin that an old holder records after
// the new one sealed does not count; the new holder's does.
func testLeaseLateOriginIgnored(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	a, _ := newCheckpoints(s)
	la := hold(t, a, "a", false)
	before := &messages.Origin{Savepoint: "before", CheckpointId: 1, FirstId: 2, Epoch: la.GetFirstEpoch()}
	if err := a.PutOrigin(ctx, before); err != nil {
		t.Fatal(err)
	}
	b, _ := newCheckpoints(s)
	lb := hold(t, b, "b", true)
	// A, paused between its check and its write, records a late origin.
	late := &messages.Origin{Savepoint: "late", CheckpointId: 9, FirstId: 10, Epoch: la.GetFirstEpoch()}
	mustPut(t, s, snapshots.OriginKey(job), encode(t, snapshots.KindOrigin, late))
	reader, logs := newCheckpoints(s)
	if o, err := reader.EffectiveOrigin(ctx); err != nil || !proto.Equal(o, before) {
		t.Errorf("EffectiveOrigin = %v, %v; want %v (the late one does not count)", o, err, before)
	}
	if !strings.Contains(logs.String(), "does not count") {
		t.Errorf("ignoring the late origin was not logged:\n%s", logs)
	}
	own := &messages.Origin{Savepoint: "own", CheckpointId: 3, FirstId: 4}
	if err := b.PutOrigin(ctx, own); err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(own)
	want.Epoch = lb.GetFirstEpoch()
	if o, err := reader.EffectiveOrigin(ctx); err != nil || !proto.Equal(o, want) {
		t.Errorf("EffectiveOrigin = %v, %v; want B's %v", o, err, want)
	}
}

// testLeaseDeletesOnlyOlderEpochs: a holder's clean-up never deletes an
// object of a later holder's epochs, even where its lease check passed.
func testLeaseDeletesOnlyOlderEpochs(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	ctx := t.Context()
	a, _ := newCheckpoints(s)
	la := hold(t, a, "a", false)
	_, last := snapshots.HolderEpochs(la)
	own := snapshots.EpochStateKey(job, 1, la.GetFirstEpoch(), "src#0")
	older := snapshots.StateKey(job, 1, "sum#0")
	newer := snapshots.EpochStateKey(job, 1, last+1, "sum#1")
	for _, k := range []string{own, older, newer} {
		mustPut(t, s, k, []byte("x"))
	}
	if n, err := a.DeleteIncomplete(ctx, 2); n != 1 || err != nil {
		t.Errorf("DeleteIncomplete = %d, %v; want 1", n, err)
	}
	wantKeys(t, s, snapshots.CheckpointsPrefix(job), newer)
}
