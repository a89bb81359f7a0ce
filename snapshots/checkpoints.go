package snapshots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/messages"
	"google.golang.org/protobuf/proto"
)

var (
	// ErrNoUsableCheckpoint is wrapped by the error of LoadLatest when the
	// store holds complete checkpoints of the job but none of them is
	// usable: restoring nothing would silently start the job from scratch.
	ErrNoUsableCheckpoint = errors.New("snapshots: no usable checkpoint")
	// ErrManifestInDoubt is wrapped by the error of PutManifest when the
	// manifest's write failed and reading it back could not tell whether
	// it is in place: the checkpoint may or may not be complete.
	ErrManifestInDoubt = errors.New("snapshots: manifest write in doubt")
)

// Checkpoints reads and writes the checkpoints of one job in a Store,
// following the layout described in the package documentation. It is safe
// for concurrent use.
//
// Checkpoints calls its store through a guard: a panic in a Store method
// becomes an error wrapping ErrStorePanic, logged with its stack.
type Checkpoints struct {
	store *guarded
	given Store // as given to NewCheckpoints
	job   string
	log   *slog.Logger

	inlineLimit  atomic.Int64                 // see SetInlineLimit
	streamLimits atomic.Pointer[streamLimits] // nil: defaultStreamLimits

	mu       sync.Mutex
	verified map[uint64][]string // usable checkpoints: the object keys their manifests reference
	written  map[uint64][]string // manifests written by PutManifest, not yet read back: the object keys they reference
	unusable map[uint64]error    // complete checkpoints a restore found unusable (MarkUnusable)
	refs     map[uint64][]string // complete checkpoints: the object keys their manifests reference

	good   map[string]bool                // object keys known intact: put by c, or read back and verified
	epochs map[uint64]uint64              // the epochs of manifests read or written, by checkpoint id
	hold   *lease                         // the job's lease, while c holds it (see AcquireLease)
	seals  map[uint64]*messages.LeaseSeal // seals read, by generation: they never change
}

// BytesRead returns the bytes c has read from its store so far: objects,
// ranges of objects, manifests and leases. The difference across a restore
// is what the restore read.
func (c *Checkpoints) BytesRead() int64 { return c.store.read.Load() }

// NewCheckpoints returns the checkpoints of job in s. Problems that make a
// checkpoint unusable, and panics of s, are logged to log; a nil log
// discards them.
func NewCheckpoints(s Store, job string, log *slog.Logger) *Checkpoints {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("job", job)
	return &Checkpoints{store: guard(s, log), given: s, job: job, log: log}
}

// Store returns the store that holds the checkpoints, as given to
// NewCheckpoints (without the guard against panics).
func (c *Checkpoints) Store() Store { return c.given }

// Job returns the job whose checkpoints c holds.
func (c *Checkpoints) Job() string { return c.job }

// Check calls the store's Check through the guard: it verifies that the
// store is reachable and writable, and a panic in it becomes an error
// wrapping ErrStorePanic.
func (c *Checkpoints) Check(ctx context.Context) error { return c.store.Check(ctx) }

// PutTaskState stores a task's state as EpochStateKey(job, id, st.Epoch, st.TaskId) and
// returns the handle that the manifest records: the key, the size of the
// stored bytes, their CRC-32C, and the index of its key groups (see
// ReadKeyGroups). With an inline limit (SetInlineLimit) a small state is
// not stored: its handle carries its bytes. It is PutTaskStateRefs without
// references.
func (c *Checkpoints) PutTaskState(ctx context.Context, id uint64, st *messages.TaskState) (*messages.StateHandle, error) {
	return c.PutTaskStateRefs(ctx, id, st, nil)
}

// putState stores st under key, or, when inline allows it, keeps it inline
// if it is small enough, and returns its handle, whose index is in
// key-group order.
func (c *Checkpoints) putState(ctx context.Context, key string, st *messages.TaskState, inline bool) (*messages.StateHandle, error) {
	data, err := EncodeObject(KindTaskState, st)
	if err != nil {
		return nil, fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	idx, err := indexKeyGroups(data)
	if err != nil {
		return nil, fmt.Errorf("snapshots: put %s: index its key groups: %w", key, err)
	}
	sortSections(idx)
	h := &messages.StateHandle{Key: key, Size: uint64(len(data)), Crc32C: Checksum(data), KeyGroups: idx, Indexed: true}
	if n := c.inlineLimit.Load(); inline && n > 0 && int64(len(data)) <= n {
		if err := validateKey(key); err != nil {
			return nil, err
		}
		h.Inline = data
		return h, nil
	}
	if err := c.store.Put(ctx, key, data); err != nil {
		return nil, err
	}
	c.markGood(key)
	return h, nil
}

func validateTaskID(id string) error {
	if id == "" || strings.ContainsRune(id, '/') {
		return fmt.Errorf("snapshots: task id %q: must be non-empty and contain no '/': %w", id, ErrInvalidKey)
	}
	return nil
}

// PutManifest writes the manifest of checkpoint m.CheckpointId, which
// completes the checkpoint. Call it only once every state it references is
// stored. The manifest's job must be c's job and its id at least 1.
//
// The manifest is created only where none is (Creator), so that two
// holders of the job can never both complete checkpoint n: when another
// manifest holds the id, PutManifest returns an error wrapping
// ErrCheckpointTaken (or ErrLeaseLost, when a newer holder wrote it) and
// the checkpoint is not complete.
//
// When c holds the job's lease, m's epoch must be one of the holder's,
// and once the manifest is in place PutManifest checks the lease: an
// error wrapping ErrLeaseLost then says that another holder took the job
// over, and the caller must not act on the checkpoint (commit
// transactions, delete older ones): the new holder found it complete, or
// voids it (see SealLease), and decides.
//
// Its result is otherwise the truth about the checkpoint: nil means the
// manifest is in place, so the checkpoint is complete and recovery may
// restore it. A write can fail after the object is in place (a directory
// fsync failing after the rename, a lost PUT response, a context ending as
// the PUT lands), so when the store's write fails, PutManifest reads the
// manifest back, with a context of its own bounded by
// ManifestCheckTimeout:
//
//   - the manifest is there and equal to m: it logs a warning and returns
//     nil;
//   - it is not there (ErrNotFound): it returns the write's error, and the
//     checkpoint is not complete;
//   - another manifest is there: ErrCheckpointTaken, as above;
//   - anything else (the read fails): it returns an error wrapping
//     ErrManifestInDoubt and the write's error. Nobody can tell whether
//     recovery will restore this checkpoint. So does a lease check that
//     fails for the store's sake rather than because the lease is lost.
func (c *Checkpoints) PutManifest(ctx context.Context, m *messages.Manifest) error {
	if err := c.validateManifest(m, m.GetCheckpointId()); err != nil {
		return fmt.Errorf("snapshots: put manifest: %w", err)
	}
	if err := c.holderEpoch(m); err != nil {
		return fmt.Errorf("snapshots: put manifest: %w", err)
	}
	id := m.GetCheckpointId()
	sub := checkpointOf(id)
	if err := c.putManifest(ctx, ManifestKey(c.job, id), sub, m); err != nil {
		return err
	}
	c.markWritten(m)
	return c.confirmHeld(ctx, sub)
}

// holderEpoch checks that, when c holds the job's lease, manifest m is of
// one of the holder's epochs.
func (c *Checkpoints) holderEpoch(m *messages.Manifest) error {
	l := c.heldLease()
	if l == nil {
		return nil
	}
	if first, last := HolderEpochs(l.claim); m.GetEpoch() < first || m.GetEpoch() > last {
		return fmt.Errorf("epoch %d is not one of the lease holder's (%d to %d): %w", m.GetEpoch(), first, last, ErrInvalidLease)
	}
	return nil
}

// confirmHeld checks, after the manifest of sub is in place, that c still
// holds the job's lease (when it holds one).
func (c *Checkpoints) confirmHeld(ctx context.Context, sub subject) error {
	err := c.writable(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseLost):
		return fmt.Errorf("snapshots: the manifest of %s is in place, but %w", sub.what, err)
	}
	return fmt.Errorf("snapshots: the manifest of %s is in place, but whether this holder still holds the job is unknown: %w: %w",
		sub.what, ErrManifestInDoubt, err)
}

// subject names the checkpoint or savepoint that a manifest completes, for
// errors (what) and logs (attr); taken is the error wrapped when another
// manifest is in its place.
type subject struct {
	what  string
	attr  slog.Attr
	taken error
}

func checkpointOf(id uint64) subject {
	return subject{fmt.Sprintf("checkpoint %d", id), slog.Uint64("checkpoint", id), ErrCheckpointTaken}
}

func savepointOf(name string) subject {
	return subject{fmt.Sprintf("savepoint %q", name), slog.String("savepoint", name), ErrSavepointExists}
}

// putManifest creates manifest m of sub under key and, when the write
// fails, finds out whether it is in place anyway (see PutManifest).
func (c *Checkpoints) putManifest(ctx context.Context, key string, sub subject, m *messages.Manifest) error {
	data, err := EncodeObject(KindManifest, m)
	if err != nil {
		return fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	if perr := createObject(ctx, c.store, key, data); perr != nil {
		return c.resolveManifest(ctx, key, sub, m, perr)
	}
	return nil
}

// ManifestCheckTimeout bounds the read with which PutManifest finds out
// whether a manifest whose write failed is in place.
const ManifestCheckTimeout = 5 * time.Second

// resolveManifest finds out whether manifest m, whose write under key
// failed with perr, is in place anyway: nil when it is, perr when no
// manifest is there, an error wrapping sub.taken when another is, and an
// error wrapping ErrManifestInDoubt when that cannot be told.
func (c *Checkpoints) resolveManifest(ctx context.Context, key string, sub subject, m *messages.Manifest, perr error) error {
	what := sub.what
	if errors.Is(perr, ErrInvalidKey) {
		return perr // refused before any I/O
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ManifestCheckTimeout)
	defer cancel()
	data, gerr := c.store.Get(rctx, key)
	switch {
	case errors.Is(gerr, ErrNotFound) && (errors.Is(perr, context.Canceled) || errors.Is(perr, context.DeadlineExceeded)):
		// A write abandoned by its context may have sent the whole object:
		// a server can still commit it after this read.
		return fmt.Errorf("snapshots: put %s: the write was abandoned and the manifest is not there yet, "+
			"but the server may still commit it, so %s may or may not be complete: %w: %w", key, what, ErrManifestInDoubt, perr)
	case errors.Is(gerr, ErrNotFound):
		c.log.DebugContext(ctx, "snapshots: manifest write failed and the manifest is absent",
			sub.attr, "key", key, "err", perr)
		return perr
	case gerr != nil:
		return fmt.Errorf("snapshots: put %s: the write failed and reading it back failed too (%v), "+
			"so %s may or may not be complete: %w: %w", key, gerr, what, ErrManifestInDoubt, perr)
	}
	got := new(messages.Manifest)
	if err := DecodeObject(data, KindManifest, got); err != nil {
		return fmt.Errorf("snapshots: put %s: %s is taken: what is in its place does not decode (%v): %w", key, what, err, sub.taken)
	}
	if !proto.Equal(got, m) {
		if l := c.heldLease(); l != nil {
			if _, last := HolderEpochs(l.claim); got.GetEpoch() > last {
				if err := c.CheckLease(ctx); err != nil {
					return err
				}
			}
		}
		return fmt.Errorf("snapshots: put %s: %s is taken: the manifest there is of epoch %d (written %s), not this one's (epoch %d): %w",
			key, what, got.GetEpoch(), time.Unix(0, got.GetTimestampUnixNano()).UTC().Format(time.RFC3339Nano), m.GetEpoch(), sub.taken)
	}
	c.log.WarnContext(ctx, "snapshots: manifest write reported an error but the manifest is in place "+
		"(a write whose answer was lost, retried); it is complete", sub.attr, "key", key, "err", perr)
	return nil
}

// ReadManifest reads and checks the manifest of checkpoint id. It returns an
// error wrapping ErrNotFound when the checkpoint is not complete, and one
// wrapping ErrCorrupt when the manifest does not decode or does not belong
// where it is stored.
func (c *Checkpoints) ReadManifest(ctx context.Context, id uint64) (*messages.Manifest, error) {
	key := ManifestKey(c.job, id)
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	m := new(messages.Manifest)
	if err := DecodeObject(data, KindManifest, m); err != nil {
		return nil, fmt.Errorf("snapshots: manifest %s: %w", key, err)
	}
	if err := c.validateManifest(m, id); err != nil {
		return nil, fmt.Errorf("snapshots: manifest %s: %w: %w", key, ErrCorrupt, err)
	}
	return m, nil
}

// validateManifest checks that m is a manifest of checkpoint id of c's job
// (not of a savepoint) whose entries are valid (see validateEntries).
func (c *Checkpoints) validateManifest(m *messages.Manifest, id uint64) error {
	if err := c.validateHead(m); err != nil {
		return err
	}
	switch {
	case m.GetCheckpointId() != id:
		return fmt.Errorf("checkpoint id %d, want %d", m.GetCheckpointId(), id)
	case m.GetSavepoint() != "":
		return fmt.Errorf("the manifest of savepoint %q, not of a checkpoint", m.GetSavepoint())
	}
	return c.validateEntries(m, id)
}

// validateHead checks that m is a manifest of c's job with an id.
func (c *Checkpoints) validateHead(m *messages.Manifest) error {
	switch {
	case m == nil:
		return errors.New("nil manifest")
	case m.GetJob() != c.job:
		return fmt.Errorf("job %q, want %q", m.GetJob(), c.job)
	case m.GetCheckpointId() == 0:
		return errors.New("checkpoint id 0; ids start at 1")
	}
	return nil
}

// validateEntries checks that m's entries name distinct tasks with usable
// handles and key-group ranges that fit the max parallelism. A handle's
// key-group index must pass checkHandleIndex, and its inline bytes, if
// any, must match its size and CRC-32C. The sections it references in
// other objects must lie in states of checkpoints of c's job with an id
// below refsBelow; pass 0 for a savepoint, which references nothing.
func (c *Checkpoints) validateEntries(m *messages.Manifest, refsBelow uint64) error {
	seen := make(map[string]bool, len(m.GetTasks()))
	for _, t := range m.GetTasks() {
		if err := validateTaskID(t.GetTaskId()); err != nil {
			return err
		}
		if seen[t.GetTaskId()] {
			return fmt.Errorf("task %s listed twice", t.GetTaskId())
		}
		seen[t.GetTaskId()] = true
		h := t.GetState()
		if h == nil {
			return fmt.Errorf("task %s has no state handle", t.GetTaskId())
		}
		if err := validateKey(h.GetKey()); err != nil {
			return fmt.Errorf("task %s: %w", t.GetTaskId(), err)
		}
		start, end, maxp := t.GetKeyGroupStart(), t.GetKeyGroupEnd(), m.GetMaxParallelism()
		if start > end || (maxp != 0 && end > maxp) {
			return fmt.Errorf("task %s: key groups [%d,%d) do not fit max parallelism %d", t.GetTaskId(), start, end, maxp)
		}
		if err := c.validateHandle(h, refsBelow); err != nil {
			return fmt.Errorf("task %s: state %s: %w", t.GetTaskId(), h.GetKey(), err)
		}
	}
	return nil
}

// validateHandle checks h's index, inline bytes and references (see
// validateEntries).
func (c *Checkpoints) validateHandle(h *messages.StateHandle, refsBelow uint64) error {
	if len(h.GetInline()) > 0 {
		if err := checkInline(h); err != nil {
			return err
		}
	}
	if !h.GetIndexed() {
		return nil
	}
	if err := checkHandleIndex(h); err != nil {
		return err
	}
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() == "" {
			continue
		}
		if refsBelow == 0 {
			return fmt.Errorf("key group %d references %s: a savepoint is self-contained and references no other object", s.GetKeyGroup(), s.GetKey())
		}
		if err := c.validateRefKey(s.GetKey(), refsBelow); err != nil {
			return fmt.Errorf("key group %d: %w", s.GetKeyGroup(), err)
		}
	}
	return nil
}

// ReadTaskState reads the state that h points at and verifies it: the size
// and CRC-32C recorded in the handle, then the envelope. The bytes come
// from the store, or from the handle itself for an inline state (see
// SetInlineLimit). For an incremental state (see PutTaskStateRefs) it then
// reads the key groups h references in earlier objects, one ranged read
// per run of adjacent sections and the objects in parallel, checks each
// against the CRC-32C and key group of the index, and merges them into
// the state's key groups, in key-group order. Errors wrap ErrNotFound or
// ErrCorrupt and name the object at fault.
func (c *Checkpoints) ReadTaskState(ctx context.Context, h *messages.StateHandle) (*messages.TaskState, error) {
	key := h.GetKey()
	if err := validateKey(key); err != nil {
		return nil, fmt.Errorf("snapshots: state handle: %w", err)
	}
	data, err := c.ownObject(ctx, h)
	if err != nil {
		return nil, err
	}
	st := new(messages.TaskState)
	// The bytes are those the handle describes: their envelope's checksum
	// cannot differ, and is not computed again.
	if err := decodeObject(data, KindTaskState, st, true); err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w", key, err)
	}
	if !h.GetIndexed() {
		return st, nil
	}
	var foreign []*messages.KeyGroupSection
	for _, s := range h.GetKeyGroups() {
		if s.GetKey() != "" {
			foreign = append(foreign, s)
		}
	}
	if len(foreign) == 0 {
		return st, nil
	}
	if err := checkHandleIndex(h); err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w: %w", key, ErrCorrupt, err)
	}
	own := len(st.KeyGroups)
	if _, err := c.streamSections(ctx, h, foreign, func(g *messages.KeyGroupState) error {
		st.KeyGroups = append(st.KeyGroups, g)
		return nil
	}); err != nil {
		return nil, err
	}
	if own != len(h.GetKeyGroups())-len(foreign) {
		return nil, fmt.Errorf("snapshots: state %s: the object holds %d key groups, its index %d: %w", key, own, len(h.GetKeyGroups())-len(foreign), ErrCorrupt)
	}
	sortKeyGroups(st.KeyGroups)
	for i, g := range st.KeyGroups {
		if g.GetKeyGroup() != h.GetKeyGroups()[i].GetKeyGroup() {
			return nil, fmt.Errorf("snapshots: state %s: key group %d, the index says %d: %w", key, g.GetKeyGroup(), h.GetKeyGroups()[i].GetKeyGroup(), ErrCorrupt)
		}
	}
	return st, nil
}

// ownObject returns the bytes of h's own object, from the store or inline,
// checked against h's size and CRC-32C.
func (c *Checkpoints) ownObject(ctx context.Context, h *messages.StateHandle) ([]byte, error) {
	key := h.GetKey()
	if len(h.GetInline()) > 0 {
		if err := checkInline(h); err != nil {
			return nil, fmt.Errorf("snapshots: state %s: %w", key, err)
		}
		return h.GetInline(), nil
	}
	data, err := c.store.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if uint64(len(data)) != h.GetSize() {
		return nil, fmt.Errorf("snapshots: state %s: size %d, want %d: %w", key, len(data), h.GetSize(), ErrCorrupt)
	}
	if got := Checksum(data); got != h.GetCrc32C() {
		return nil, fmt.Errorf("snapshots: state %s: crc32c %08x, want %08x: %w", key, got, h.GetCrc32C(), ErrCorrupt)
	}
	return data, nil
}

// markGood records that c stored the object under key, intact.
func (c *Checkpoints) markGood(key string) {
	c.mu.Lock()
	if c.good == nil {
		c.good = map[string]bool{}
	}
	c.good[key] = true
	c.mu.Unlock()
}
