package actors_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// diskLog counts the lines of a job's log that are about its state on
// disk, keeping the first few for a failure's message.
type diskLog struct {
	mu    sync.Mutex
	part  []byte // an unfinished line
	lines int
	first []string
}

func (l *diskLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.part = append(l.part, p...)
	for {
		i := bytes.IndexByte(l.part, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(l.part[:i])
		l.part = l.part[i+1:]
		if strings.Contains(line, "disk state") {
			l.lines++
			if len(l.first) < 10 {
				l.first = append(l.first, line)
			}
		}
	}
}

func (l *diskLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines
}

func (l *diskLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.first, "\n")
}

// maxDiskLogLines bounds the log lines about the state on disk over a run
// whose local directory is removed (the target: at most 100 in
// the 60 s after the removal).
const maxDiskLogLines = 100

// stopWithin stops j and fails t unless Stop returns within bound.
func stopWithin(t *testing.T, j *actors.Job, bound time.Duration) {
	t.Helper()
	stopped := make(chan error, 1)
	go func() { stopped <- j.Stop() }()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	select {
	case err := <-stopped:
		if err != nil && !errors.Is(err, actors.ErrStopped) && !errors.As(err, new(*actors.JobError)) {
			t.Errorf("Stop = %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("Stop did not return within %v", bound)
	}
}

// lostDirJob starts a job of a gated source of 1..n, keyed by v%keys
// into a sum per key on disk (two tasks, 256 key groups, memtables of 1
// MiB), and a sink that counts the records the sums pass on, into seen:
// the directory store in storeDir, the databases under stateDir,
// checkpoints on demand, logging to log.
func lostDirJob(t *testing.T, n, keys int64, gate *testsrc.Gate, seen *sinkCount, storeDir, stateDir string, log *diskLog, ev *events) *actors.Job {
	t.Helper()
	store, err := snapshots.NewDir(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	g := topology.New("lostdir", topology.MaxParallelism(256))
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} })
	keyed := topology.KeyBy(src, func(v int64) int64 { return v % keys })
	sums := topology.Process(keyed, "sum", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		sum := topology.Value[int64](s, "sum")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
			x, _ := sum.Get()
			sum.Set(x + v)
			out.Emit(v)
			return nil
		}
	}, topology.Parallelism(2))
	topology.Sink(sums, "sink", func(int64) error { seen.add(); return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(store),
		actors.WithLogger(slog.New(slog.NewTextHandler(log, nil))), actors.WithCheckpointInterval(0),
		actors.WithDiskState(actors.DiskState{Dir: stateDir, MemTableBytes: 1 << 20}),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxFailures: 20, Window: time.Hour}),
		actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	return j
}

// checkpointAndRead completes a checkpoint once the gated source has
// emitted 1..2000, then lets it emit up to 2500 and waits until the sink
// has seen them all: the sums have read the tables that the checkpoint
// flushed, which their databases keep open, and hold the writes since in
// their memtables, which the next checkpoint flushes.
func checkpointAndRead(t *testing.T, j *actors.Job, gate *testsrc.Gate, seen *sinkCount) {
	t.Helper()
	gate.WaitReached(t, 2000)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(seen.at)
	select {
	case <-seen.reached:
	case <-time.After(testTimeout):
		t.Fatalf("the sink saw %d records, want %d", seen.n.Load(), seen.at)
	}
}

// sinkCount counts the records a sink sees, and closes reached at the
// at-th.
type sinkCount struct {
	n       atomic.Int64
	at      int64
	reached chan struct{}
}

func newSinkCount(at int64) *sinkCount { return &sinkCount{at: at, reached: make(chan struct{})} }

func (c *sinkCount) add() {
	if c.n.Add(1) == c.at {
		close(c.reached)
	}
}

// removeDir removes dir, in which a database may be creating files
// meanwhile.
func removeDir(t *testing.T, dir string) {
	t.Helper()
	var err error
	for range 100 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
	}
	t.Fatal(err)
}

// TestDiskDirLostRecovers removes the local directory of the tasks'
// databases (and their local copies) under a running job that has a
// complete checkpoint in the store, as a cleaner of temporary files
// would: the tasks fail as soon as their databases notice, the job
// restores into fresh databases from the store and ends with the state of
// a failure-free run; the log holds a bounded number of lines about it;
// and Stop returns.
func TestDiskDirLostRecovers(t *testing.T) {
	const n, keys = 6000, 1000
	gate := testsrc.NewGate(2000)
	stateDir := filepath.Join(t.TempDir(), "state")
	var log diskLog
	var ev events
	seen := newSinkCount(2500)
	j := lostDirJob(t, n, keys, gate, seen, t.TempDir(), stateDir, &log, &ev)
	defer stopWithin(t, j, time.Minute)
	checkpointAndRead(t, j, gate, seen)
	before, opened := log.count(), diskstate.Opened()
	failed := ev.subscribe()
	removeDir(t, stateDir)
	// The records after the checkpoint are in the memtables: the next
	// checkpoint flushes them, and finds the databases gone.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if id, err := j.Checkpoint(ctx); err == nil {
		t.Fatalf("checkpoint %d completed with the tasks' databases removed", id)
	} else if ctx.Err() != nil {
		t.Fatalf("the checkpoint after the removal did not end within a minute (%d log lines about the disk: %s)", log.count(), log.String())
	}
	e := waitFor(t, failed, "a task failure naming the state on disk", func(e actors.Event) bool {
		return e.Kind == actors.EventTaskFailed && e.Err != nil && strings.Contains(e.Err.Error(), "disk state")
	})
	t.Logf("the task failure: %v", e.Err)
	waitFor(t, failed, "the job running again", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
	gate.SetLimit(n)
	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	select {
	case <-j.Done():
	case <-ctx.Done():
		t.Fatalf("the job did not end within a minute of its recovery (%d log lines about the disk: %s)", log.count(), log.String())
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	if d := diskstate.Opened() - opened; d < 2 {
		t.Errorf("%d databases opened after the removal, want the two sum tasks' fresh ones", d)
	}
	// The local copies went with the directory: the restore read the store.
	if local, downloaded := j.DiskRestoreBytes(); local != 0 || downloaded == 0 {
		t.Errorf("restored %d bytes from local copies and downloaded %d, want all downloaded", local, downloaded)
	}
	r, err := j.Checkpoints().LoadLatest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !r.Manifest.GetFinal() {
		t.Fatalf("the newest checkpoint %d is not the final one", r.Manifest.GetCheckpointId())
	}
	if got := diskSums(t, j.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
		t.Fatal("the final sums differ from those of a failure-free run")
	}
	after := log.count()
	t.Logf("log lines about the disk: %d before the removal, %d after", before, after-before)
	if after-before > maxDiskLogLines {
		t.Errorf("%d log lines about the disk after the removal, want at most %d; the first:\n%s", after-before, maxDiskLogLines, log.String())
	}
}

// TestDiskDirAndStoreLost removes the local directory of the tasks'
// databases and the snapshot store under a running job: the job cannot
// recover, and Wait returns an error saying so within a minute; the log
// holds a bounded number of lines about the disk; and Stop returns.
func TestDiskDirAndStoreLost(t *testing.T) {
	const n, keys = 6000, 1000
	gate := testsrc.NewGate(2000)
	stateDir := filepath.Join(t.TempDir(), "state")
	storeDir := filepath.Join(t.TempDir(), "store")
	var log diskLog
	var ev events
	seen := newSinkCount(2500)
	j := lostDirJob(t, n, keys, gate, seen, storeDir, stateDir, &log, &ev)
	defer stopWithin(t, j, time.Minute)
	checkpointAndRead(t, j, gate, seen)
	before := log.count()
	removeDir(t, stateDir)
	removeDir(t, storeDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go func() { _, _ = j.Checkpoint(ctx) }() // finds the databases gone
	select {
	case <-j.Done():
	case <-ctx.Done():
		t.Fatalf("Wait did not return within a minute (%d log lines about the disk: %s)", log.count(), log.String())
	}
	err := j.Wait()
	var je *actors.JobError
	if !errors.As(err, &je) {
		t.Fatalf("Wait = %v, want a *JobError", err)
	}
	t.Logf("Wait: %v", err)
	for _, want := range []string{"checkpoints are gone", "disk state"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Wait's error does not say %q: %v", want, err)
		}
	}
	if after := log.count(); after-before > maxDiskLogLines {
		t.Errorf("%d log lines about the disk after the removal, want at most %d; the first:\n%s", after-before, maxDiskLogLines, log.String())
	}
}

// TestDiskDirLostStop removes the local directory of the tasks' databases
// under a running job and stops it while a checkpoint finds them gone:
// Stop returns, and no goroutine is left behind (TestMain checks).
func TestDiskDirLostStop(t *testing.T) {
	const n, keys = 6000, 1000
	gate := testsrc.NewGate(2000)
	stateDir := filepath.Join(t.TempDir(), "state")
	var log diskLog
	var ev events
	seen := newSinkCount(2500)
	j := lostDirJob(t, n, keys, gate, seen, t.TempDir(), stateDir, &log, &ev)
	checkpointAndRead(t, j, gate, seen)
	removeDir(t, stateDir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	checked := make(chan error, 1)
	go func() {
		_, err := j.Checkpoint(ctx)
		checked <- err
	}()
	select { // the checkpoint finds the databases gone (or fresh ones)
	case <-checked:
	case <-ctx.Done():
		t.Error("the checkpoint after the removal did not end within a minute")
	}
	stopWithin(t, j, time.Minute)
	select {
	case <-j.Done():
	case <-ctx.Done():
		t.Fatal("the job did not end within a minute of Stop")
	}
	if err := j.Wait(); !errors.Is(err, actors.ErrStopped) {
		t.Errorf("Wait after Stop = %v, want ErrStopped", err)
	}
}
