package snapshotstest

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// pausingStore pauses the first listing of prefix after arm until resume
// is closed: a holder that stops between two steps, as a long GC pause or
// a SIGSTOP would stop it. It keeps the store's Create.
type pausingStore struct {
	snapshots.Store
	prefix  string
	armed   atomic.Bool
	reached chan struct{} // closed when the listing is paused
	resume  chan struct{}
}

func (p *pausingStore) arm() {
	p.reached, p.resume = make(chan struct{}), make(chan struct{})
	p.armed.Store(true)
}

func (p *pausingStore) List(ctx context.Context, prefix string) ([]string, error) {
	if prefix == p.prefix && p.armed.CompareAndSwap(true, false) {
		close(p.reached)
		select {
		case <-p.resume:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return p.Store.List(ctx, prefix)
}

func (p *pausingStore) Create(ctx context.Context, key string, data []byte) error {
	return p.Store.(snapshots.Creator).Create(ctx, key, data)
}

// testLeaseRetentionPausedAcrossTakeover: holder A's retention passes its
// lease check and pauses before it lists the checkpoints; meanwhile B takes
// the job over and restores checkpoint 2, and A's manifest of checkpoint 3,
// in flight across the takeover, lands after B looked (void). Every
// checkpoint shares one key group's object with checkpoint 1, so that A,
// counting its void manifest as usable, would keep 1 as the fallback and
// delete 2. A's retention must delete nothing (its lease is lost), B's
// restore point survives, and B's next checkpoint is what B restores next.
func testLeaseRetentionPausedAcrossTakeover(t *testing.T, newStore newStoreFunc) {
	s := newStore(t)
	if _, ok := s.(snapshots.Creator); !ok {
		t.Skip("the store is no Creator")
	}
	ctx := t.Context()
	p := &pausingStore{Store: s, prefix: snapshots.CheckpointsPrefix(job)}
	a, _ := newCheckpoints(p)
	hold(t, a, "a", false)
	ch := newChain(t, a)
	ch.checkpoint(1, nil)
	ch.checkpoint(2, map[string][]uint32{"sum#0": {1}, "sum#1": {17}})

	p.arm()
	retained := make(chan error, 1)
	go func() { retained <- a.Retain(ctx, 1, 4) }()
	<-p.reached // A checked its lease and is about to list

	b, _ := newCheckpoints(s)
	lb := hold(t, b, "b", true)
	restored := loadLatest(t, b)
	if restored == nil || restored.Manifest.GetCheckpointId() != 2 {
		t.Fatalf("B restores %v, want checkpoint 2", restored)
	}
	// A's checkpoint 3, in flight across the takeover, lands now.
	late, _ := newCheckpoints(s)
	ch.c = late
	ch.checkpoint(3, map[string][]uint32{"sum#0": {2}, "sum#1": {18}})

	close(p.resume)
	err := <-retained
	if !errors.Is(err, snapshots.ErrLeaseLost) {
		t.Errorf("A's retention across the takeover: %v, want ErrLeaseLost", err)
	}
	if err := b.Verify(ctx, 2); err != nil {
		t.Fatalf("B's restore point, checkpoint 2, after A's retention: %v", err)
	}
	if r := loadLatest(t, b); r == nil || r.Manifest.GetCheckpointId() != 2 {
		t.Fatalf("B's failover restores %v, want checkpoint 2 (3 is void)", r)
	}
	// B goes on: its checkpoint 4 (3 is taken) is what it restores next.
	if _, err := holderCheckpoint(t, b, 4, lb.GetFirstEpoch()); err != nil {
		t.Fatal(err)
	}
	if err := b.Retain(ctx, 1, 5); err != nil {
		t.Fatalf("B's retention: %v", err)
	}
	if r := loadLatest(t, b); r == nil || r.Manifest.GetCheckpointId() != 4 {
		t.Fatalf("B's next failover restores %v, want its own checkpoint 4", r)
	}
	infos, err := b.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(infos, func(in snapshots.Info) bool { return in.ID == 4 && in.Err == nil }) {
		t.Errorf("checkpoints after B's retention: %+v, want 4 usable", infos)
	}
}
