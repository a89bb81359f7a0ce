//go:build unix

package actors_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/internal/racedetect"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/filesink"
)

// The second-writer tests run two processes of one job (not a cluster) on
// one store, as a rolling update or a supervisor that restarts a process
// that was only paused would: the second is refused while the first runs,
// or takes the job over on purpose and fences the first, and the file
// sink's committed output holds every record once (issue 20, finding 1).
//
// The processes are this test binary, re-executed in the helper mode of
// TestSecondWriterHelperProcess, selected by the environment below.
const (
	swStoreEnv    = "SNAPFLOW_SECOND_WRITER_STORE" // the store's URL: set only in a child
	swOutEnv      = "SNAPFLOW_SECOND_WRITER_OUT"   // the file sink's directory
	swLimitEnv    = "SNAPFLOW_SECOND_WRITER_LIMIT" // the source's first gate limit
	swTakeOverEnv = "SNAPFLOW_SECOND_WRITER_TAKEOVER"

	swJob = "second-writer"
	swN   = 20_000 // records 1..swN

	// swDeadline bounds every wait for a child's line or exit: generous,
	// a failure bound only.
	swDeadline = 45 * time.Second
)

// Exit codes of the helper process.
const (
	swExitOK        = 0
	swExitFailed    = 1 // Wait returned another error
	swExitSetup     = 2
	swExitRefused   = 3 // Start failed
	swExitLeaseLost = 4 // Wait returned an error wrapping ErrLeaseLost
)

// TestSecondWriterHelperProcess is the child process of the second-writer
// tests; without swStoreEnv it does nothing.
//
// It runs the job "second-writer": a gated source of 1..swN, a keyed
// count (v%13, two tasks) and the exactly-once file sink (two tasks) in
// the directory of swOutEnv, with 20 ms checkpoints and every checkpoint
// retained. The source holds at swLimitEnv until a command on stdin moves
// it: "limit N" (answered by "limit N"), "release" (to the end, answered
// by "released"); "mark" is answered by "mark". It prints "pid P",
// "running C epoch E", "completed C epoch E final F", "aborted C: ERR",
// "task-failed T: ERR", "restoring C epoch E", "finished", then either
// "start-error held=B: ERR" (exit swExitRefused) or "wait-error lost=B:
// ERR" (exit swExitLeaseLost or swExitFailed) or "wait-ok" (exit 0).
func TestSecondWriterHelperProcess(t *testing.T) {
	url := os.Getenv(swStoreEnv)
	if url == "" {
		return
	}
	os.Exit(secondWriterChild(url, os.Getenv(swOutEnv), os.Getenv(swLimitEnv), os.Getenv(swTakeOverEnv) == "1"))
}

func secondWriterChild(url, out, limitText string, takeOver bool) int {
	ctx := context.Background()
	fmt.Printf("pid %d\n", os.Getpid())
	limit, err := strconv.ParseInt(limitText, 10, 64)
	if err != nil || out == "" {
		fmt.Printf("setup-error: limit %q, out %q: %v\n", limitText, out, err)
		return swExitSetup
	}
	store, err := snapshots.Open(ctx, url)
	if err != nil {
		fmt.Printf("setup-error: %v\n", err)
		return swExitSetup
	}
	defer store.Close()
	gate := testsrc.NewGate(limit)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			cmd := sc.Text()
			switch {
			case cmd == "mark":
				fmt.Println("mark")
			case cmd == "release":
				gate.SetLimit(swN)
				fmt.Println("released")
			case strings.HasPrefix(cmd, "limit "):
				n, err := strconv.ParseInt(strings.TrimPrefix(cmd, "limit "), 10, 64)
				if err != nil {
					fmt.Printf("bad-command %q\n", cmd)
					continue
				}
				gate.SetLimit(n)
				fmt.Printf("limit %d\n", n)
			default:
				fmt.Printf("bad-command %q\n", cmd)
			}
		}
	}()

	g := topology.New(swJob)
	src := topology.FromSource(g, "source", func(int, int) topology.Source[int64] { return &testsrc.Gated{N: swN, Gate: gate} })
	keyed := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 13 }), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			c := topology.Value[int64](ks, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				x, _ := c.Get()
				c.Set(x + 1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(2))
	topology.TwoPhaseCommitSink(keyed, "out", filesink.New(out, filesink.Lines(func(v int64) string { return strconv.FormatInt(v, 10) })),
		topology.Parallelism(2))

	opts := []actors.Option{actors.WithStore(store), actors.WithLogger(textLogger(os.Stderr)),
		actors.WithCheckpointInterval(20 * time.Millisecond), actors.WithRetainedCheckpoints(1 << 20),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventRunning:
				fmt.Printf("running %d epoch %d\n", e.Checkpoint, e.Epoch)
			case actors.EventCheckpointCompleted:
				fmt.Printf("completed %d epoch %d final %t\n", e.Checkpoint, e.Epoch, e.Final)
			case actors.EventCheckpointAborted:
				fmt.Printf("aborted %d: %s\n", e.Checkpoint, oneLine(e.Err))
			case actors.EventTaskFailed:
				fmt.Printf("task-failed %s: %s\n", e.Task, oneLine(e.Err))
			case actors.EventRestoring:
				fmt.Printf("restoring %d epoch %d\n", e.Checkpoint, e.Epoch)
			case actors.EventFinished:
				fmt.Println("finished")
			}
		})}
	if takeOver {
		opts = append(opts, actors.WithTakeOver())
	}
	j, err := actors.Start(ctx, g, opts...)
	if err != nil {
		fmt.Printf("start-error held=%t: %s\n", errors.Is(err, snapshots.ErrLeaseHeld), oneLine(err))
		return swExitRefused
	}
	err = j.Wait()
	switch {
	case err == nil:
		fmt.Println("wait-ok")
		return swExitOK
	case errors.Is(err, snapshots.ErrLeaseLost):
		fmt.Printf("wait-error lost=true: %s\n", oneLine(err))
		return swExitLeaseLost
	default:
		fmt.Printf("wait-error lost=false: %s\n", oneLine(err))
		return swExitFailed
	}
}

func oneLine(err error) string {
	if err == nil {
		return "<nil>"
	}
	return strings.ReplaceAll(err.Error(), "\n", " | ")
}

// swProc is a running helper process: its stdout lines as they come, its
// stderr, its exit.
type swProc struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu      sync.Mutex
	lines   []string
	changed chan struct{} // closed and replaced on every new line and at the exit
	exited  bool
	stderr  syncBuilder
}

// swStart starts a helper process of the job on storeURL (env: added to
// its environment) writing to out, its source first held at limit.
func swStart(t *testing.T, name, storeURL string, env []string, out string, limit int64, takeOver bool) *swProc {
	t.Helper()
	env = append(env, swStoreEnv+"="+storeURL, swOutEnv+"="+out, swLimitEnv+"="+strconv.FormatInt(limit, 10))
	if takeOver {
		env = append(env, swTakeOverEnv+"=1")
	}
	return startHelper(t, name, "TestSecondWriterHelperProcess", env)
}

// startHelper starts this test binary running only the test helper, as a
// child process named name with env added to its environment; the child
// is killed at the end of the test, and its output logged if it failed.
func startHelper(t *testing.T, name, helper string, env []string) *swProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+helper+"$", "-test.count=1")
	// protoactor-go's remote races with itself (see racedetect.Foreign,
	// checked below): such a race must not change the exit code.
	// The helper leaves its test's temporary directories behind (it ends
	// with os.Exit, or is killed): they go under this test's, which is
	// removed after the helper has ended.
	cmd.Env = append(append(os.Environ(), racedetect.TolerantEnv, "TMPDIR="+t.TempDir()), env...)
	p := &swProc{name: name, cmd: cmd, changed: make(chan struct{})}
	cmd.Stderr = &p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdin = stdin
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.mu.Lock()
			p.lines = append(p.lines, sc.Text())
			close(p.changed)
			p.changed = make(chan struct{})
			p.mu.Unlock()
		}
		_ = cmd.Wait()
		p.mu.Lock()
		p.exited = true
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL) // works on a stopped process too
		<-waited
		if races := racedetect.Foreign(p.stderr.String()); len(races) > 0 {
			t.Errorf("%s (pid %d) reported a data race:\n%s", p.name, p.pid(), strings.Join(races, "\n"))
		}
		if t.Failed() {
			p.mu.Lock()
			out := strings.Join(p.lines, "\n")
			p.mu.Unlock()
			t.Logf("--- %s (pid %d, %v) stdout:\n%s\n--- stderr:\n%s", p.name, p.pid(), cmd.ProcessState, out, p.stderr.String())
		}
	})
	return p
}

func (p *swProc) pid() int { return p.cmd.Process.Pid }

// send writes a command line to the process's stdin.
func (p *swProc) send(t *testing.T, cmd string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, cmd+"\n"); err != nil {
		t.Fatalf("%s: send %q: %v", p.name, cmd, err)
	}
}

// snapshot returns the lines so far.
func (p *swProc) snapshot() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// await waits for a line at index from or later that matches, and returns
// its index and text; it fails the test if the process exits without one,
// or at swDeadline.
func (p *swProc) await(t *testing.T, from int, what string, match func(string) bool) (int, string) {
	t.Helper()
	deadline := time.NewTimer(swDeadline)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		for i := from; i < len(p.lines); i++ {
			if match(p.lines[i]) {
				line := p.lines[i]
				p.mu.Unlock()
				return i, line
			}
		}
		exited, changed := p.exited, p.changed
		p.mu.Unlock()
		if exited {
			t.Fatalf("%s (pid %d) exited (%v) before %s", p.name, p.pid(), p.cmd.ProcessState, what)
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s (pid %d): no %s within %v", p.name, p.pid(), what, swDeadline)
		}
	}
}

// exit waits for the process to exit and returns its exit code (-1: ended
// by a signal).
func (p *swProc) exit(t *testing.T) int {
	t.Helper()
	deadline := time.NewTimer(swDeadline)
	defer deadline.Stop()
	for {
		p.mu.Lock()
		exited, changed := p.exited, p.changed
		p.mu.Unlock()
		if exited {
			return p.cmd.ProcessState.ExitCode()
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s (pid %d) did not exit within %v", p.name, p.pid(), swDeadline)
		}
	}
}

// swCompleted is a "completed" line.
type swCompleted struct {
	id, epoch uint64
	final     bool
}

func parseCompleted(line string) (swCompleted, bool) {
	var c swCompleted
	if _, err := fmt.Sscanf(line, "completed %d epoch %d final %t", &c.id, &c.epoch, &c.final); err != nil {
		return c, false
	}
	return c, true
}

// completedLines returns the checkpoints that lines report completed.
func completedLines(lines []string) []swCompleted {
	var out []swCompleted
	for _, l := range lines {
		if c, ok := parseCompleted(l); ok {
			out = append(out, c)
		}
	}
	return out
}

// namesPid reports whether s says "pid <pid>", not followed by a digit.
func namesPid(s string, pid int) bool {
	return regexp.MustCompile(`\bpid ` + strconv.Itoa(pid) + `\b`).MatchString(s)
}

func isCompleted(l string) bool { _, ok := parseCompleted(l); return ok }

// swCommitted reads the committed part files of dir (the names that do not
// start with a dot) and checks that they hold every record of 1..swN once;
// it returns the hidden names.
func swCommitted(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(map[int64]int, swN)
	var hidden []string
	total := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			hidden = append(hidden, e.Name())
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			if l == "" {
				continue
			}
			v, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", e.Name(), l, err)
			}
			seen[v]++
			total++
		}
	}
	var missing, dup, foreign []int64
	for v := int64(1); v <= swN; v++ {
		switch seen[v] {
		case 0:
			missing = append(missing, v)
		case 1:
		default:
			dup = append(dup, v)
		}
	}
	for v := range seen {
		if v < 1 || v > swN {
			foreign = append(foreign, v)
		}
	}
	if len(missing) > 0 || len(dup) > 0 || len(foreign) > 0 || total != swN {
		t.Errorf("committed output in %s: %d records in %d files; %d of 1..%d missing (first %v), %d duplicated (first %v), %d out of range (first %v); want each once",
			dir, total, len(entries)-len(hidden), len(missing), swN, head(missing), len(dup), head(dup), len(foreign), head(foreign))
	}
	return hidden
}

// secondWriter runs the scenario on the store at storeURL (env: the
// children's credentials), which verify opens in the test.
func secondWriter(t *testing.T, storeURL string, env []string, verify snapshots.Store) {
	ctx := t.Context()
	out := filepath.Join(t.TempDir(), "out")

	// A runs the job, its source held at a quarter.
	a := swStart(t, "A", storeURL, env, out, swN/4, false)
	aIdx, _ := a.await(t, 0, "a completed checkpoint of A", isCompleted)

	// B, without take-over, is refused at Start, naming A's process.
	b1 := swStart(t, "B (no take-over)", storeURL, env, out, swN/4, false)
	_, refusal := b1.await(t, 0, "B's start error", func(l string) bool {
		return strings.HasPrefix(l, "start-error ") || strings.HasPrefix(l, "running ") || strings.HasPrefix(l, "wait-")
	})
	if !strings.HasPrefix(refusal, "start-error ") {
		t.Fatalf("B, started without take-over while A runs, was not refused at Start: %q", refusal)
	}
	if code := b1.exit(t); code != swExitRefused {
		t.Errorf("B without take-over exited %d, want %d (refused at Start)", code, swExitRefused)
	}
	if !strings.HasPrefix(refusal, "start-error held=true: ") {
		t.Errorf("B without take-over: %q, want an error wrapping snapshots.ErrLeaseHeld", refusal)
	}
	if want := fmt.Sprintf("pid %d", a.pid()); !namesPid(refusal, a.pid()) {
		t.Errorf("B's refusal does not name A's process (%q): %s", want, refusal)
	}
	if !strings.Contains(refusal, "WithTakeOver") {
		t.Errorf("B's refusal does not say how to take over (WithTakeOver): %s", refusal)
	}
	for _, l := range b1.snapshot() {
		if strings.HasPrefix(l, "running ") || isCompleted(l) {
			t.Errorf("B without take-over ran the job: %q", l)
		}
	}
	if l, err := snapshots.NewCheckpoints(verify, swJob, nil).ReadLease(ctx); err != nil {
		t.Fatalf("read the lease after B's refusal: %v", err)
	} else if l.GetPid() != int64(a.pid()) {
		t.Errorf("after B's refusal the lease is held by pid %d (%s), want A's %d", l.GetPid(), l.GetHolder(), a.pid())
	}

	// A is unaffected: it completes a checkpoint after B's refusal (after
	// the mark it prints on request), and is still running.
	a.send(t, "mark")
	mark, _ := a.await(t, aIdx, "A's mark", func(l string) bool { return l == "mark" })
	a.await(t, mark+1, "a checkpoint of A after B's refusal", isCompleted)

	// A moves on to three quarters, and is paused (SIGSTOP) as soon as it
	// has acknowledged: records may still be in flight in it.
	a.send(t, fmt.Sprintf("limit %d", 3*swN/4))
	a.await(t, mark, "A's new limit", func(l string) bool { return l == fmt.Sprintf("limit %d", 3*swN/4) })
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// A was not disturbed by B: no task of it failed, nothing restored.
	for _, l := range a.snapshot() {
		if strings.HasPrefix(l, "task-failed ") || strings.HasPrefix(l, "restoring ") || strings.HasPrefix(l, "wait-") {
			t.Errorf("A, before the takeover: %q", l)
		}
	}
	// Nothing more comes from A until SIGCONT; the lines already in the
	// pipe may still arrive, and are A's before the takeover.
	cont := false
	defer func() {
		if !cont {
			_ = a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()

	// B takes the job over while A is paused, and completes a checkpoint.
	b := swStart(t, "B (take-over)", storeURL, env, out, 3*swN/4, true)
	_, running := b.await(t, 0, "B running", func(l string) bool { return strings.HasPrefix(l, "running ") })
	var bRestored, bEpoch uint64
	if _, err := fmt.Sscanf(running, "running %d epoch %d", &bRestored, &bEpoch); err != nil {
		t.Fatalf("B: %q: %v", running, err)
	}
	b.await(t, 0, "a checkpoint of B", isCompleted)
	if l, err := snapshots.NewCheckpoints(verify, swJob, nil).ReadLease(ctx); err != nil {
		t.Fatalf("read the lease after the takeover: %v", err)
	} else if l.GetPid() != int64(b.pid()) || l.GetTakenFrom() == "" {
		t.Errorf("after the takeover the lease is held by pid %d (%s, taken from %q), want B's %d, taken from A", l.GetPid(), l.GetHolder(), l.GetTakenFrom(), b.pid())
	}

	// A resumes: it ends with ErrLeaseLost, naming B, and completed no
	// checkpoint after the takeover.
	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	cont = true
	// A checkpoint A reports complete above the one B restored is one it
	// completed after the takeover: fail on it at once.
	_, aEnd := a.await(t, 0, "A's end", func(l string) bool {
		c, ok := parseCompleted(l)
		return strings.HasPrefix(l, "wait-") || (ok && c.id > bRestored)
	})
	if c, ok := parseCompleted(aEnd); ok {
		t.Fatalf("A, resumed, reported checkpoint %d (epoch %d) complete, above checkpoint %d that B restored at the takeover", c.id, c.epoch, bRestored)
	}
	if code := a.exit(t); code != swExitLeaseLost {
		t.Errorf("A exited %d after the takeover, want %d (Wait fails with ErrLeaseLost)", code, swExitLeaseLost)
	}
	if !strings.HasPrefix(aEnd, "wait-error lost=true: ") {
		t.Errorf("A ended with %q, want an error wrapping snapshots.ErrLeaseLost", aEnd)
	}
	if want := fmt.Sprintf("pid %d", b.pid()); !namesPid(aEnd, b.pid()) {
		t.Errorf("A's error does not name B's process (%q): %s", want, aEnd)
	}
	aDone := completedLines(a.snapshot())
	var aLast uint64
	for _, c := range aDone {
		aLast = max(aLast, c.id)
		// B listed the store after A was paused: every checkpoint A had
		// completed by then is at or below the one B restored; one above
		// it A completed after the takeover.
		if c.id > bRestored {
			t.Errorf("A reported checkpoint %d (epoch %d) complete, above checkpoint %d that B restored at the takeover", c.id, c.epoch, bRestored)
		}
	}
	if bRestored < aLast || bRestored == 0 {
		t.Errorf("B restored checkpoint %d, want A's newest, %d, or later", bRestored, aLast)
	}
	for _, l := range a.snapshot() {
		if l == "finished" {
			t.Errorf("A reported the job finished")
		}
	}

	// B runs to the end.
	b.send(t, "release")
	b.await(t, 0, "B's end", func(l string) bool { return strings.HasPrefix(l, "wait-") })
	if code := b.exit(t); code != swExitOK {
		t.Fatalf("B exited %d, want 0", code)
	}
	bDone := completedLines(b.snapshot())
	if len(bDone) == 0 || !bDone[len(bDone)-1].final {
		t.Errorf("B's last completed checkpoint is not final: %+v", bDone)
	}

	// Every checkpoint B completed verifies, and is B's (its epoch).
	cps := snapshots.NewCheckpoints(verify, swJob, nil)
	for _, c := range bDone {
		if c.id <= bRestored {
			t.Errorf("B completed checkpoint %d, not above the one it restored, %d", c.id, bRestored)
		}
		r, err := cps.LoadCheckpoint(ctx, c.id)
		if err != nil {
			t.Errorf("checkpoint %d that B completed does not verify: %v", c.id, err)
			continue
		}
		if r.Manifest.GetEpoch() != c.epoch || r.Manifest.GetEpoch() < bEpoch {
			t.Errorf("checkpoint %d is of epoch %d; B completed it in epoch %d, ran from epoch %d", c.id, r.Manifest.GetEpoch(), c.epoch, bEpoch)
		}
	}
	infos, err := cps.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := map[uint64]snapshots.Info{}
	for _, in := range infos {
		listed[in.ID] = in
		if in.Err != nil {
			t.Logf("listed checkpoint %d: %v", in.ID, in.Err)
		}
	}
	for _, c := range bDone {
		if in, ok := listed[c.id]; !ok || !in.Complete || in.Err != nil {
			t.Errorf("List: checkpoint %d of B: %+v (listed %t), want complete without error", c.id, in, ok)
		}
	}
	if rp, err := cps.LoadLatest(ctx); err != nil || rp == nil {
		t.Errorf("LoadLatest: %v, %v", rp, err)
	} else if last := bDone[len(bDone)-1]; rp.Manifest.GetCheckpointId() != last.id {
		t.Errorf("LoadLatest: checkpoint %d, want B's final %d", rp.Manifest.GetCheckpointId(), last.id)
	}

	hidden := swCommitted(t, out)
	t.Logf("A (pid %d) completed %d checkpoints (newest %d); B (pid %d) restored %d in epoch %d and completed %d (%d..%d); in-progress files left: %v",
		a.pid(), len(aDone), aLast, b.pid(), bRestored, bEpoch, len(bDone), bDone[0].id, bDone[len(bDone)-1].id, hidden)
}

// TestSecondWriterDir: two processes of one job on one directory store.
// A second process is refused at Start while the first runs, naming it,
// and the first is unaffected; a second that takes the job over while the
// first is paused fences it: the first, resumed, fails with ErrLeaseLost
// without completing a checkpoint, every checkpoint of the second
// verifies, and the file sink's committed output holds 1..N once.
func TestSecondWriterDir(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	verify, err := snapshots.NewDir(store)
	if err != nil {
		t.Fatal(err)
	}
	secondWriter(t, store, nil, verify)
}

// TestSecondWriterMinIO is TestSecondWriterDir on a MinIO store.
func TestSecondWriterMinIO(t *testing.T) {
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "second")
	secondWriter(t, srv.URL("second", "writer"), srv.Env(), srv.Store(t, "second", "writer"))
}
