package snapshots_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// panickyStore is a user-written Store with a bug: the method named in
// panicIn panics with value.
type panickyStore struct {
	*snapshots.Mem
	panicIn string
	value   any
}

func (p *panickyStore) maybePanic(method string) {
	if p.panicIn == method {
		panic(p.value)
	}
}

func (p *panickyStore) String() string { return "panicky://test" }

func (p *panickyStore) Put(ctx context.Context, key string, data []byte) error {
	p.maybePanic("Put")
	return p.Mem.Put(ctx, key, data)
}

func (p *panickyStore) Get(ctx context.Context, key string) ([]byte, error) {
	p.maybePanic("Get")
	return p.Mem.Get(ctx, key)
}

func (p *panickyStore) List(ctx context.Context, prefix string) ([]string, error) {
	p.maybePanic("List")
	return p.Mem.List(ctx, prefix)
}

func (p *panickyStore) Delete(ctx context.Context, key string) error {
	p.maybePanic("Delete")
	return p.Mem.Delete(ctx, key)
}

func (p *panickyStore) Create(ctx context.Context, key string, data []byte) error {
	p.maybePanic("Create")
	return p.Mem.Create(ctx, key, data)
}

func (p *panickyStore) Check(ctx context.Context) error {
	p.maybePanic("Check")
	return p.Mem.Check(ctx)
}

// batchStore is a panickyStore with a batch delete that counts its calls.
type batchStore struct {
	*panickyStore
	batches atomic.Int64
}

func (b *batchStore) DeleteMany(ctx context.Context, keys []string) error {
	b.maybePanic("DeleteMany")
	b.batches.Add(1)
	for _, k := range keys {
		if err := b.Mem.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

var errBug = errors.New("bug in the user's store")

// TestStorePanicBecomesError calls every Checkpoints operation on stores
// whose methods panic, on goroutines of their own as the runtime's upload
// and retention goroutines do: each panic must come back as an error that
// wraps ErrStorePanic and names the store, the method and the value.
func TestStorePanicBecomesError(t *testing.T) {
	ops := map[string][]struct {
		name string
		op   func(ctx context.Context, c *snapshots.Checkpoints) error
	}{
		"Put": {
			{"PutTaskState", func(ctx context.Context, c *snapshots.Checkpoints) error {
				_, err := c.PutTaskState(ctx, 9, &messages.TaskState{Job: "job", TaskId: "a#0", CheckpointId: 9})
				return err
			}},
		},
		"Create": {
			{"PutManifest", func(ctx context.Context, c *snapshots.Checkpoints) error {
				return c.PutManifest(ctx, &messages.Manifest{Job: "job", CheckpointId: 9})
			}},
		},
		"Get": {
			{"LoadLatest", func(ctx context.Context, c *snapshots.Checkpoints) error {
				_, err := c.LoadLatest(ctx)
				return err
			}},
			{"Verify", func(ctx context.Context, c *snapshots.Checkpoints) error { return c.Verify(ctx, 2) }},
		},
		"List": {
			{"MaxID", func(ctx context.Context, c *snapshots.Checkpoints) error {
				_, err := c.MaxID(ctx)
				return err
			}},
			{"Retain", func(ctx context.Context, c *snapshots.Checkpoints) error { return c.Retain(ctx, 1, 4) }},
			{"DeleteIncomplete", func(ctx context.Context, c *snapshots.Checkpoints) error {
				_, err := c.DeleteIncomplete(ctx, 4)
				return err
			}},
		},
		"Delete": {
			{"Delete", func(ctx context.Context, c *snapshots.Checkpoints) error { return c.Delete(ctx, 1) }},
			{"Retain", func(ctx context.Context, c *snapshots.Checkpoints) error { return c.Retain(ctx, 1, 4) }},
		},
		"DeleteMany": {
			{"Retain", func(ctx context.Context, c *snapshots.Checkpoints) error { return c.Retain(ctx, 1, 4) }},
		},
		"Check": {
			{"Check", func(ctx context.Context, c *snapshots.Checkpoints) error { return c.Check(ctx) }},
		},
	}
	for method, cases := range ops {
		for _, tc := range cases {
			for _, value := range []any{"index out of range", errBug} {
				t.Run(method+"/"+tc.name, func(t *testing.T) {
					mem := snapshots.NewMem()
					for id := range uint64(3) { // Retain keeps 3 and its fallback 2
						writeCheckpoint(t, snapshots.NewCheckpoints(mem, "job", nil), id+1, "a#0", "b#0")
					}
					var s snapshots.Store = &panickyStore{Mem: mem, panicIn: method, value: value}
					if method == "DeleteMany" {
						s = &batchStore{panickyStore: s.(*panickyStore)}
					}
					var logs bufLog
					c := snapshots.NewCheckpoints(s, "job", slog.New(slog.NewTextHandler(&logs, nil)))
					res := make(chan error, 1)
					go func() { res <- tc.op(t.Context(), c) }()
					err := waitResult(t, res)
					if !errors.Is(err, snapshots.ErrStorePanic) {
						t.Fatalf("%s = %v, want ErrStorePanic", tc.name, err)
					}
					if e, ok := value.(error); ok && !errors.Is(err, e) {
						t.Errorf("error %v does not wrap the panic's error", err)
					}
					msg := err.Error()
					for _, want := range []string{"panicky://test", method, errString(value)} {
						if !strings.Contains(msg, want) {
							t.Errorf("error %q does not name %q", msg, want)
						}
					}
					log := logs.String()
					if !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "stack=") ||
						!strings.Contains(log, "maybePanic") {
						t.Errorf("no stack of the panic logged at Error:\n%s", log)
					}
				})
			}
		}
	}
}

func errString(v any) string {
	if e, ok := v.(error); ok {
		return e.Error()
	}
	return v.(string)
}

// TestGuardKeepsBatchDelete checks that retention still deletes through the
// store's BatchDeleter behind the guard, and that Store returns the store
// as given.
func TestGuardKeepsBatchDelete(t *testing.T) {
	b := &batchStore{panickyStore: &panickyStore{Mem: snapshots.NewMem()}}
	c := snapshots.NewCheckpoints(b, "job", nil)
	for id := range uint64(3) {
		writeCheckpoint(t, c, id+1, "a#0", "b#0")
	}
	if err := c.Retain(t.Context(), 1, 4); err != nil {
		t.Fatal(err)
	}
	if b.batches.Load() != 1 {
		t.Errorf("Retain made %d batch deletes, want 1", b.batches.Load())
	}
	keys, err := b.List(t.Context(), "")
	if err != nil || len(keys) != 6 {
		t.Errorf("after Retain: %q, %v; want the 3 objects of checkpoints 2 and 3", keys, err)
	}
	if c.Store() != snapshots.Store(b) {
		t.Errorf("Store() = %v, want the store given", c.Store())
	}
}

// TestGuardNilStore checks that a nil store fails each operation with an
// error instead of a crash.
func TestGuardNilStore(t *testing.T) {
	var d *snapshots.Dir
	c := snapshots.NewCheckpoints(d, "job", nil)
	if _, err := c.LoadLatest(t.Context()); !errors.Is(err, snapshots.ErrStorePanic) {
		t.Errorf("LoadLatest on a nil *Dir = %v, want ErrStorePanic", err)
	}
	if err := c.Check(t.Context()); !errors.Is(err, snapshots.ErrStorePanic) {
		t.Errorf("Check on a nil *Dir = %v, want ErrStorePanic", err)
	}
}
