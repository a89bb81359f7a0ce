package snapshots

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

// Kinds of the lease's objects (see LeasesPrefix).
const (
	KindLease        = "snapflow.v1.Lease"
	KindLeaseSeal    = "snapflow.v1.LeaseSeal"
	KindLeaseRenewal = "snapflow.v1.LeaseRenewal"
)

// EpochsPerLease is the number of epochs a lease holder may use: its
// epochs are FirstEpoch to FirstEpoch+EpochsPerLease-1. A new
// generation's first epoch is EpochsPerLease above the previous one's, so
// the epochs of different holders never overlap and a later holder's are
// higher. A holder that would need more must stop (see HolderEpochs).
const EpochsPerLease uint64 = 1 << 20

// Defaults of LeaseRequest.
const (
	DefaultLeaseRenewInterval = time.Second
	DefaultLeaseTTL           = 10 * time.Second
)

var (
	// ErrLeaseLost is wrapped by the errors of a holder's operations once
	// another holder has claimed the job's lease: the caller must stop
	// writing.
	ErrLeaseLost = errors.New("snapshots: lease lost")
	// ErrLeaseHeld is wrapped by the error of AcquireLease when another
	// holder, alive, holds the job's lease (see LeaseHeldError).
	ErrLeaseHeld = errors.New("snapshots: job held by another holder")
	// ErrInvalidLease is wrapped by the errors about a lease request that
	// cannot be granted: epochs exhausted, or a Checkpoints value that
	// already holds one.
	ErrInvalidLease = errors.New("snapshots: invalid lease")
)

// LeaseRequest says how AcquireLease claims the job's lease.
type LeaseRequest struct {
	// Holder names the claimant for people (e.g. "paritysum" or a
	// coordinator's id); the lease adds the host, the process and a
	// random suffix, so that it names one incarnation.
	Holder string
	// Address is the claimant's address in cluster mode, for people.
	Address string
	// TakeOver takes the lease even from a holder that is alive, which
	// then stops at its next write (it is fenced): for a deliberate
	// replacement. Without it, AcquireLease refuses a live holder.
	TakeOver bool
	// RenewInterval is how often the holder will renew the lease (default
	// DefaultLeaseRenewInterval); TTL how long a later claimant waits for
	// a renewal before it takes the lease over (default DefaultLeaseTTL).
	RenewInterval, TTL time.Duration
}

// LeaseHeldError is the error of AcquireLease when the job's lease is
// held by another holder that is alive.
type LeaseHeldError struct {
	Job, Store string
	Holder     *messages.Lease
	// Why says how the holder was found alive.
	Why string
}

// Error implements error.
func (e *LeaseHeldError) Error() string {
	h := e.Holder
	taken := time.Unix(0, h.GetTakenUnixNano()).UTC().Format(time.RFC3339)
	where := fmt.Sprintf("host %s, pid %d", h.GetHost(), h.GetPid())
	if h.GetAddress() != "" {
		where += ", address " + h.GetAddress()
	}
	return fmt.Sprintf("snapshots: job %q in store %s is held by %s (%s, holding the job since %s, lease generation %d): %s; "+
		"one job name on one store has one running holder: stop the other first, or take over on purpose (it is then fenced and stops at its next write)",
		e.Job, e.Store, h.GetHolder(), where, taken, h.GetGeneration(), e.Why)
}

// Unwrap returns ErrLeaseHeld.
func (e *LeaseHeldError) Unwrap() error { return ErrLeaseHeld }

// heldHere are the holders of this process that hold a lease now.
var heldHere sync.Map // holder -> struct{}

// lease is what a Checkpoints value that holds the job's lease knows.
type lease struct {
	claim    *messages.Lease
	interval time.Duration
	seq      uint64 // renewals written
	sealed   bool
	lost     error // set once another holder claimed
}

// AcquireLease claims the job's lease for c: from then on c is the job's
// holder, and its writes are fenced (see the package documentation). It
// creates the next generation of the lease, only where no claim of that
// generation is (Creator), after making sure that the holder of the
// current one has let go:
//
//   - it released the lease (ReleaseLease), or it never had one;
//   - it runs on this host and its process is gone;
//   - it has not renewed the lease for its TTL, which AcquireLease waits
//     for, watching the renewals (a live holder renews every interval).
//
// Otherwise, when the holder is alive, it returns a *LeaseHeldError that
// names it, unless req.TakeOver. A claimant that loses the race for the
// generation to another gets a *LeaseHeldError naming the winner.
//
// The new holder must then read the store and SealLease before it changes
// anything, and renew the lease (RenewLease) every req.RenewInterval.
func (c *Checkpoints) AcquireLease(ctx context.Context, req LeaseRequest) (*messages.Lease, error) {
	c.mu.Lock()
	held := c.hold != nil
	c.mu.Unlock()
	if held {
		return nil, fmt.Errorf("snapshots: job %q: acquire lease: this Checkpoints already holds one: %w", c.job, ErrInvalidLease)
	}
	if req.RenewInterval <= 0 {
		req.RenewInterval = DefaultLeaseRenewInterval
	}
	if req.TTL <= 0 {
		req.TTL = DefaultLeaseTTL
	}
	prev, err := c.ReadLease(ctx)
	if err != nil {
		return nil, fmt.Errorf("snapshots: job %q: acquire lease: %w", c.job, err)
	}
	first, gen := uint64(1), uint64(1)
	takenFrom := ""
	if prev != nil {
		free, why, err := c.letGo(ctx, prev, req)
		if err != nil {
			return nil, fmt.Errorf("snapshots: job %q: acquire lease: %w", c.job, err)
		}
		if !free && !req.TakeOver {
			return nil, &LeaseHeldError{Job: c.job, Store: c.store.String(), Holder: prev, Why: why}
		}
		if prev.GetFirstEpoch() > math.MaxUint64-2*EpochsPerLease {
			return nil, fmt.Errorf("snapshots: job %q: acquire lease: generation %d has first epoch %d, so no epochs are left: %w",
				c.job, prev.GetGeneration(), prev.GetFirstEpoch(), ErrInvalidLease)
		}
		first, gen = prev.GetFirstEpoch()+EpochsPerLease, prev.GetGeneration()+1
		if !free {
			takenFrom = prev.GetHolder()
			c.log.WarnContext(ctx, "snapshots: taking the job over from a live holder, which is fenced", "holder", prev.GetHolder(),
				"host", prev.GetHost(), "pid", prev.GetPid(), "generation", prev.GetGeneration(), "why", why)
		} else {
			c.log.InfoContext(ctx, "snapshots: the previous holder let the job go", "holder", prev.GetHolder(), "generation", prev.GetGeneration(), "why", why)
		}
	} else if legacy, err := c.readLegacyLease(ctx); err != nil {
		return nil, fmt.Errorf("snapshots: job %q: acquire lease: %w", c.job, err)
	} else if legacy != nil {
		first = legacy.GetFirstEpoch() + EpochsPerLease
	}
	claim := c.newClaim(req, gen, first, takenFrom)
	// Known as this process's before the claim lands: a claimant of this
	// process that reads it must find it alive.
	heldHere.Store(claim.GetHolder(), struct{}{})
	if err := c.createClaim(ctx, claim); err != nil {
		heldHere.Delete(claim.GetHolder())
		return nil, err
	}
	c.mu.Lock()
	c.hold = &lease{claim: claim, interval: req.RenewInterval}
	c.mu.Unlock()
	if err := c.RenewLease(ctx); err != nil {
		c.forgetLease()
		return nil, err
	}
	c.log.InfoContext(ctx, "snapshots: lease acquired", "holder", claim.GetHolder(), "generation", gen, "first_epoch", first)
	return proto.CloneOf(claim), nil
}

// newClaim returns the claim of generation gen for req.
func (c *Checkpoints) newClaim(req LeaseRequest, gen, first uint64, takenFrom string) *messages.Lease {
	host, _ := os.Hostname()
	pid := os.Getpid()
	start, _ := processStart(pid)
	var nonce [4]byte
	_, _ = rand.Read(nonce[:])
	name := req.Holder
	if name == "" {
		name = c.job
	}
	return &messages.Lease{
		Holder: fmt.Sprintf("%s@%s:%d-%s", name, host, pid, hex.EncodeToString(nonce[:])), FirstEpoch: first,
		TakenUnixNano: time.Now().UnixNano(), Generation: gen, Host: host, Pid: int64(pid), ProcessStart: start, Machine: machineID(),
		Address: req.Address, RenewIntervalNanos: req.RenewInterval.Nanoseconds(), TtlNanos: req.TTL.Nanoseconds(), TakenFrom: takenFrom,
	}
}

// createClaim creates claim's generation, or says who won it.
func (c *Checkpoints) createClaim(ctx context.Context, claim *messages.Lease) error {
	key := LeaseClaimKey(c.job, claim.GetGeneration())
	data, err := EncodeObject(KindLease, claim)
	if err != nil {
		return fmt.Errorf("snapshots: job %q: claim %s: %w", c.job, key, err)
	}
	err = createObject(ctx, c.store, key, data)
	if errors.Is(err, ErrExists) {
		// Another claimant won this generation, unless a retried write
		// found its own object.
		got, rerr := c.readClaim(ctx, key)
		switch {
		case rerr != nil:
			return fmt.Errorf("snapshots: job %q: claim %s: another claim is there: %w", c.job, key, rerr)
		case proto.Equal(got, claim):
			return nil
		}
		return &LeaseHeldError{Job: c.job, Store: c.store.String(), Holder: got, Why: "it claimed the lease at the same moment"}
	}
	if err != nil {
		return fmt.Errorf("snapshots: job %q: claim %s: %w", c.job, key, err)
	}
	return nil
}

// letGo reports whether the holder of prev has let the job go, and how
// that was found. It waits for prev's TTL when only the renewals can tell.
func (c *Checkpoints) letGo(ctx context.Context, prev *messages.Lease, req LeaseRequest) (bool, string, error) {
	key := LeaseRenewalKey(c.job, prev.GetGeneration())
	r, err := c.readRenewal(ctx, key)
	switch {
	case err != nil:
		return false, "", err
	case r.GetReleased():
		return true, "it released the lease", nil
	}
	if _, here := heldHere.Load(prev.GetHolder()); here {
		return false, "it runs in this process", nil
	}
	if m := machineID(); m != "" && prev.GetMachine() == m {
		pid, self := int(prev.GetPid()), os.Getpid()
		ownStart, _ := processStart(self)
		switch {
		case pid == self && prev.GetProcessStart() == ownStart:
			return true, "this process held it and has let it go", nil
		case pid != self && !processAlive(pid, prev.GetProcessStart()):
			return true, fmt.Sprintf("its process %d on this host is gone", pid), nil
		}
	}
	if req.TakeOver {
		return false, "taking over on request", nil
	}
	ttl := time.Duration(prev.GetTtlNanos())
	if ttl <= 0 {
		ttl = req.TTL
	}
	poll := min(max(time.Duration(prev.GetRenewIntervalNanos())/2, 50*time.Millisecond), time.Second)
	c.log.InfoContext(ctx, "snapshots: the job's lease is held; waiting for its holder's renewals", "holder", prev.GetHolder(),
		"host", prev.GetHost(), "pid", prev.GetPid(), "ttl", ttl)
	deadline := time.Now().Add(ttl)
	for time.Now().Before(deadline) {
		if err := wait(ctx, poll); err != nil {
			return false, "", fmt.Errorf("waiting for the holder %s to renew its lease: %w", prev.GetHolder(), context.Cause(ctx))
		}
		now, err := c.readRenewal(ctx, key)
		switch {
		case err != nil:
			return false, "", err
		case now.GetReleased():
			return true, "it released the lease", nil
		case now.GetSeq() != r.GetSeq():
			return false, fmt.Sprintf("it renewed its lease (renewal %d)", now.GetSeq()), nil
		}
		if newer, err := c.ReadLease(ctx); err != nil {
			return false, "", err
		} else if newer.GetGeneration() != prev.GetGeneration() {
			return false, "another claimant took the lease meanwhile: " + newer.GetHolder(), nil
		}
	}
	return true, fmt.Sprintf("it has not renewed its lease for %v", ttl), nil
}

// ReadLease returns the newest claim on the job's lease, or (nil, nil)
// when the job has none. A claim that does not decode gives an error
// wrapping ErrCorrupt that names its key: the holders' epochs are then
// unknown, and only a person who knows that no holder runs may delete it.
func (c *Checkpoints) ReadLease(ctx context.Context) (*messages.Lease, error) {
	gen, err := c.newestGeneration(ctx)
	if err != nil || gen == 0 {
		return nil, err
	}
	return c.readClaim(ctx, LeaseClaimKey(c.job, gen))
}

// newestGeneration lists the lease's objects and returns the highest
// generation claimed (0: none).
func (c *Checkpoints) newestGeneration(ctx context.Context) (uint64, error) {
	keys, err := c.store.List(ctx, LeasesPrefix(c.job))
	if err != nil {
		return 0, err
	}
	var gen uint64
	for _, k := range keys {
		if g, kind, ok := parseLeaseKey(c.job, k); ok && kind == leaseClaim {
			gen = max(gen, g)
		}
	}
	return gen, nil
}

func (c *Checkpoints) readClaim(ctx context.Context, key string) (*messages.Lease, error) {
	l := new(messages.Lease)
	if err := c.readObject(ctx, key, KindLease, l); err != nil {
		return nil, err
	}
	if l.GetHolder() == "" || l.GetFirstEpoch() == 0 || l.GetGeneration() == 0 {
		return nil, fmt.Errorf("snapshots: lease claim %s: no holder, first epoch or generation: %w", key, ErrCorrupt)
	}
	return l, nil
}

// readRenewal reads a renewal; a missing one is an empty renewal (seq 0).
func (c *Checkpoints) readRenewal(ctx context.Context, key string) (*messages.LeaseRenewal, error) {
	r := new(messages.LeaseRenewal)
	err := c.readObject(ctx, key, KindLeaseRenewal, r)
	if errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		return r, nil
	}
	return r, err
}

// readObject reads and decodes the object of kind under key.
func (c *Checkpoints) readObject(ctx context.Context, key, kind string, into proto.Message) error {
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return err
	}
	if err := DecodeObject(data, kind, into); err != nil {
		return fmt.Errorf("snapshots: %s: %w", key, err)
	}
	return nil
}

// readLegacyLease reads the lease of a coordinator of an earlier version
// (<job>/lease), whose epochs the first generation must exceed.
func (c *Checkpoints) readLegacyLease(ctx context.Context) (*messages.Lease, error) {
	l := new(messages.Lease)
	err := c.readObject(ctx, c.job+legacyLeaseName, KindLease, l)
	if errors.Is(err, ErrNotFound) && ctx.Err() == nil {
		return nil, nil
	}
	return l, err
}

// Lease returns the lease c holds, or nil.
func (c *Checkpoints) Lease() *messages.Lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold == nil {
		return nil
	}
	return proto.CloneOf(c.hold.claim)
}

// HolderEpochs returns the epochs that the holder of lease l may use:
// FirstEpoch to last.
func HolderEpochs(l *messages.Lease) (first, last uint64) {
	return l.GetFirstEpoch(), l.GetFirstEpoch() + EpochsPerLease - 1
}

// CheckLease returns nil while c holds the job's lease: no later
// generation is claimed. Otherwise it returns an error wrapping
// ErrLeaseLost that names the holder that took it, and c stops writing.
// A store failure is returned as it is: the lease may or may not be held.
// It returns nil when c holds no lease (no fencing).
func (c *Checkpoints) CheckLease(ctx context.Context) error {
	c.mu.Lock()
	l := c.hold
	var lost error
	if l != nil {
		lost = l.lost
	}
	c.mu.Unlock()
	switch {
	case l == nil:
		return nil
	case lost != nil:
		return lost
	}
	next := LeaseClaimKey(c.job, l.claim.GetGeneration()+1)
	newer, err := c.readClaim(ctx, next)
	switch {
	case errors.Is(err, ErrNotFound) && ctx.Err() == nil:
		return nil
	case errors.Is(err, ErrCorrupt):
		newer = &messages.Lease{Holder: "(a claim that does not decode: " + err.Error() + ")"}
	case err != nil:
		return fmt.Errorf("snapshots: job %q: check the lease: %w", c.job, err)
	}
	lost = fmt.Errorf("snapshots: job %q: %s no longer holds the job: %w: %s claimed lease generation %d at %s (host %s, pid %d)",
		c.job, l.claim.GetHolder(), ErrLeaseLost, newer.GetHolder(), l.claim.GetGeneration()+1,
		time.Unix(0, newer.GetTakenUnixNano()).UTC().Format(time.RFC3339Nano), newer.GetHost(), newer.GetPid())
	c.mu.Lock()
	l.lost = lost
	c.mu.Unlock()
	heldHere.Delete(l.claim.GetHolder())
	c.log.ErrorContext(ctx, "snapshots: lease lost: another holder took the job over; this one stops writing", "err", lost)
	return lost
}

// RenewLease shows that c's holder is alive: it checks the lease
// (CheckLease) and writes the next renewal. A holder calls it every
// renew interval; on ErrLeaseLost it stops.
func (c *Checkpoints) RenewLease(ctx context.Context) error {
	return c.writeRenewal(ctx, false)
}

// ReleaseLease lets the job go: the next claimant need not wait. c holds
// no lease afterwards. Releasing a lease already lost is no error.
func (c *Checkpoints) ReleaseLease(ctx context.Context) error {
	defer c.forgetLease()
	err := c.writeRenewal(ctx, true)
	if errors.Is(err, ErrLeaseLost) {
		return nil
	}
	return err
}

func (c *Checkpoints) writeRenewal(ctx context.Context, released bool) error {
	c.mu.Lock()
	l := c.hold
	c.mu.Unlock()
	if l == nil {
		return nil
	}
	if err := c.CheckLease(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	l.seq++
	r := &messages.LeaseRenewal{Generation: l.claim.GetGeneration(), Seq: l.seq, Released: released,
		UnixNano: time.Now().UnixNano(), Holder: l.claim.GetHolder()}
	c.mu.Unlock()
	data, err := EncodeObject(KindLeaseRenewal, r)
	if err != nil {
		return err
	}
	if err := c.store.Put(ctx, LeaseRenewalKey(c.job, r.GetGeneration()), data); err != nil {
		return fmt.Errorf("snapshots: job %q: renew the lease: %w", c.job, err)
	}
	return nil
}

// forgetLease drops c's lease.
func (c *Checkpoints) forgetLease() {
	c.mu.Lock()
	l := c.hold
	c.hold = nil
	c.mu.Unlock()
	if l != nil {
		heldHere.Delete(l.claim.GetHolder())
	}
}

// SealLease completes c's claim once the holder has read the store, before
// it changes anything: validThrough is the highest id of a complete
// checkpoint it found, and origin the job's origin it found (nil: none).
// From then on a manifest of an earlier holder with a higher id is void,
// and so is an origin that an earlier holder records: they landed after
// this holder looked, and it neither restored nor will keep them.
func (c *Checkpoints) SealLease(ctx context.Context, validThrough uint64, origin *messages.Origin) error {
	c.mu.Lock()
	l := c.hold
	c.mu.Unlock()
	if l == nil {
		return fmt.Errorf("snapshots: job %q: seal the lease: no lease held: %w", c.job, ErrInvalidLease)
	}
	s := &messages.LeaseSeal{Generation: l.claim.GetGeneration(), FirstEpoch: l.claim.GetFirstEpoch(), ValidThrough: validThrough,
		Origin: proto.CloneOf(origin), SealedUnixNano: time.Now().UnixNano(), Holder: l.claim.GetHolder()}
	data, err := EncodeObject(KindLeaseSeal, s)
	if err != nil {
		return err
	}
	key := LeaseSealKey(c.job, s.GetGeneration())
	if err := createObject(ctx, c.store, key, data); err != nil && !errors.Is(err, ErrExists) {
		return fmt.Errorf("snapshots: job %q: seal the lease: %w", c.job, err)
	}
	// A seal is written once; a retried write finds its own.
	got := new(messages.LeaseSeal)
	if err := c.readObject(ctx, key, KindLeaseSeal, got); err != nil {
		return fmt.Errorf("snapshots: job %q: seal the lease: read it back: %w", c.job, err)
	}
	if got.GetHolder() != s.GetHolder() {
		return fmt.Errorf("snapshots: job %q: seal %s holds %q, not this holder's: %w", c.job, key, got.GetHolder(), ErrCorrupt)
	}
	if err := c.CheckLease(ctx); err != nil {
		return err
	}
	c.mu.Lock()
	l.sealed = true
	c.mu.Unlock()
	c.cacheSeal(got)
	return nil
}

// holdsLease returns c's lease while c holds it unsealed or sealed, or
// nil.
func (c *Checkpoints) heldLease() *lease {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hold
}

// describeHolder names the holder of l for people.
func describeHolder(l *messages.Lease) string {
	var b strings.Builder
	b.WriteString(l.GetHolder())
	fmt.Fprintf(&b, " (host %s, pid %d", l.GetHost(), l.GetPid())
	if l.GetAddress() != "" {
		fmt.Fprintf(&b, ", address %s", l.GetAddress())
	}
	b.WriteString(")")
	return b.String()
}
