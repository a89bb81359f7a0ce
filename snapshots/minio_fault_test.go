package snapshots_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
)

// waitLimit bounds every wait on a channel in these tests.
const waitLimit = 60 * time.Second

// retries records the retries of a store and reports the first.
type retries struct {
	n     atomic.Int64
	first chan error
	once  sync.Once
}

func watchRetries(s *snapshots.MinIO) *retries {
	r := &retries{first: make(chan error, 1)}
	snapshots.SetMinIORetryHook(s, func(_ string, _ int, err error) {
		r.n.Add(1)
		r.once.Do(func() { r.first <- err })
	})
	return r
}

func (r *retries) waitFirst(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.first:
		return err
	case <-time.After(waitLimit):
		t.Fatal("no retry observed")
		return nil
	}
}

func waitResult(t *testing.T, res <-chan error) error {
	t.Helper()
	select {
	case err := <-res:
		return err
	case <-time.After(waitLimit):
		t.Fatal("the operation did not return")
		return nil
	}
}

// TestMinIORetryAcrossRestart stops the server, starts a Put, restarts the
// server once the Put has failed once, and expects the Put to succeed.
func TestMinIORetryAcrossRestart(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	cfg := srv.Config("retry", "p")
	cfg.MaxRetries, cfg.RetryBackoff = 1000, 10*time.Millisecond
	s, err := snapshots.NewMinIO(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r := watchRetries(s)
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	data := bytes.Repeat([]byte("state"), 1000)
	res := make(chan error, 1)
	go func() { res <- s.Put(ctx, "chk/1", data) }()
	t.Logf("first failure: %v", r.waitFirst(t)) // refused, or a broken kept-alive connection
	srv.Restart(t)
	if err := waitResult(t, res); err != nil {
		t.Fatalf("Put across a restart: %v", err)
	}
	if got, err := s.Get(t.Context(), "chk/1"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("Get after the restart = %d bytes, %v; want the %d put", len(got), err, len(data))
	}
	t.Logf("Put succeeded after %d retries", r.n.Load())
}

// TestMinIORetryBounded checks that a dead server costs MaxRetries
// retries, then a clear error.
func TestMinIORetryBounded(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	cfg := srv.Config("bounded", "p")
	cfg.MaxRetries, cfg.RetryBackoff = 2, time.Millisecond
	s, err := snapshots.NewMinIO(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := watchRetries(s)
	srv.Stop()
	err = s.Put(t.Context(), "k", []byte("v"))
	if !errors.Is(err, snapshots.ErrUnreachable) || !strings.Contains(err.Error(), "put k") {
		t.Errorf("Put to a stopped server: %v, want ErrUnreachable naming the key", err)
	}
	if n := r.n.Load(); n != 2 {
		t.Errorf("%d retries, want MaxRetries = 2", n)
	}
	noSecret(t, err.Error(), srv.SecretKey())
	if err := s.Close(); err != nil {
		t.Error(err)
	}
}

// TestMinIOPermanentNotRetried checks that 4xx answers are not retried.
func TestMinIOPermanentNotRetried(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "perm")
	cfg := srv.Config("perm", "p")
	cfg.SecretKey = "not-the-secret"
	bad, err := snapshots.NewMinIOUnchecked(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bad.Close() })
	r := watchRetries(bad)
	err = bad.Put(t.Context(), "k", []byte("v"))
	if !errors.Is(err, snapshots.ErrAccessDenied) {
		t.Errorf("Put with a wrong secret: %v, want ErrAccessDenied", err)
	}
	noSecret(t, err.Error(), srv.SecretKey(), "not-the-secret")
	good := srv.Store(t, "perm", "p")
	r2 := watchRetries(good)
	if _, err := good.Get(t.Context(), "missing"); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Get missing: %v, want ErrNotFound", err)
	}
	if n := r.n.Load() + r2.n.Load(); n != 0 {
		t.Errorf("%d retries of permanent errors, want none", n)
	}
}

// TestMinIOCancelWhileRetrying cancels a Put that retries against a stopped
// server, and a Get with a deadline, and expects the context's errors.
func TestMinIOCancelWhileRetrying(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	cfg := srv.Config("cancel", "p")
	// Backoffs of at least half an hour: a Put that returns at all (within
	// waitResult's bound) was ended by its context, whatever the machine's speed.
	cfg.MaxRetries, cfg.RetryBackoff = 1000, time.Hour
	s, err := snapshots.NewMinIO(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r := watchRetries(s)
	srv.Stop()
	ctx, cancel := context.WithCancel(t.Context())
	res := make(chan error, 1)
	go func() { res <- s.Put(ctx, "k", []byte("v")) }()
	t.Logf("first failure: %v", r.waitFirst(t))
	cancel() // during a backoff of at least half an hour
	if err := waitResult(t, res); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Put: %v, want context.Canceled", err)
	}
	dctx, dcancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer dcancel()
	if _, err := s.Get(dctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Get past its deadline: %v, want context.DeadlineExceeded", err)
	}
}

// bufLog collects log output.
type bufLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *bufLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *bufLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// tamper writes two complete checkpoints through a MinIO store, lets
// change alter the bucket directly with minio-go, and expects LoadLatest
// to fall back to checkpoint 1 and log an error naming key.
func tamper(t *testing.T, change func(c *minio.Client, object string) error, key string) {
	t.Helper()
	srv := miniotest.Start(t)
	s := srv.Store(t, "tamper", "p")
	var logs bufLog
	c := snapshots.NewCheckpoints(s, "job", slog.New(slog.NewTextHandler(&logs, nil)))
	writeCheckpoint(t, c, 1, "a#0", "b#0")
	writeCheckpoint(t, c, 2, "a#0", "b#0")
	if err := change(srv.Client(t), objectKey(key)); err != nil {
		t.Fatal(err)
	}
	r, err := c.LoadLatest(t.Context())
	if err != nil || r == nil || r.Manifest.GetCheckpointId() != 1 {
		t.Fatalf("LoadLatest = %v, %v; want checkpoint 1", r, err)
	}
	if !strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), key) {
		t.Errorf("no error logged for %s:\n%s", key, logs.String())
	}
}

func TestMinIOGarbageStateFallsBack(t *testing.T) {
	t.Parallel()
	tamper(t, func(c *minio.Client, object string) error {
		garbage := []byte("not a snapflow object")
		_, err := c.PutObject(t.Context(), "tamper", object, bytes.NewReader(garbage), int64(len(garbage)),
			minio.PutObjectOptions{})
		return err
	}, snapshots.StateKey("job", 2, "b#0"))
}

func TestMinIODeletedStateFallsBack(t *testing.T) {
	t.Parallel()
	tamper(t, func(c *minio.Client, object string) error {
		return c.RemoveObject(t.Context(), "tamper", object, minio.RemoveObjectOptions{})
	}, snapshots.StateKey("job", 2, "a#0"))
}

func TestMinIOManifestMissingObjectFallsBack(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	s := srv.Store(t, "ghost", "p")
	var logs bufLog
	c := snapshots.NewCheckpoints(s, "job", slog.New(slog.NewTextHandler(&logs, nil)))
	writeCheckpoint(t, c, 1, "a#0")
	h, err := c.PutTaskState(t.Context(), 2, &messages.TaskState{Job: "job", TaskId: "a#0", CheckpointId: 2})
	if err != nil {
		t.Fatal(err)
	}
	ghost := &messages.StateHandle{Key: snapshots.StateKey("job", 2, "ghost#0"), Size: 10, Crc32C: 7}
	m := &messages.Manifest{Job: "job", CheckpointId: 2, Tasks: []*messages.TaskStateEntry{
		{TaskId: "a#0", State: h}, {TaskId: "ghost#0", State: ghost},
	}}
	if err := c.PutManifest(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	r, err := c.LoadLatest(t.Context())
	if err != nil || r == nil || r.Manifest.GetCheckpointId() != 1 {
		t.Fatalf("LoadLatest = %v, %v; want checkpoint 1", r, err)
	}
	if !strings.Contains(logs.String(), ghost.GetKey()) {
		t.Errorf("no error logged for %s:\n%s", ghost.GetKey(), logs.String())
	}
	if err := c.Verify(t.Context(), 2); !errors.Is(err, snapshots.ErrNotFound) {
		t.Errorf("Verify 2 = %v, want ErrNotFound", err)
	}
}

// TestMinIOConcurrentPutDelete puts and deletes keys that share a
// directory from many goroutines, a pattern for which MinIO's single-drive
// backend sometimes answers 403 AccessDenied; the store retries those.
func TestMinIOConcurrentPutDelete(t *testing.T) {
	t.Parallel()
	srv := miniotest.Start(t)
	s := srv.Store(t, "race", "")
	r := watchRetries(s)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			key := "pd/a/b/k" + strconv.Itoa(w)
			for i := range 100 {
				if err := s.Put(t.Context(), key, []byte(strconv.Itoa(i))); err != nil {
					t.Errorf("Put %s: %v", key, err)
					return
				}
				if err := s.Delete(t.Context(), key); err != nil {
					t.Errorf("Delete %s: %v", key, err)
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d retries", r.n.Load())
}
