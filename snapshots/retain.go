package snapshots

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
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
// It leaves the job's lease (see LeaseKey), since starting a job over must
// not let a superseded coordinator take it back, and every savepoint: a
// savepoint is the user's, deleted only by name (DeleteSavepoint).
func (c *Checkpoints) DeleteAll(ctx context.Context) (deleted int, err error) {
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
	return deleteMany(ctx, c.store, rest)
}

// Retain applies retention. It keeps the newest keep usable checkpoints
// (keep < 1 means 1) and deletes the older complete ones. It deletes the
// incomplete checkpoints (no manifest) whose id is below inFlight, which are
// aborted or orphaned; the checkpoint in flight and newer ones are left
// alone. Pass inFlight 0 to delete no incomplete checkpoint, or MaxID()+1
// when none is in flight.
//
// A checkpoint is usable when its manifest reads and validates and every
// state object it references reads back with the recorded size and
// CRC-32C and names its task: what LoadLatest checks. Retain verifies the
// complete checkpoints newest first until it has found keep usable ones.
// Objects never change once written, so a checkpoint verified once by c
// (by Retain, or by a LoadLatest that returned it) is not read again, and
// the states of one written by a successful PutManifest of c are not read:
// Retain reads its manifest once, and the states only if the manifest is
// not the one written.
//
// Retention is reference-aware: an incremental checkpoint references
// objects of older checkpoints (see PutTaskStateRefs), and Retain keeps
// every object that a retained manifest references, even when it deletes
// the checkpoint that stored it. Such objects stay in a directory without
// a manifest, which is not an aborted checkpoint: Retain deletes them once
// no retained manifest references them any more.
//
// An unusable complete checkpoint newer than the oldest retained usable one
// is kept, for inspection, but does not count towards keep; older ones are
// deleted. So Retain never deletes the newest usable checkpoint (when there
// is none, it deletes no complete checkpoint), nor any object that a
// retained manifest references. A store failure (anything but a missing or
// corrupt object) stops it before it deletes anything.
//
// When the job's origin (see PutOrigin) is one of its checkpoints, Retain
// also keeps that checkpoint, without counting it, until it keeps a usable
// checkpoint of the job's own (an id of at least the origin's FirstId):
// until then recovery restores the origin. A corrupt origin stops it
// before it deletes anything.
//
// Retain, like DeleteIncomplete and DeleteAll, never touches a savepoint:
// savepoints lie outside CheckpointsPrefix(job).
func (c *Checkpoints) Retain(ctx context.Context, keep int, inFlight uint64) error {
	keep = max(keep, 1)
	chks, err := c.scan(ctx)
	if err != nil {
		return err
	}
	origin, err := c.ReadOrigin(ctx)
	if err != nil {
		return fmt.Errorf("snapshots: retain: %w", err)
	}
	referenced := make(map[string]bool)
	retained := make(map[uint64]bool)
	retain := func(id uint64) (usable bool, err error) {
		retained[id] = true
		refs, err := c.checkUsable(ctx, id)
		for _, k := range refs {
			referenced[k] = true
		}
		switch {
		case err != nil && unusable(ctx, err):
			c.log.WarnContext(ctx, "snapshots: retention keeps an unusable checkpoint without counting it",
				"checkpoint", id, "err", err)
			return false, nil
		case err != nil:
			return false, fmt.Errorf("snapshots: retain: %w", err)
		}
		return true, nil
	}
	kept, own := 0, false
	for _, chk := range slices.Backward(chks) {
		if !chk.complete || kept == keep {
			continue
		}
		ok, err := retain(chk.id)
		if err != nil {
			return err
		}
		if ok {
			kept++
			own = own || chk.id >= origin.GetFirstId()
		}
	}
	if id := origin.GetCheckpointId(); origin != nil && origin.GetSavepoint() == "" && !own && !retained[id] &&
		slices.ContainsFunc(chks, func(chk checkpoint) bool { return chk.id == id && chk.complete }) {
		if _, err := retain(id); err != nil {
			return err
		}
	}
	var errs []error
	for _, chk := range chks {
		if retained[chk.id] || (!chk.complete && chk.id >= inFlight) {
			continue
		}
		if !chk.complete && !slices.ContainsFunc(chk.keys, func(k string) bool { return !referenced[k] }) {
			continue // the objects of a deleted checkpoint that retained ones still reference
		}
		c.log.DebugContext(ctx, "snapshots: deleting checkpoint", "checkpoint", chk.id, "complete", chk.complete)
		if err := c.deleteKeys(ctx, chk.id, chk.keys, referenced); err != nil {
			if ctx.Err() != nil {
				return errors.Join(append(errs, err)...)
			}
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// DeleteIncomplete deletes every incomplete checkpoint (one without a
// manifest: aborted, or orphaned by a crash) whose id is below below, and
// returns how many it deleted. It never touches a checkpoint that has a
// manifest, corrupt or not, nor an object that the manifest of a complete
// checkpoint references: the objects of a checkpoint that retention
// deleted while newer incremental checkpoints still reference them stay,
// without being counted or logged, until nothing references them. The
// caller guarantees that no checkpoint below below is in flight: the
// runtime calls it after aborting checkpoint n, with below n+1.
func (c *Checkpoints) DeleteIncomplete(ctx context.Context, below uint64) (deleted int, err error) {
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
		rest := slices.DeleteFunc(slices.Clone(chk.keys), func(k string) bool { return referenced[k] })
		if len(rest) == 0 {
			continue
		}
		c.log.DebugContext(ctx, "snapshots: deleting incomplete checkpoint", "checkpoint", chk.id,
			"objects", len(rest), "referenced", len(chk.keys)-len(rest))
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
	written := c.written[id]
	c.mu.Unlock()
	switch {
	case ok:
		return keys, nil
	case written != nil:
		return stateKeys(written), nil
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
//
// It reads the manifest once even when PutManifest wrote it: that shows the
// manifest in place and intact. The states of a manifest equal to one that
// c wrote are not read: their handles come from successful Puts.
func (c *Checkpoints) checkUsable(ctx context.Context, id uint64) ([]string, error) {
	c.mu.Lock()
	refs, ok := c.verified[id]
	written := c.written[id]
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
	if bad != nil { // a restore found it damaged (MarkUnusable): its objects stay, it does not count
		return refs, bad
	}
	if written == nil || !proto.Equal(written, m) {
		if err := c.eachState(ctx, m.GetTasks(), nil, false); err != nil {
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
		h := t.GetState()
		if len(h.GetInline()) == 0 {
			keys = append(keys, h.GetKey())
		}
		keys = referencedKeys(h, keys)
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// markVerified records that checkpoint id, whose manifest m c has read
// from the store, is usable.
func (c *Checkpoints) markVerified(id uint64, m *messages.Manifest) {
	keys := stateKeys(m)
	c.mu.Lock()
	if c.verified == nil {
		c.verified = map[uint64][]string{}
	}
	c.verified[id] = keys
	delete(c.written, id)
	c.mu.Unlock()
}

// markWritten records that c wrote manifest m, all of whose states were
// stored by successful Puts.
func (c *Checkpoints) markWritten(m *messages.Manifest) {
	c.mu.Lock()
	if c.written == nil {
		c.written = map[uint64]*messages.Manifest{}
	}
	c.written[m.GetCheckpointId()] = proto.CloneOf(m)
	c.mu.Unlock()
}

// forget drops checkpoint id from the caches once it is deleted.
func (c *Checkpoints) forget(id uint64) {
	c.mu.Lock()
	delete(c.verified, id)
	delete(c.written, id)
	delete(c.refs, id)
	c.mu.Unlock()
}
