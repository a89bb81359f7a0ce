package snapshots

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// KindLease is the kind of the lease object (see LeaseKey).
const KindLease = "snapflow.v1.Lease"

// leaseName is the name of the lease object in the job's prefix. It is not
// below CheckpointsPrefix, so the checkpoint scans never see it.
const leaseName = "/lease"

// LeaseKey returns the key of the lease of job, "<job>/lease". It lies
// outside "<job>/checkpoints/", so List, MaxID, LatestCompleteID,
// LoadLatest, Retain, DeleteIncomplete and DeleteAll ignore it.
func LeaseKey(job string) string { return job + leaseName }

// EpochsPerLease is the number of epochs a lease holder may use: its
// epochs are FirstEpoch to FirstEpoch+EpochsPerLease-1. A new holder's
// first epoch is at least EpochsPerLease above the previous holder's, so
// the epochs of different holders never overlap and a later holder's are
// higher. A holder that would need more must claim the lease again.
const EpochsPerLease uint64 = 1 << 20

var (
	// ErrLeaseLost is wrapped by the error of CheckLease when the caller
	// does not hold the job's lease (another holder claimed it, or it is
	// gone), and by ClaimLease when another claim overwrote the caller's
	// at once.
	ErrLeaseLost = errors.New("snapshots: lease lost")
	// ErrInvalidLease is wrapped by the errors of ClaimLease and
	// CheckLease for an empty holder, and of ClaimLease when the epochs
	// are exhausted.
	ErrInvalidLease = errors.New("snapshots: invalid lease")
)

// ClaimLease makes holder the owner of the job's lease and returns the new
// lease: Holder is holder, TakenUnixNano the current time and FirstEpoch
// max(minEpoch, previous FirstEpoch+EpochsPerLease), or max(minEpoch, 1)
// when the job has no lease yet. So holder's epochs are above every epoch
// an earlier holder could use; pass as minEpoch anything else the epochs
// must exceed, such as the epoch of the newest checkpoint plus one.
//
// holder must name one incarnation of one coordinator (for instance its
// address, process id and start time): two claims under the same name
// cannot be told apart. An empty holder is refused with an error wrapping
// ErrInvalidLease. A corrupt lease object is refused with an error wrapping
// ErrCorrupt that names its key: the previous holder's epochs are then
// unknown, and only an operator who knows that no other coordinator of the
// job runs may delete it.
//
// A coordinator claims the lease when it starts, before it reads MaxID,
// loads the latest checkpoint or applies retention; see CheckLease for
// what that order guarantees.
//
// The store has no conditional write, so ClaimLease reads the lease, writes
// the new one and reads it back. When the read-back shows another holder,
// whose claim landed in between, it returns an error wrapping
// ErrLeaseLost. Claims that interleave more closely can both succeed with
// the same FirstEpoch; the last one written holds the lease, and the other
// holder's next CheckLease fails. The lease orders coordinators that start
// one after another (the new one supersedes the paused or cut off one); it
// is no substitute for running one coordinator per job.
func (c *Checkpoints) ClaimLease(ctx context.Context, holder string, minEpoch uint64) (*messages.Lease, error) {
	key := LeaseKey(c.job)
	if holder == "" {
		return nil, fmt.Errorf("snapshots: job %q: claim lease: empty holder: %w", c.job, ErrInvalidLease)
	}
	prev, err := c.ReadLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshots: job %q: claim lease: %w", c.job, err)
	}
	first := max(minEpoch, 1)
	if prev != nil {
		if prev.GetFirstEpoch() > math.MaxUint64-EpochsPerLease {
			return nil, fmt.Errorf("snapshots: job %q: claim lease %s: the previous holder %q has first epoch %d, so no epochs are left: %w",
				c.job, key, prev.GetHolder(), prev.GetFirstEpoch(), ErrInvalidLease)
		}
		first = max(minEpoch, prev.GetFirstEpoch()+EpochsPerLease)
	}
	l := &messages.Lease{Holder: holder, FirstEpoch: first, TakenUnixNano: time.Now().UnixNano()}
	data, err := EncodeObject(KindLease, l)
	if err != nil {
		return nil, fmt.Errorf("snapshots: job %q: claim lease %s: %w", c.job, key, err)
	}
	if err := c.store.Put(ctx, key, data); err != nil {
		return nil, fmt.Errorf("snapshots: job %q: claim lease: %w", c.job, err)
	}
	got, err := c.ReadLease(ctx)
	switch {
	case err != nil:
		return nil, fmt.Errorf("snapshots: job %q: claim lease: read it back: %w", c.job, err)
	case !proto.Equal(got, l):
		return nil, fmt.Errorf("snapshots: job %q: claim lease %s for %q: %w", c.job, key, holder, lostTo(got))
	}
	c.log.InfoContext(ctx, "snapshots: lease claimed", "holder", holder, "first_epoch", first,
		"previous_holder", prev.GetHolder(), "previous_first_epoch", prev.GetFirstEpoch())
	return l, nil
}

// ReadLease returns the job's lease, or (nil, nil) when the job has none.
// A lease object that does not decode, or that names no holder or a first
// epoch of 0, gives an error wrapping ErrCorrupt that names its key.
func (c *Checkpoints) ReadLease(ctx context.Context) (*messages.Lease, error) {
	key := LeaseKey(c.job)
	data, err := c.store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l := new(messages.Lease)
	if err := DecodeObject(data, KindLease, l); err != nil {
		return nil, fmt.Errorf("snapshots: lease %s: %w", key, err)
	}
	switch {
	case l.GetHolder() == "":
		return nil, fmt.Errorf("snapshots: lease %s: no holder: %w", key, ErrCorrupt)
	case l.GetFirstEpoch() == 0:
		return nil, fmt.Errorf("snapshots: lease %s: first epoch 0; epochs start at 1: %w", key, ErrCorrupt)
	}
	return l, nil
}

// CheckLease returns nil when holder holds the job's lease. Otherwise it
// returns an error wrapping ErrLeaseLost that names the holder that took
// it and when, or says that the job has no lease; a store failure or a
// corrupt lease gives that error instead (see ReadLease). A coordinator
// calls it before every manifest it writes and writes the manifest only on
// nil; on ErrLeaseLost it stops without writing.
//
// The check and the write are not atomic. Say holder A's check returned
// nil before holder B's ClaimLease returned, and A then writes the manifest
// of checkpoint n, after B has started. When A checks after every state of
// n is stored (as PutManifest requires) and n has at least one state, and
// B claims the lease before it reads MaxID and numbers its checkpoints
// from MaxID()+1, then n is at most the MaxID that B read, below every
// checkpoint id of B, since the states were stored before A's check, and
// so before B's claim and B's listing; the stores (Dir, Mem, MinIO) list
// what a returned Put wrote. So a manifest written in the window completes
// a checkpoint of A's run that is consistent on its own, with an epoch
// below B's FirstEpoch and an id below all of B's. Recovery prefers any
// checkpoint that B completes; until B completes one, recovery may restore
// n, as if A had completed it just before B claimed the lease. If B's
// start-up cleanup (Retain, DeleteIncomplete) deleted the states of n,
// then still incomplete, before the manifest landed, n is complete but
// unusable, and recovery skips it with an error logged. Only manifests
// whose check came before B's claim get through: A's next check fails.
func (c *Checkpoints) CheckLease(ctx context.Context, holder string) error {
	if holder == "" {
		return fmt.Errorf("snapshots: job %q: check lease: empty holder: %w", c.job, ErrInvalidLease)
	}
	l, err := c.ReadLease(ctx)
	if err != nil {
		return fmt.Errorf("snapshots: job %q: check lease for %q: %w", c.job, holder, err)
	}
	if l.GetHolder() != holder {
		return fmt.Errorf("snapshots: job %q: %q does not hold the lease %s: %w", c.job, holder, LeaseKey(c.job), lostTo(l))
	}
	return nil
}

// lostTo describes the lease l that another holder holds (nil: none),
// wrapping ErrLeaseLost.
func lostTo(l *messages.Lease) error {
	if l == nil {
		return fmt.Errorf("%w: the job has no lease any more", ErrLeaseLost)
	}
	return fmt.Errorf("%w: %q took it at %s with first epoch %d", ErrLeaseLost, l.GetHolder(),
		time.Unix(0, l.GetTakenUnixNano()).UTC().Format(time.RFC3339Nano), l.GetFirstEpoch())
}
