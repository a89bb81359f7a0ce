//go:build unix

package chaos

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/internal/racedetect"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// The environment of the processes of TestClusterEventTime: the test
// binary runs itself as a coordinator or a worker when roleEnv is set.
// Every node runs in a process of its own: several protoactor-go nodes in
// one process trip races inside its remote package (internal/racedetect).
const (
	roleEnv      = "SNAPFLOW_CHAOS_ROLE" // "coordinator" or "worker"
	joinEnv      = "SNAPFLOW_CHAOS_JOIN" // a worker's coordinator
	parEnv       = "SNAPFLOW_CHAOS_PAR"
	rowsEnv      = "SNAPFLOW_CHAOS_ROWS"
	storeEnv     = "SNAPFLOW_CHAOS_STORE"
	phaseEnv     = "SNAPFLOW_CHAOS_PHASE"
	secretEnv    = "SNAPFLOW_CHAOS_SECRET"
	nEnv         = "SNAPFLOW_CHAOS_N"
	diskEnv      = "SNAPFLOW_CHAOS_DISK" // set: phase 1 keeps its keyed state on disk
	clusterRate  = 2_000.0               // records/s per source task: a phase lasts seconds
	clusterJob   = "cluster-eventtime"
	clusterSlots = 12 // one worker can run the whole job
)

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "worker":
		os.Exit(workerMain())
	case "coordinator":
		os.Exit(coordinatorMain())
	}
	os.Exit(m.Run())
}

// eventTimeJob builds the event-time shape at parallelism p, over the
// records that nEnv says, as every node of the cluster must.
func eventTimeJob(p int, rows string) func() *topology.Graph {
	n, _ := strconv.ParseInt(os.Getenv(nEnv), 10, 64)
	return func() *topology.Graph {
		g := topology.New(clusterJob)
		EventTime(EventTimeConfig{Dir: rows}).BuildPhase(g, Phase{Parallelism: p}, n, clusterRate, nil, nil)
		return g
	}
}

func childLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// workerMain serves the job as a worker until it ends; the exit status
// says whether it failed.
func workerMain() int {
	p, err := strconv.Atoi(os.Getenv(parEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", parEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = cluster.ServeWorker(ctx, cluster.Worker{Join: os.Getenv(joinEnv), Slots: clusterSlots, Secret: os.Getenv(secretEnv),
		Jobs: []func() *topology.Graph{eventTimeJob(p, os.Getenv(rowsEnv))}, Logger: childLogger(),
		Listening: func(addr string) { fmt.Println("listening", addr) }})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// coordinatorMain runs a phase of the job as its coordinator, printing
// "listening ADDR", then "checkpoint N" and "restoring N" as they happen.
// Phase 0 stops with the savepoint "half" after 5 checkpoints ("savepoint
// N"); phase 1 starts from it and runs to the end ("done").
func coordinatorMain() int {
	p, err := strconv.Atoi(os.Getenv(parEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", parEnv, err)
		return 2
	}
	phase := os.Getenv(phaseEnv)
	var mu sync.Mutex
	say := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	completed := make(chan struct{}, 1024)
	opts := []actors.Option{cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: os.Getenv(storeEnv), Secret: os.Getenv(secretEnv)}),
		actors.WithCheckpointInterval(20 * time.Millisecond), actors.WithLogger(childLogger()),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventCheckpointCompleted:
				say("checkpoint %d", e.Checkpoint)
				select {
				case completed <- struct{}{}:
				default:
				}
			case actors.EventRestoring:
				say("restoring %d", e.Checkpoint)
			case actors.EventPlaced:
				say("placed %s", e.Placement)
			}
		})}
	if phase == "1" {
		opts = append(opts, actors.WithSavepoint("half"))
		if os.Getenv(diskEnv) != "" {
			opts = append(opts, actors.WithDiskState(actors.DiskState{}))
		}
	}
	ctx := context.Background()
	j, err := actors.Start(ctx, eventTimeJob(p, os.Getenv(rowsEnv))(), opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator:", err)
		return 1
	}
	say("listening %s", j.Address())
	if phase == "1" {
		if err := j.Wait(); err != nil {
			fmt.Fprintln(os.Stderr, "coordinator:", err)
			return 1
		}
		say("done")
		return 0
	}
	for range 5 {
		select {
		case <-completed:
		case <-j.Done():
			fmt.Fprintln(os.Stderr, "coordinator: the job ended before 5 checkpoints:", j.Wait())
			return 1
		}
	}
	id, err := j.StopWithSavepoint(ctx, "half")
	if err != nil {
		fmt.Fprintln(os.Stderr, "coordinator: StopWithSavepoint:", err)
		return 1
	}
	if err := j.Wait(); !errors.Is(err, actors.ErrStopped) {
		fmt.Fprintln(os.Stderr, "coordinator: the job ended with", err, "want ErrStopped")
		return 1
	}
	say("savepoint %d", id)
	return 0
}

// proc is a node of the test, a process of the test binary.
type proc struct {
	name   string
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line
	mu     sync.Mutex
	out    []string // stdout and stderr
	placed string   // a coordinator's last placement
	done   chan error
}

func (p *proc) lastPlaced() string { p.mu.Lock(); defer p.mu.Unlock(); return p.placed }

func (p *proc) add(l string) { p.mu.Lock(); p.out = append(p.out, l); p.mu.Unlock() }

func (p *proc) output() []string { p.mu.Lock(); defer p.mu.Unlock(); return slices.Clone(p.out) }

func startProc(t *testing.T, name string, env ...string) *proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: name, cmd: exec.Command(exe, "-test.run=^$"), lines: make(chan string, 4096), done: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), racedetect.TolerantEnv), env...)
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		defer close(p.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.add(sc.Text())
			if rest, ok := strings.CutPrefix(sc.Text(), "placed "); ok {
				p.mu.Lock()
				p.placed = rest
				p.mu.Unlock()
			}
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.add(sc.Text())
		}
	}()
	go func() { wg.Wait(); p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s printed:\n%s", name, strings.Join(p.output(), "\n"))
		}
	})
	return p
}

// await returns the rest of the first stdout line with prefix.
func (p *proc) await(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(5 * time.Minute)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s ended before printing %q", p.name, prefix)
			}
			if rest, found := strings.CutPrefix(l, prefix); found {
				return rest
			}
		case <-timeout:
			t.Fatalf("%s did not print %q", p.name, prefix)
		}
	}
}

// wait waits for the process's exit, fails t unless it exited 0 (unless
// killed), and fails t on a race that is not protoactor-go's own.
func (p *proc) wait(t *testing.T, killed bool) {
	t.Helper()
	select {
	case err := <-p.done:
		if err != nil && !killed {
			t.Errorf("%s: %v", p.name, err)
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("%s did not exit", p.name)
	}
	for _, race := range racedetect.Foreign(strings.Join(p.output(), "\n")) {
		t.Errorf("%s: a data race:\n%s", p.name, race)
	}
}

// TestClusterEventTime runs the event-time shape in cluster mode, every
// node a process: at parallelism 2, stopped with a savepoint that holds
// pending timers after 5 checkpoints; then from the savepoint at
// parallelism 3, where a worker is SIGKILLed once 2 checkpoints of the
// phase have completed, a new one having joined (once in make test, 6
// times with SNAPFLOW_SOAK=full). The rows the exactly-once file sink
// committed must equal the reference.
func TestClusterEventTime(t *testing.T) { clusterEventTime(t, false) }

// TestClusterEventTimeOnDisk is TestClusterEventTime with phase 1's keyed
// state on the workers' disks (actors.WithDiskState): the savepoint of
// phase 0, on the heap, moves the job to disk, at another parallelism,
// and a worker holding tasks is SIGKILLed while checkpoints run.
func TestClusterEventTimeOnDisk(t *testing.T) { clusterEventTime(t, true) }

func clusterEventTime(t *testing.T, disk bool) {
	store, rows := t.TempDir(), t.TempDir()
	n, kills := int64(16_000), 1
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		n, kills = 96_000, 6
	}
	env := []string{storeEnv + "=" + store, rowsEnv + "=" + rows, secretEnv + "=chaos-cluster-event-time", nEnv + "=" + strconv.FormatInt(n, 10)}
	tmp := t.TempDir() // the nodes' cache directory: where the disk backend keeps its databases by default
	if disk {
		env = append(env, diskEnv+"=1", "XDG_CACHE_HOME="+tmp, "TMPDIR="+tmp)
	}
	coordinator := func(phase, p int) (*proc, string) {
		c := startProc(t, fmt.Sprintf("coordinator-%d", phase), append(env, roleEnv+"=coordinator", phaseEnv+"="+strconv.Itoa(phase), parEnv+"="+strconv.Itoa(p))...)
		return c, c.await(t, "listening ")
	}
	addrs := map[*proc]string{}
	worker := func(name, join string, p int) *proc {
		w := startProc(t, "worker-"+name, append(env, roleEnv+"=worker", joinEnv+"="+join, parEnv+"="+strconv.Itoa(p))...)
		addrs[w] = w.await(t, "listening ")
		return w
	}

	// Phase 0: parallelism 2, stopped with a savepoint mid-stream.
	c0, addr := coordinator(0, 2)
	w0 := []*proc{worker("a", addr, 2), worker("b", addr, 2)}
	id := c0.await(t, "savepoint ")
	c0.wait(t, false)
	for _, w := range w0 {
		w.wait(t, false)
	}
	ctx := context.Background()
	dirStore, err := snapshots.NewDir(store)
	if err != nil {
		t.Fatal(err)
	}
	defer dirStore.Close()
	rp, err := snapshots.NewCheckpoints(dirStore, clusterJob, nil).LoadSavepoint(ctx, "half")
	if err != nil {
		t.Fatal(err)
	}
	var res RunResult
	if err := checkTimersPending("half", rp.States, &res); err != nil || res.PendingAtSavepoints == 0 {
		t.Fatalf("savepoint %s: %d pending event-time timers, %v; want some", id, res.PendingAtSavepoints, err)
	}

	// Phase 1: parallelism 3 from the savepoint; a worker is killed.
	c1, addr := coordinator(1, 3)
	live := []*proc{worker("c0", addr, 3), worker("d", addr, 3)}
	var restored []string
	for k := range kills {
		c1.await(t, "checkpoint ")
		c1.await(t, "checkpoint ")
		live = append(live, worker(fmt.Sprintf("c%d", k+1), addr, 3)) // joins while the job runs
		// The victim is the oldest worker that holds tasks.
		placed, v := c1.lastPlaced(), -1
		for i, w := range live {
			if strings.Contains(placed, addrs[w]) {
				v = i
				break
			}
		}
		if v < 0 {
			t.Fatalf("no live worker in the placement %q", placed)
		}
		victim := live[v]
		live = slices.Delete(live, v, v+1)
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		victim.wait(t, true)
		restored = append(restored, c1.await(t, "restoring ")) // after the kill
	}
	c1.await(t, "done")
	c1.wait(t, false)
	for _, w := range live {
		w.wait(t, false)
	}
	if err := verifyEventTime(filepath.Join(rows, "rows"), n, &res); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(tmp, "snapflow", "state")); disk == os.IsNotExist(err) {
		t.Fatalf("on disk %t, but the workers' state directory: %v", disk, err)
	}
	t.Logf("cluster: savepoint %s with %d pending timers; phase 1 restored checkpoints %v after %d worker kills; %d event-time and %d processing-time timers fired, %d late records",
		id, res.PendingAtSavepoints, restored, kills, res.TimersFired, res.ProcTimersFired, res.Late)
}
