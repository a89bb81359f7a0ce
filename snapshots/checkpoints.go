package snapshots

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/snapflow/snapflow/messages"
)

// Checkpoints reads and writes the checkpoints of one job in a Store,
// following the layout described in the package documentation. It is safe
// for concurrent use.
type Checkpoints struct {
	store Store
	job   string
	log   *slog.Logger

	mu   sync.Mutex
	refs map[uint64][]string // state keys of manifests read by Retain
}

// NewCheckpoints returns the checkpoints of job in s. Problems that make a
// checkpoint unusable are logged to log; a nil log discards them.
func NewCheckpoints(s Store, job string, log *slog.Logger) *Checkpoints {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Checkpoints{store: s, job: job, log: log.With("job", job)}
}

// Store returns the store that holds the checkpoints.
func (c *Checkpoints) Store() Store { return c.store }

// Job returns the job whose checkpoints c holds.
func (c *Checkpoints) Job() string { return c.job }

// PutTaskState stores a task's state as StateKey(job, id, st.TaskId) and
// returns the handle that the manifest records: the key, the size of the
// stored bytes and their CRC-32C.
func (c *Checkpoints) PutTaskState(ctx context.Context, id uint64, st *messages.TaskState) (*messages.StateHandle, error) {
	if err := validateTaskID(st.GetTaskId()); err != nil {
		return nil, err
	}
	key := StateKey(c.job, id, st.GetTaskId())
	data, err := EncodeObject(KindTaskState, st)
	if err != nil {
		return nil, fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	if err := c.store.Put(ctx, key, data); err != nil {
		return nil, err
	}
	return &messages.StateHandle{Key: key, Size: uint64(len(data)), Crc32C: Checksum(data)}, nil
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
func (c *Checkpoints) PutManifest(ctx context.Context, m *messages.Manifest) error {
	if err := c.validateManifest(m, m.GetCheckpointId()); err != nil {
		return fmt.Errorf("snapshots: put manifest: %w", err)
	}
	key := ManifestKey(c.job, m.GetCheckpointId())
	data, err := EncodeObject(KindManifest, m)
	if err != nil {
		return fmt.Errorf("snapshots: put %s: %w", key, err)
	}
	return c.store.Put(ctx, key, data)
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
// whose entries name distinct tasks with usable handles.
func (c *Checkpoints) validateManifest(m *messages.Manifest, id uint64) error {
	switch {
	case m == nil:
		return errors.New("nil manifest")
	case m.GetJob() != c.job:
		return fmt.Errorf("job %q, want %q", m.GetJob(), c.job)
	case m.GetCheckpointId() == 0:
		return errors.New("checkpoint id 0; ids start at 1")
	case m.GetCheckpointId() != id:
		return fmt.Errorf("checkpoint id %d, want %d", m.GetCheckpointId(), id)
	}
	seen := make(map[string]bool, len(m.GetTasks()))
	for _, t := range m.GetTasks() {
		if err := validateTaskID(t.GetTaskId()); err != nil {
			return err
		}
		if seen[t.GetTaskId()] {
			return fmt.Errorf("task %s listed twice", t.GetTaskId())
		}
		seen[t.GetTaskId()] = true
		if t.GetState() == nil {
			return fmt.Errorf("task %s has no state handle", t.GetTaskId())
		}
		if err := validateKey(t.GetState().GetKey()); err != nil {
			return fmt.Errorf("task %s: %w", t.GetTaskId(), err)
		}
	}
	return nil
}

// ReadTaskState reads the state that h points at and verifies it: the size
// and CRC-32C recorded in the handle, then the envelope. Errors wrap
// ErrNotFound or ErrCorrupt and name the key.
func (c *Checkpoints) ReadTaskState(ctx context.Context, h *messages.StateHandle) (*messages.TaskState, error) {
	key := h.GetKey()
	if err := validateKey(key); err != nil {
		return nil, fmt.Errorf("snapshots: state handle: %w", err)
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
	st := new(messages.TaskState)
	if err := DecodeObject(data, KindTaskState, st); err != nil {
		return nil, fmt.Errorf("snapshots: state %s: %w", key, err)
	}
	return st, nil
}
