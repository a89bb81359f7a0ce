package actors_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// paritySumJob is a gated source keyed by parity into a sum of parallelism 2,
// failing once on each value of fail.
func paritySumJob(name string, n int64, gate *testsrc.Gate, fail *failures) (*topology.Graph, *latest) {
	g := topology.New(name)
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: n, Gate: gate} })
	out := newLatest()
	topology.Sink(keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % 2 }), "sum", 2, fail), "sink", out.put)
	return g, out
}

func parityWant(n int64) map[int64]int64 {
	return map[int64]int64{0: paritySum(n, 0), 1: paritySum(n, 1)}
}

// hookStore calls before ahead of the first Put whose key contains match.
type hookStore struct {
	snapshots.Store
	match  string
	once   sync.Once
	before func()
}

func (h *hookStore) Put(ctx context.Context, key string, data []byte) error {
	if strings.Contains(key, h.match) {
		h.once.Do(h.before)
	}
	return h.Store.Put(ctx, key, data)
}

// TestMinIOStoppedMidCheckpoint stops MinIO while a checkpoint uploads: the
// checkpoint is aborted, the job keeps processing, and once MinIO is back a
// later checkpoint completes and the results are exact.
func TestMinIOStoppedMidCheckpoint(t *testing.T) {
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "mid")
	const n = 40_000
	gate := testsrc.NewGate(1000)
	hook := &hookStore{Store: srv.Store(t, "mid", "run"), match: "chk-00000000000000000002/"}
	hook.before = func() { srv.Stop() } // checkpoint 2 is triggered, its state is about to upload
	g, out := paritySumJob("mid", n, gate, nil)
	var ev events
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(hook), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithCheckpointTimeout(3*time.Second),
		actors.WithTolerableCheckpointFailures(-1), actors.WithListener(ev.listen))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatalf("checkpoint 1 with MinIO up: %v", err)
	}
	if id, err := j.Checkpoint(context.Background()); err == nil {
		t.Fatalf("checkpoint %d completed while MinIO was down", id)
	}
	gate.SetLimit(5000) // the job keeps processing with MinIO down
	gate.WaitReached(t, 5000)
	srv.Restart(t)
	// A checkpoint completes once MinIO is back; on a loaded machine the
	// first may still time out, and failures are tolerated.
	var id uint64
	for attempt := 1; ; attempt++ {
		if id, err = j.Checkpoint(context.Background()); err == nil {
			break
		}
		if attempt == 20 {
			t.Fatalf("no checkpoint completed in %d attempts after MinIO came back: %v", attempt, err)
		}
	}
	if id <= 2 {
		t.Fatalf("checkpoint id %d, want > 2", id)
	}
	gate.SetLimit(n)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if ev.count(actors.EventCheckpointAborted) < 1 || ev.count(actors.EventRestoring) != 0 {
		t.Fatalf("aborted %d, restores %d: want an abort and no restore", ev.count(actors.EventCheckpointAborted), ev.count(actors.EventRestoring))
	}
	assertEqualMaps(t, "final state", finalTotals(t, hook.Store, "mid", "sum"), parityWant(n))
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// TestMinIODownDuringRecovery fails a task while MinIO is down: the restore
// is retried by the restart strategy and succeeds once MinIO is back.
func TestMinIODownDuringRecovery(t *testing.T) {
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "down")
	const n = 40_000
	gate := testsrc.NewGate(1000)
	g, out := paritySumJob("down", n, gate, newFailures(1500))
	var ev events
	failedRestore := ev.subscribe()
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(srv.Store(t, "down", "")), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond, MaxFailures: 1000, Window: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	cp, err := j.Checkpoint(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	gate.SetLimit(n) // record 1500 fails a task; its restore cannot reach MinIO
	waitFor(t, failedRestore, "a failed restore", func(e actors.Event) bool {
		return e.Kind == actors.EventTaskFailed && e.Err != nil && strings.Contains(e.Err.Error(), "restore")
	})
	srv.Restart(t)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	if r := ev.of(actors.EventRestoring); len(r) != 1 || r[0].Checkpoint != cp {
		t.Fatalf("restores %+v, want one from checkpoint %d", r, cp)
	}
	assertEqualMaps(t, "final state", finalTotals(t, srv.Store(t, "down", ""), "down", "sum"), parityWant(n))
	assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
}

// TestMinIONeverReturns: when MinIO stays down, the job fails once its
// restart strategy is exhausted, and says why.
func TestMinIONeverReturns(t *testing.T) {
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "gone")
	gate := testsrc.NewGate(1000)
	g, _ := paritySumJob("gone", 10_000, gate, newFailures(1500))
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(srv.Store(t, "gone", "")), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(0),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, MaxFailures: 2, Window: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	gate.WaitReached(t, 1000)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	gate.SetLimit(10_000)
	err = waitJob(t, j)
	var je *actors.JobError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "restart strategy exhausted") || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("Wait: %v, want a JobError about the failed restore", err)
	}
	if strings.Contains(err.Error(), srv.SecretKey()) {
		t.Fatal("the error shows the secret key")
	}
}

// TestMinIOCorruptObjectFallsBack damages the newest checkpoint in the
// bucket (garbage in one object, another deleted): recovery logs it and uses
// the previous checkpoint, and the results are still exact.
func TestMinIOCorruptObjectFallsBack(t *testing.T) {
	for _, damage := range []string{"garbage", "missing"} {
		t.Run(damage, func(t *testing.T) {
			srv := miniotest.Start(t)
			srv.MakeBucket(t, "bad")
			store := srv.Store(t, "bad", "p")
			const n = 40_000
			gate := testsrc.NewGate(1000)
			g, out := paritySumJob("bad", n, gate, newFailures(3000))
			var logs syncBuilder
			var ev events
			j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(textLogger(&logs)),
				actors.WithCheckpointInterval(0), actors.WithListener(ev.listen))
			if err != nil {
				t.Fatal(err)
			}
			older, newer := twoCheckpoints(t, j, gate)
			key := stateKey(t, store, "bad", newer, "sum#1")
			ctx := context.Background()
			if damage == "garbage" {
				err = store.Put(ctx, key, []byte("not a task state"))
			} else {
				err = store.Delete(ctx, key)
			}
			if err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(n) // record 3000 fails a task
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			if r := ev.of(actors.EventRestoring); len(r) != 1 || r[0].Checkpoint != older {
				t.Fatalf("restores %+v, want one from checkpoint %d", r, older)
			}
			if !strings.Contains(logs.String(), key) {
				t.Errorf("the log does not name %s:\n%s", key, logs.String())
			}
			assertEqualMaps(t, "final state", finalTotals(t, store, "bad", "sum"), parityWant(n))
			assertEqualMaps(t, "sink", out.snapshot(), parityWant(n))
		})
	}
}

type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// killChildEnv makes the test binary run killedJob instead of the tests;
// killHoldEnv makes its source stop half-way; killDiskEnv keeps its state
// on disk, in the directory it names, and with killHoldEnv blocks the
// upload of a database file of a later checkpoint until the kill.
const (
	killChildEnv = "SNAPFLOW_KILL_CHILD_STORE"
	killHoldEnv  = "SNAPFLOW_KILL_CHILD_HOLD"
	killDiskEnv  = "SNAPFLOW_KILL_CHILD_DISK"
)

// TestKilledProcessResumes SIGKILLs a process running a job on MinIO; a fresh
// process with the same job name resumes from the newest complete checkpoint
// and the final state is exact. In disk-mid-upload, the state is on disk
// with incremental checkpoints, and the process is killed while it stores
// a database file of a checkpoint; the second process runs on the same
// directory (the killed one's local copies, databases and checkpoint
// directories are there).
func TestKilledProcessResumes(t *testing.T) {
	if url := os.Getenv(killChildEnv); url != "" {
		killedJob(url)
		return
	}
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "kill")
	t.Run("heap", func(t *testing.T) { killAndResume(t, srv, "proc", "") })
	t.Run("disk-mid-upload", func(t *testing.T) { killAndResume(t, srv, "disk", t.TempDir()) })
}

// killAndResume runs the job in a child process until it has completed
// two checkpoints (and, on disk, is storing a database file of a later
// one), kills it, and runs it again to its end.
func killAndResume(t *testing.T, srv *miniotest.Server, prefix, disk string) {
	url := srv.URL("kill", prefix)
	first := startChild(t, srv, url, true, disk)
	resumedFrom := uint64(0)
	uploading := ""
	for line := range first.lines {
		if strings.HasPrefix(line, "completed ") {
			resumedFrom, _ = strconv.ParseUint(strings.Fields(line)[1], 10, 64)
		}
		if strings.HasPrefix(line, "uploading ") {
			uploading = strings.TrimPrefix(line, "uploading ")
		}
		if resumedFrom >= 2 && (disk == "" || uploading != "") {
			break
		}
	}
	if resumedFrom < 2 || (disk != "" && uploading == "") {
		t.Fatalf("the first process ended before two checkpoints and an upload of a database file: %v", first.wait())
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := first.wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("first process: %v, want killed", err)
	}
	store := srv.Store(t, "kill", prefix)
	if uploading != "" {
		if _, err := store.Get(context.Background(), uploading); !errors.Is(err, snapshots.ErrNotFound) {
			t.Fatalf("the file whose upload the kill cut: %v, want not found", err)
		}
	}

	second := startChild(t, srv, url, false, disk)
	var running string
	for line := range second.lines {
		if strings.HasPrefix(line, "running ") && running == "" {
			running = line
		}
	}
	if err := second.wait(); err != nil {
		t.Fatalf("second process: %v", err)
	}
	from, _ := strconv.ParseUint(strings.TrimPrefix(running, "running "), 10, 64)
	if from < resumedFrom {
		t.Fatalf("second process started from checkpoint %d (%q), want at least %d", from, running, resumedFrom)
	}
	want := parityWant(killedN)
	if disk != "" {
		want = wantSums(killedN, killedDiskKeys)
	}
	assertEqualMaps(t, "final state", finalTotals(t, store, "killed", "sum"), want)
}

const (
	killedN = 400_000
	// killedDiskKeys is the number of keys of the job on disk.
	killedDiskKeys = 1_000
)

type child struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan error
}

func (c *child) wait() error { return <-c.done }

// startChild runs killedJob in a child process; a held child's source stops
// half-way and waits to be killed, so the kill never comes too late.
func startChild(t *testing.T, srv *miniotest.Server, url string, hold bool, disk string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledProcessResumes$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), srv.Env()...), killChildEnv+"="+url)
	if hold {
		cmd.Env = append(cmd.Env, killHoldEnv+"=1")
	}
	if disk != "" {
		cmd.Env = append(cmd.Env, killDiskEnv+"="+disk)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 1024), done: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
		c.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return c
}

// killedJob is the child process: the parity job over 1..killedN with a
// checkpoint every 20ms; a held child stops half-way, so that it is still
// running when the parent kills it, whatever the machine's speed. It prints
// "running <checkpoint>" and "completed <id>" lines. On disk, its sum has
// killedDiskKeys keys and incremental checkpoints; a held child prints
// "uploading <key>" when it begins to store a database file of a
// checkpoint after the second completed, and never ends that upload.
func killedJob(url string) {
	ctx := context.Background()
	var store snapshots.Store
	store, err := snapshots.Open(ctx, url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(2)
	}
	g := topology.New("killed")
	limit := int64(killedN)
	hold := os.Getenv(killHoldEnv) != ""
	if hold {
		limit = killedN / 2 // and wait there to be killed
	}
	keys := int64(2)
	var completed atomic.Uint64
	opts := []actors.Option{actors.WithCheckpointInterval(20 * time.Millisecond),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventRunning:
				fmt.Printf("running %d\n", e.Checkpoint)
			case actors.EventCheckpointCompleted:
				completed.Store(e.Checkpoint)
				fmt.Printf("completed %d\n", e.Checkpoint)
			}
		})}
	if dir := os.Getenv(killDiskEnv); dir != "" {
		keys = killedDiskKeys
		opts = append(opts, actors.WithDiskState(actors.DiskState{Dir: dir}), actors.WithIncrementalCheckpoints(4), actors.WithInlineStateLimit(0))
		if hold {
			store = &blockFiles{Store: store, after: &completed}
		}
	}
	gate := testsrc.NewGate(limit)
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: killedN, Gate: gate} })
	topology.Sink(keyedSum(topology.KeyBy(src, func(v int64) int64 { return v % keys }), "sum", 2, nil), "sink", func(kv) error { return nil })
	if err := actors.Run(ctx, g, append(opts, actors.WithStore(store))...); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// blockFiles is a store whose first Put of a database file of a
// checkpoint later than the second completed prints "uploading <key>" and
// never returns: the process is killed mid-upload.
type blockFiles struct {
	snapshots.Store
	after *atomic.Uint64
	once  sync.Once
}

func (b *blockFiles) Put(ctx context.Context, key string, data []byte) error {
	if id, _, ok := snapshots.ParseStateFileKey("killed", key); ok && b.after.Load() >= 2 && id > b.after.Load() {
		b.once.Do(func() { fmt.Printf("uploading %s\n", key) })
		select {} // until killed
	}
	return b.Store.Put(ctx, key, data)
}
