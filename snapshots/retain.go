package snapshots

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/messages"
)

// DeleteAll deletes every checkpoint of the job, complete or not: first
// the manifests, oldest first, then the other objects, so that an
// interrupted call leaves the newest checkpoints complete with every
// object they reference (an incremental checkpoint references older
// checkpoints' objects), never an older one alone; and then the job's
// origin marker (see OriginKey): it starts the job over from nothing. The
// origin goes last, so that an interrupted call never leaves checkpoints
// of an older history without the origin that rules them out. It returns
// how many checkpoints it deleted.
//
// It leaves the job's lease (see LeasesPrefix), since starting a job over
// must not let a superseded holder take it back, and every savepoint: a
// savepoint is the user's, deleted only by name (DeleteSavepoint). When c
// holds the lease, it checks it first.
func (c *Checkpoints) DeleteAll(ctx context.Context) (deleted int, err error) {
	if err := c.writable(ctx); err != nil {
		return 0, err
	}
	chks, err := c.scan(ctx)
	if err != nil {
		return 0, err
	}
	for _, chk := range chks {
		if !chk.complete {
			continue
		}
		if err := c.store.Delete(ctx, ManifestKey(c.job, chk.id)); err != nil {
			return 0, err
		}
		c.forget(chk.id)
	}
	for _, chk := range chks {
		manifest := ManifestKey(c.job, chk.id)
		if err := deleteMany(ctx, c.store, slices.DeleteFunc(chk.keys, func(k string) bool { return k == manifest })); err != nil {
			return deleted, err
		}
		c.forget(chk.id)
		deleted++
	}
	if err := c.DeleteOrigin(ctx); err != nil {
		return deleted, err
	}
	return deleted, nil
}

// Delete deletes checkpoint id: the manifest first, so that the checkpoint
// stops being complete before any of its objects goes, then its other
// objects, except those that the manifests of other complete checkpoints
// reference (an incremental checkpoint references older objects): those
// stay, in a directory without a manifest, until Retain or
// DeleteIncomplete finds them referenced no more.
func (c *Checkpoints) Delete(ctx context.Context, id uint64) error {
	if err := c.writable(ctx); err != nil {
		return err
	}
	chks, referenced, err := c.scanReferences(ctx, id, func([]checkpoint) bool { return true })
	if err != nil {
		return err
	}
	i := slices.IndexFunc(chks, func(chk checkpoint) bool { return chk.id == id })
	if i < 0 {
		return c.deleteKeys(ctx, id, nil, nil) // a manifest may have landed since the listing
	}
	return c.deleteKeys(ctx, id, chks[i].keys, referenced)
}

// deleteKeys deletes the manifest of id and then the given keys except
// those in keep, joining the failures. A failure to delete the manifest
// stops it: the checkpoint must not stay complete with objects missing.
func (c *Checkpoints) deleteKeys(ctx context.Context, id uint64, keys []string, keep map[string]bool) error {
	manifest := ManifestKey(c.job, id)
	if err := c.store.Delete(ctx, manifest); err != nil {
		return err
	}
	c.forget(id)
	var rest []string
	for _, k := range keys {
		if k != manifest && !keep[k] {
			rest = append(rest, k)
		}
	}
	c.dropGood(rest)
	return deleteMany(ctx, c.store, rest)
}

// Retain applies retention. It keeps the newest keep usable checkpoints
// (keep < 1 means 1) and deletes the older complete ones. It deletes the
// incomplete checkpoints (no manifest) whose id is below inFlight, which are
// aborted or orphaned; the checkpoint in flight and newer ones are left
// alone. Pass inFlight 0 to delete no incomplete checkpoint, or MaxID()+1
// when none is in flight.
//
// A checkpoint is usable when its manifest reads and validates, it is not
// void (see SealLease), and every state object it references reads back
// with the recorded size and CRC-32C and names its task: what LoadLatest
// checks. Retain verifies the complete checkpoints newest first until it
// has found keep usable ones. It reads only the objects it does not know
// intact: those c stored itself (a job in one process), or read back and
// verified before. So a checkpoint whose states other processes uploaded
// (the workers of a cluster) is read back before it counts, and one that a
// load or a restore found unusable (MarkUnusable) never counts.
//
// Retention is reference-aware: an incremental checkpoint references
// objects of older checkpoints (see PutTaskStateRefs), and Retain keeps
// every object that a retained manifest references, even when it deletes
// the checkpoint that stored it. Such objects stay in a directory without
// a manifest, which is not an aborted checkpoint: Retain deletes them once
// no retained manifest references them any more.
//
// So that one damaged object cannot leave the job without a usable
// checkpoint, Retain also keeps a fallback that shares no object with the
// newest usable checkpoint: the newest usable checkpoint that shares none
// (with full checkpoints, the one before the newest, which keep 2 retains
// anyway), and, until such a checkpoint exists or while it ages, the
// oldest usable checkpoint newer than it, which will share none once the
// incremental checkpoints after it have stored its key groups again. At
// most keep+2 usable checkpoints are retained.
//
// An unusable complete checkpoint newer than the oldest retained usable one
// is kept, for inspection, but does not count towards keep; older ones are
// deleted. So Retain never deletes the newest usable checkpoint (when there
// is none, it deletes no complete checkpoint), nor any object that a
// retained manifest references. A store failure (anything but a missing or
// corrupt object) stops it before it deletes anything.
//
// When the job's origin (see EffectiveOrigin) is one of its checkpoints,
// Retain also keeps that checkpoint, without counting it, until it keeps a
// usable checkpoint of the job's own (an id of at least the origin's
// FirstId): until then recovery restores the origin. A corrupt origin
// stops it before it deletes anything.
//
// When c holds the job's lease, Retain checks it first, again once it has
// listed the checkpoints (reading the lease's seals afresh, so that a
// manifest of its own that a newer seal voids never counts as usable),
// and again before every delete; it deletes neither a manifest nor an
// object of a later holder's epochs. A holder superseded meanwhile gets
// an error wrapping ErrLeaseLost and deletes nothing more.
//
// Retain, like DeleteIncomplete and DeleteAll, never touches a savepoint:
// savepoints lie outside CheckpointsPrefix(job).
func (c *Checkpoints) Retain(ctx context.Context, keep int, inFlight uint64) error {
	keep = max(keep, 1)
	if err := c.writable(ctx); err != nil {
		return fmt.Errorf("snapshots: retain: %w", err)
	}
	chks, err := c.scan(ctx)
	if err != nil {
		return err
	}
	// The lease once more, now that the listing is made: a holder that
	// took the job over since the check above restores one of the
	// checkpoints listed, and seals the ids that count (see readSeals).
	if err := c.confirmHolder(ctx); err != nil {
		return fmt.Errorf("snapshots: retain: %w", err)
	}
	origin, err := c.EffectiveOrigin(ctx)
	if err != nil {
		return fmt.Errorf("snapshots: retain: %w", err)
	}
	r := &retention{c: c, referenced: map[string]bool{}, retained: map[uint64]bool{}, keys: map[uint64][]string{}, void: map[uint64]bool{}}
	var usable []uint64 // newest first
	own := false
	for _, chk := range slices.Backward(chks) {
		if !chk.complete || len(usable) == keep {
			continue
		}
		ok, err := r.retain(ctx, chk.id)
		if err != nil {
			return err
		}
		if ok {
			usable = append(usable, chk.id)
			own = own || chk.id >= origin.GetFirstId()
		}
	}
	if id := origin.GetCheckpointId(); origin != nil && origin.GetSavepoint() == "" && !own && !r.retained[id] &&
		slices.ContainsFunc(chks, func(chk checkpoint) bool { return chk.id == id && chk.complete }) {
		if _, err := r.retain(ctx, id); err != nil {
			return err
		}
	}
	if err := r.keepFallback(ctx, chks, usable, origin.GetFirstId()); err != nil {
		return err
	}
	limit := c.maxDeletable()
	var errs []error
	for _, chk := range chks {
		if (r.retained[chk.id] && !r.void[chk.id]) || (!(chk.complete && !r.void[chk.id]) && chk.id >= inFlight) {
			continue // retained, or perhaps the checkpoint in flight (a void manifest may share its id)
		}
		if !chk.complete && !slices.ContainsFunc(chk.keys, func(k string) bool { return !r.referenced[k] }) {
			continue // the objects of a deleted checkpoint that retained ones still reference
		}
		if ok, err := c.deletable(ctx, chk, limit); err != nil || !ok {
			if err != nil && ctx.Err() != nil {
				return errors.Join(append(errs, err)...)
			}
			continue
		}
		if err := c.writable(ctx); err != nil { // before every delete: a new holder may have restored what this one would delete
			return errors.Join(append(errs, fmt.Errorf("snapshots: retain: %w", err))...)
		}
		c.log.DebugContext(ctx, "snapshots: deleting checkpoint", "checkpoint", chk.id, "complete", chk.complete)
		if err := c.deleteKeys(ctx, chk.id, chk.keys, r.referenced); err != nil {
			if ctx.Err() != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// retention is one pass of Retain: the checkpoints it keeps and the
// objects they reference.
type retention struct {
	c          *Checkpoints
	referenced map[string]bool
	retained   map[uint64]bool
	keys       map[uint64][]string // the objects of the checkpoints checked, by id
	void       map[uint64]bool     // checkpoints found void: never kept
}

// check verifies checkpoint id (see checkUsable): a missing, corrupt or
// void checkpoint is not usable, a store failure is an error.
func (r *retention) check(ctx context.Context, id uint64) (bool, error) {
	keys, err := r.c.checkUsable(ctx, id)
	if keys != nil {
		r.keys[id] = keys
	}
	switch {
	case errors.Is(err, ErrVoid):
		r.void[id] = true
		return false, nil
	case err != nil && unusable(ctx, err):
		r.c.log.WarnContext(ctx, "snapshots: retention passes over an unusable checkpoint", "checkpoint", id, "err", err)
		return false, nil
	case err != nil:
		return false, fmt.Errorf("snapshots: retain: %w", err)
	}
	return true, nil
}

// retain keeps checkpoint id and what it references, and reports whether
// it is usable.
func (r *retention) retain(ctx context.Context, id uint64) (bool, error) {
	r.retained[id] = true
	ok, err := r.check(ctx, id)
	if !r.void[id] {
		for _, k := range r.keys[id] {
			r.referenced[k] = true
		}
	}
	return ok, err
}

// keepFallback keeps a usable checkpoint that shares no object with the
// newest usable one, usable[0], and, while none does or as it ages, the
// oldest usable checkpoint newer than it (see Retain). Only checkpoints of
// the job's current history count, from first on: recovery restores no
// older one.
func (r *retention) keepFallback(ctx context.Context, chks []checkpoint, usable []uint64, first uint64) error {
	usable = slices.DeleteFunc(slices.Clone(usable), func(id uint64) bool { return id < first })
	if len(usable) == 0 {
		return nil
	}
	newest := make(map[string]bool, len(r.keys[usable[0]]))
	for _, k := range r.keys[usable[0]] {
		newest[k] = true
	}
	disjoint := func(id uint64) bool {
		return !slices.ContainsFunc(r.keys[id], func(k string) bool { return newest[k] })
	}
	if slices.ContainsFunc(usable[1:], disjoint) {
		return nil
	}
	var fallback uint64
	var newer []uint64 // usable, newer than the fallback, newest first
	for _, chk := range slices.Backward(chks) {
		if chk.id < first {
			break
		}
		if !chk.complete || chk.id >= usable[len(usable)-1] || r.retained[chk.id] {
			continue
		}
		ok, err := r.check(ctx, chk.id)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if disjoint(chk.id) {
			fallback = chk.id
			break
		}
		newer = append(newer, chk.id)
	}
	if fallback != 0 {
		r.c.log.DebugContext(ctx, "snapshots: retention keeps a fallback that shares no object with the newest checkpoint",
			"checkpoint", fallback, "newest", usable[0])
		if _, err := r.retain(ctx, fallback); err != nil {
			return err
		}
	}
	if len(newer) > 0 {
		if _, err := r.retain(ctx, newer[len(newer)-1]); err != nil {
			return err
		}
	}
	return nil
}

// deletable reports whether c may delete checkpoint chk: when c holds the
// job's lease, none of its objects, nor its manifest, is of an epoch above
// limit, the holder's last (a later holder's).
func (c *Checkpoints) deletable(ctx context.Context, chk checkpoint, limit uint64) (bool, error) {
	if limit == ^uint64(0) {
		return true, nil
	}
	if slices.ContainsFunc(chk.keys, func(k string) bool { return keyEpoch(c.job, k) > limit }) {
		return false, nil
	}
	if !chk.complete {
		return true, nil
	}
	epoch, err := c.manifestEpoch(ctx, chk.id)
	switch {
	case errors.Is(err, ErrCorrupt) && ctx.Err() == nil:
		return true, nil // a corrupt manifest belongs to nobody
	case errors.Is(err, ErrNotFound) && ctx.Err() == nil:
		return false, nil // gone since the listing
	case err != nil:
		return false, err
	}
	return epoch <= limit, nil
}

// DeleteIncomplete deletes every incomplete checkpoint (one without a
// manifest: aborted, or orphaned by a crash) whose id is below below, and
// returns how many it deleted. It never touches a checkpoint that has a
// manifest, corrupt or not, nor an object that the manifest of a complete
// checkpoint references: the objects of a checkpoint that retention
// deleted while newer incremental checkpoints still reference them stay,
// without being counted or logged, until nothing references them. The
// caller guarantees that no checkpoint below below is in flight: the
// runtime calls it after aborting checkpoint n, with below n+1. When c
// holds the job's lease, it checks it first, and deletes no object of a
// later holder's epochs.
func (c *Checkpoints) DeleteIncomplete(ctx context.Context, below uint64) (deleted int, err error) {
	if err := c.writable(ctx); err != nil {
		return 0, err
	}
	limit := c.maxDeletable()
	some := func(chks []checkpoint) bool {
		return slices.ContainsFunc(chks, func(chk checkpoint) bool { return !chk.complete && chk.id < below })
	}
	chks, referenced, err := c.scanReferences(ctx, 0, some)
	if err != nil {
		return 0, err
	}
	var errs []error
	for _, chk := range chks {
		if chk.complete || chk.id >= below {
			continue
		}
		rest := slices.DeleteFunc(slices.Clone(chk.keys), func(k string) bool { return referenced[k] || keyEpoch(c.job, k) > limit })
		if len(rest) == 0 {
			continue
		}
		c.log.DebugContext(ctx, "snapshots: deleting incomplete checkpoint", "checkpoint", chk.id,
			"objects", len(rest), "referenced", len(chk.keys)-len(rest))
		c.dropGood(rest)
		if err := deleteMany(ctx, c.store, rest); err != nil {
			if ctx.Err() != nil {
				return deleted, errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
			continue
		}
		c.forget(chk.id)
		deleted++
	}
	return deleted, errors.Join(errs...)
}

// scanAttempts bounds the listings of scanReferences.
const scanAttempts = 3

// scanReferences lists the job's checkpoints and, when need says that the
// listing calls for it, the keys of the objects that the manifests of the
// complete ones (except checkpoint except) reference. A manifest deleted
// between the listing and its read may belong to a checkpoint that a newer
// one, written before retention deleted it, succeeds: the newer manifest
// is then in a new listing, so it lists again, up to scanAttempts times.
func (c *Checkpoints) scanReferences(ctx context.Context, except uint64, need func([]checkpoint) bool) ([]checkpoint, map[string]bool, error) {
	for range scanAttempts {
		chks, err := c.scan(ctx)
		if err != nil || !need(chks) {
			return chks, nil, err
		}
		referenced, complete, err := c.references(ctx, chks, except)
		if err != nil || complete {
			return chks, referenced, err
		}
	}
	return nil, nil, fmt.Errorf("snapshots: job %q: checkpoints kept being deleted while their manifests were read "+
		"(%d listings); deleting nothing", c.job, scanAttempts)
}

// references returns the keys that the manifests of the complete
// checkpoints of chks, except checkpoint except, reference; complete is
// false when one of them is gone since chks was listed. A corrupt manifest
// references nothing: its checkpoint is unusable.
func (c *Checkpoints) references(ctx context.Context, chks []checkpoint, except uint64) (referenced map[string]bool, complete bool, err error) {
	referenced = make(map[string]bool)
	for _, chk := range chks {
		if !chk.complete || chk.id == except {
			continue
		}
		keys, err := c.manifestRefs(ctx, chk.id)
		switch {
		case errors.Is(err, ErrNotFound) && ctx.Err() == nil:
			return nil, false, nil
		case errors.Is(err, ErrCorrupt) && ctx.Err() == nil:
			continue
		case err != nil:
			return nil, false, err
		}
		for _, k := range keys {
			referenced[k] = true
		}
	}
	return referenced, true, nil
}

// manifestRefs returns the keys of the objects that the manifest of
// complete checkpoint id references, from c's caches or by reading it.
func (c *Checkpoints) manifestRefs(ctx context.Context, id uint64) ([]string, error) {
	c.mu.Lock()
	keys, ok := c.verified[id]
	if !ok {
		keys, ok = c.refs[id]
	}
	written, wrote := c.written[id]
	c.mu.Unlock()
	switch {
	case ok:
		return keys, nil
	case wrote:
		return written, nil
	}
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	keys = stateKeys(m)
	c.mu.Lock()
	if c.refs == nil {
		c.refs = map[uint64][]string{}
	}
	c.refs[id] = keys
	c.mu.Unlock()
	return keys, nil
}

// checkUsable checks that checkpoint id is usable (see Retain) unless c has
// verified it before. It returns the keys of the objects that its manifest
// references (see stateKeys) whenever the manifest reads, usable or not.
// It reads the manifest, and then only the states that reference an
// object c does not know intact (put by c, or verified before).
func (c *Checkpoints) checkUsable(ctx context.Context, id uint64) ([]string, error) {
	c.mu.Lock()
	refs, ok := c.verified[id]
	bad := c.unusable[id]
	c.mu.Unlock()
	if ok && bad == nil {
		return refs, nil
	}
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return nil, err
	}
	refs = stateKeys(m)
	if err := c.checkVoid(ctx, m); err != nil {
		return refs, err
	}
	if bad != nil { // a restore found it damaged (MarkUnusable): its objects stay, it does not count
		return refs, bad
	}
	var unknown []*messages.TaskStateEntry
	c.mu.Lock()
	for _, t := range m.GetTasks() {
		if slices.ContainsFunc(entryKeys(t.GetState(), nil), func(k string) bool { return !c.good[k] }) {
			unknown = append(unknown, t)
		}
	}
	c.mu.Unlock()
	if len(unknown) > 0 {
		if err := c.eachState(ctx, unknown, nil, false); err != nil {
			return refs, err
		}
	}
	c.markVerified(id, m)
	return refs, nil
}

// stateKeys returns the keys of the objects that manifest m references,
// sorted: the tasks' states (but not inline ones, which have no object)
// and the objects that incremental states reference.
func stateKeys(m *messages.Manifest) []string {
	keys := make([]string, 0, len(m.GetTasks()))
	for _, t := range m.GetTasks() {
		keys = entryKeys(t.GetState(), keys)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// entryKeys appends to into the keys of the objects that state h lies in:
// its own (unless inline) and those it references.
func entryKeys(h *messages.StateHandle, into []string) []string {
	if len(h.GetInline()) == 0 {
		into = append(into, h.GetKey())
	}
	return referencedKeys(h, into)
}

// markVerified records that checkpoint id, whose manifest m c has read
// from the store, is usable: its objects are intact.
func (c *Checkpoints) markVerified(id uint64, m *messages.Manifest) {
	keys := stateKeys(m)
	c.mu.Lock()
	if c.verified == nil {
		c.verified = map[uint64][]string{}
	}
	c.verified[id] = keys
	if c.good == nil {
		c.good = map[string]bool{}
	}
	for _, k := range keys {
		c.good[k] = true
	}
	c.noteEpoch(id, m.GetEpoch())
	delete(c.written, id)
	c.mu.Unlock()
}

// markWritten records that c wrote manifest m: the keys of the objects it
// references (not a copy of m, whose inline states may be large).
func (c *Checkpoints) markWritten(m *messages.Manifest) {
	keys := stateKeys(m)
	c.mu.Lock()
	if c.written == nil {
		c.written = map[uint64][]string{}
	}
	c.written[m.GetCheckpointId()] = keys
	c.noteEpoch(m.GetCheckpointId(), m.GetEpoch())
	c.mu.Unlock()
}

// noteEpoch records the epoch of checkpoint id's manifest; c.mu is held.
func (c *Checkpoints) noteEpoch(id, epoch uint64) {
	if c.epochs == nil {
		c.epochs = map[uint64]uint64{}
	}
	c.epochs[id] = epoch
}

// manifestEpoch returns the epoch of complete checkpoint id's manifest,
// from c's caches or by reading it.
func (c *Checkpoints) manifestEpoch(ctx context.Context, id uint64) (uint64, error) {
	c.mu.Lock()
	e, ok := c.epochs[id]
	c.mu.Unlock()
	if ok {
		return e, nil
	}
	m, err := c.ReadManifest(ctx, id)
	if err != nil {
		return 0, err
	}
	c.mu.Lock()
	c.noteEpoch(id, m.GetEpoch())
	c.mu.Unlock()
	return m.GetEpoch(), nil
}

// dropGood forgets that the objects under keys are intact: they are being
// deleted.
func (c *Checkpoints) dropGood(keys []string) {
	c.mu.Lock()
	for _, k := range keys {
		delete(c.good, k)
	}
	c.mu.Unlock()
}

// forget drops checkpoint id from the caches once it is deleted.
func (c *Checkpoints) forget(id uint64) {
	c.mu.Lock()
	delete(c.verified, id)
	delete(c.written, id)
	delete(c.refs, id)
	delete(c.epochs, id)
	c.mu.Unlock()
}
