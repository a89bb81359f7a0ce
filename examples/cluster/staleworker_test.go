//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors/membership"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/topology/filesink"
)

// Flags of TestStaleWorkerFileSink. Every worker offers 6 slots, as many as
// the job has tasks, so that the one worker left at the end can run them
// all; the heartbeat timeout leaves the coordinator time to place the
// redeploy on the frozen worker before it declares it lost.
const (
	staleSlots            = 6
	staleHeartbeatTimeout = "2s"
)

// TestStaleWorkerFileSink: a worker is SIGSTOPped just as the coordinator
// deploys its tasks of a new epoch E, with the file sink (-sink-dir): the
// sink task of E is placed on it. It stays frozen while the coordinator
// declares it lost, runs epoch E+1 on the worker left and completes a
// checkpoint there; then the sources are released, the sink commits part
// files again, and the frozen worker is resumed (SIGCONT) with the Deploy of
// epoch E waiting in its socket.
//
// The worker must not start any task of the replaced placement: it drops
// them, logs no "running tasks" for E, no sink of it touches the directory
// (no in-progress file of epoch E, no ErrSuperseded anywhere), and the job
// is not disturbed (no failure, no rollback, no aborted checkpoint after
// the resume). The job ends exact, and every record's line is in the
// committed part files once (the coordinator's check, and the test's own).
//
// The worker is frozen right before the coordinator can place epoch E:
// another worker is SIGKILLed just after the SIGSTOP, which forces the
// redeploy, and the frozen worker is still live then (its heartbeat timeout
// has not passed). Freezing it on the coordinator's placement line instead
// would race with the worker starting the tasks. Which worker gets the sink
// in epoch E is computed with the coordinator's placement function
// (membership.Place) from the workers' order of registration, and checked
// against the placement the coordinator reports.
func TestStaleWorkerFileSink(t *testing.T) {
	c := newTestCluster(t)
	sinkDir := filepath.Join(c.dir, "out")
	// Paced so that the records after the hold flow for a while (1.5 s)
	// once released: the worker is resumed while they do.
	job := []string{"-sink-dir", sinkDir, "-rate", "2000"}
	coord, addr := c.startCoordinator("coordinator", "127.0.0.1:0", 3, append(job, "-heartbeat-timeout", staleHeartbeatTimeout)...)
	byAddr := map[string]*child{}
	for i := range 3 {
		w, a := c.startWorker("worker "+strconv.Itoa(i+1), addr, append(job, "-slots", strconv.Itoa(staleSlots), "-register-timeout", "2m")...)
		byAddr[a] = w
	}
	placedAt, placed := c.awaitEvent(coord, 0, "placed", nil)
	first, err := parsePlacement(placed.get("placement"))
	if err != nil {
		t.Fatal(err)
	}
	at, _ := c.awaitEvent(coord, placedAt, "checkpoint-completed", func(e eventLine) bool { return e.get("final") == "false" })

	// The workers in their order of registration, as the coordinator
	// keeps them.
	var live []membership.Worker
	for _, ev := range events(coord, 0) {
		if ev.kind == "node-joined" {
			id, a, _ := strings.Cut(ev.get("node"), "@")
			live = append(live, membership.Worker{ID: id, Addr: a, Slots: staleSlots})
		}
	}
	if len(live) != 3 {
		t.Fatalf("%d workers joined, want 3", len(live))
	}
	// Kill the worker that joined first; the placement of the two left
	// says which one runs the sink in the next epoch: freeze that one.
	victim := live[0]
	if len(first.tasksOn(victim.Addr)) == 0 {
		t.Fatalf("the first worker, %s, runs no task in epoch 1's placement %s: killing it forces no redeploy", victim, placed.get("placement"))
	}
	sinkOn := staleSinkWorker(t, live[1:])
	killed, frozen := byAddr[victim.Addr], byAddr[sinkOn.Addr]
	var other *child
	for _, w := range live[1:] {
		if w.Addr != sinkOn.Addr {
			other = byAddr[w.Addr]
		}
	}
	t.Logf("SIGSTOP %s (%s), which the redeploy gives the sink, then SIGKILL %s (%s)", frozen.name, sinkOn, killed.name, victim)
	if err := frozen.signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if err := killed.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}

	// Epoch E: placed with the frozen worker, which holds the sink.
	eAt, ePlaced := c.awaitEvent(coord, at, "placed", func(e eventLine) bool { return e.uint("epoch") >= 2 })
	epochE := ePlaced.uint("epoch")
	pe, err := parsePlacement(ePlaced.get("placement"))
	if err != nil {
		t.Fatal(err)
	}
	if tasks := pe.tasksOn(sinkOn.Addr); !staleHasSink(tasks) {
		t.Fatalf("epoch %d places %v on the frozen worker %s, want the sink among them (placement %s): the coordinator's placement differs from membership.Place over the workers in their order of registration, or it declared the frozen worker lost before it placed the epoch",
			epochE, tasks, sinkOn, ePlaced.get("placement"))
	}
	if tasks := pe.tasksOn(victim.Addr); len(tasks) > 0 {
		t.Fatalf("epoch %d places %v on the killed worker %s", epochE, tasks, victim)
	}

	// The frozen worker is declared lost, and epoch E+1 runs without it
	// and completes a checkpoint.
	_, lost := c.awaitEvent(coord, eAt, "node-lost", func(e eventLine) bool { return nodeAddr(e.get("node")) == sinkOn.Addr })
	t.Logf("the coordinator declared %s lost: %s", sinkOn, lost.get("err"))
	nextAt, next := c.awaitEvent(coord, eAt, "placed", func(e eventLine) bool { return e.uint("epoch") > epochE })
	pn, err := parsePlacement(next.get("placement"))
	if err != nil {
		t.Fatal(err)
	}
	if tasks := pn.tasksOn(sinkOn.Addr); len(tasks) > 0 {
		t.Fatalf("epoch %s places %v on the lost worker %s", next.get("epoch"), tasks, sinkOn)
	}
	_, cp := c.awaitEvent(coord, nextAt, "checkpoint-completed", func(e eventLine) bool {
		return e.uint("epoch") > epochE && e.get("final") == "false"
	})
	t.Logf("epoch %d placed %s; epoch %s completed checkpoint %s", epochE, ePlaced.get("placement"), cp.get("epoch"), cp.get("checkpoint"))

	// Let the records flow again, and resume the frozen worker once the
	// live sink commits part files: its pre-committed files are what a
	// stale sink's Recover would delete.
	parts := staleCommittedParts(t, sinkDir)
	c.release()
	staleAwaitParts(t, sinkDir, parts)
	resumedAt := len(coord.linesFrom(0))
	if err := frozen.signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// It drops the tasks of epoch E: the coordinator says that the
	// deployment is no longer current, or, should the job have ended
	// meanwhile, it finds its coordinator gone.
	_, dropped := c.await(frozen, 0, "its log saying it drops the tasks", func(l string) bool {
		return strings.Contains(l, "the coordinator has replaced this deployment; dropping its tasks") ||
			strings.Contains(l, "lost the coordinator; dropping the tasks")
	})
	t.Logf("%s, resumed: %s", frozen.name, dropped)

	c.expectExact(coord, other)
	if code := c.exit(killed); code != -1 {
		t.Errorf("the killed worker exited %d", code)
	}
	// The resumed worker registers again under a new id. If it did so
	// before the job ended, the coordinator ended it, and it exited 0;
	// otherwise it tries to register with the coordinator gone until
	// SIGTERM stops it, and exits 0 too. Either way, all it printed is
	// read once it has exited.
	if err := frozen.signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		t.Fatal(err)
	}
	if code := c.exit(frozen); code != 0 {
		t.Errorf("%s exited %d, want 0", frozen.name, code)
	}

	// None of the stale tasks ran.
	runningEpoch := regexp.MustCompile(`\bepoch=(\d+)`)
	for _, l := range frozen.linesFrom(0) {
		if !strings.Contains(l, `msg="running tasks"`) {
			continue
		}
		m := runningEpoch.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("%s: a running-tasks line without its epoch: %s", frozen.name, l)
			continue
		}
		if e, _ := strconv.ParseUint(m[1], 10, 64); e >= epochE {
			t.Errorf("%s ran the tasks of epoch %d, which the coordinator had replaced while it was frozen: %s", frozen.name, e, l)
		}
	}
	for _, p := range c.procs {
		for _, l := range p.linesFrom(0) {
			if strings.Contains(l, filesink.ErrSuperseded.Error()) {
				t.Errorf("%s: a stale file sink started: %s", p.name, l)
			}
		}
	}
	staleIncarnation := regexp.MustCompile(`^\.part-\d+-\d+\.e` + strconv.FormatUint(epochE, 10) + `\.inprogress$`)
	entries, err := os.ReadDir(sinkDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if staleIncarnation.MatchString(e.Name()) {
			t.Errorf("the sink directory holds %s, an in-progress file of epoch %d, which ran nowhere", e.Name(), epochE)
		}
	}
	// The job was not disturbed after the resume.
	for _, ev := range events(coord, resumedAt) {
		switch ev.kind {
		case "node-lost", "task-failed", "restoring", "checkpoint-aborted":
			t.Errorf("after the frozen worker resumed: event %s %v", ev.kind, ev.fields)
		}
	}

	// Every record once in the committed part files: the coordinator's
	// check printed its line before exactly-once: OK; the test checks
	// again on its own.
	c.await(coord, 0, "the coordinator's line about the sink's part files", func(l string) bool {
		return strings.HasPrefix(l, "sink ") && strings.HasSuffix(l, " records=6000")
	})
	files, lines, problems := staleCheckParts(sinkDir, 6000, 200)
	for _, err := range problems {
		t.Errorf("the sink's committed part files: %v", err)
	}
	t.Logf("the sink committed %d lines in %d part files", lines, files)
}

// staleCheckParts checks the committed part files in dir (the names that do
// not start with a dot) of a run of the job with records and keys: a line
// "key sum" per record, sum the key's running sum once the record is
// counted. So each key's sums, sorted, must step by the values i+1 of its
// records i = key, key+keys, ... below records, each once, whatever order
// they arrived in: a record committed twice, one missing, or a replay's
// line after another order, breaks that. It returns the files and lines
// read, and the problems found (at most a few per kind).
func staleCheckParts(dir string, records, keys int64) (files, lines int, problems []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, []error{err}
	}
	sums := map[int64][]int64{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		files++
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return files, lines, append(problems, err)
		}
		for n, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			lines++
			k, v, ok := strings.Cut(l, " ")
			key, err1 := strconv.ParseInt(k, 10, 64)
			sum, err2 := strconv.ParseInt(v, 10, 64)
			if !ok || err1 != nil || err2 != nil || key < 0 || key >= keys {
				problems = append(problems, fmt.Errorf("%s:%d: %q is not \"key sum\" with a key below %d", e.Name(), n+1, l, keys))
				continue
			}
			sums[key] = append(sums[key], sum)
		}
	}
	if int64(lines) != records {
		problems = append(problems, fmt.Errorf("%d lines in %d committed part files, want one per record, %d", lines, files, records))
	}
	wrong := 0
	for key := range keys {
		s := sums[key]
		slices.Sort(s)
		want := map[int64]bool{}
		for i := key; i < records; i += keys {
			want[i+1] = true
		}
		prev, bad := int64(0), false
		for _, sum := range s {
			if !want[sum-prev] {
				bad = true
				if wrong++; wrong <= 5 {
					problems = append(problems, fmt.Errorf("key %d: its sums %v step from %d to %d, by no value of its records not counted yet", key, s, prev, sum))
				}
				break
			}
			delete(want, sum-prev)
			prev = sum
		}
		if len(want) > 0 && !bad {
			if wrong++; wrong <= 5 {
				problems = append(problems, fmt.Errorf("key %d: %d of its records have no line", key, len(want)))
			}
		}
	}
	return files, lines, problems
}

// staleSinkWorker returns the worker of live (in their order of
// registration) that the coordinator's placement gives the sink task.
func staleSinkWorker(t *testing.T, live []membership.Worker) membership.Worker {
	t.Helper()
	// The file sink and the discarding one are both "sink", of parallelism 1:
	// the plan's tasks are the same.
	plan, err := dataflow.NewPlan(buildJob(jobParams{records: 6000, keys: 200, variant: 1}))
	if err != nil {
		t.Fatal(err)
	}
	refs := make([]membership.TaskRef, len(plan.Tasks))
	for i, tk := range plan.Tasks {
		refs[i] = membership.TaskRef{Index: i, Operator: tk.Operator, Subtask: tk.Subtask}
	}
	p, err := membership.Place(refs, live)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range live {
		for _, tk := range p.Tasks(w.ID) {
			if tk.Operator == "sink" {
				return w
			}
		}
	}
	t.Fatalf("membership.Place puts no sink task on %v", live)
	return membership.Worker{}
}

func staleHasSink(tasks []string) bool {
	for _, tk := range tasks {
		if strings.HasPrefix(tk, "sink#") {
			return true
		}
	}
	return false
}

// staleCommittedParts counts the committed part files in dir (missing: 0).
func staleCommittedParts(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") {
			n++
		}
	}
	return n
}

// staleAwaitParts waits until dir holds more than n committed part files,
// looking every few milliseconds, within awaitDeadline.
func staleAwaitParts(t *testing.T, dir string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awaitDeadline)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for staleCommittedParts(t, dir) <= n {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for the sink to commit a part file in %s (more than %d): %v", dir, n, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// TestStaleCheckParts: staleCheckParts accepts every record's line once,
// in any part files, whatever order a key's records arrived in, and skips
// in-progress files; it reports a line committed twice, a missing one, a
// sum no order of the key's records gives, and a malformed line.
func TestStaleCheckParts(t *testing.T) {
	const records, keys = 50, 4
	running := map[int64]int64{}
	var lines []string
	for i := range int64(records) {
		running[i%keys] += i + 1
		lines = append(lines, fmt.Sprintf("%d %d", i%keys, running[i%keys]))
	}
	write := func(parts ...[]string) string {
		dir := t.TempDir()
		for i, p := range parts {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-00000-%010d", i)), []byte(strings.Join(p, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, ".part-00000-0000000009.e7.inprogress"), []byte("0 1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	if files, n, problems := staleCheckParts(write(lines[:20], lines[20:]), records, keys); len(problems) > 0 || files != 2 || n != records {
		t.Errorf("exact output: %d files, %d lines, %v; want 2, %d, none", files, n, problems, records)
	}
	// Key 0's records 0 and 4 (values 1 and 5) the other way round: 5, 6.
	swapped := slices.Clone(lines)
	swapped[0] = "0 5"
	if _, _, problems := staleCheckParts(write(swapped), records, keys); len(problems) > 0 {
		t.Errorf("another order of key 0's records: %v", problems)
	}
	without := func(i int) []string { return append(slices.Clone(lines[:i]), lines[i+1:]...) }
	for _, tc := range []struct {
		name  string
		parts [][]string
		want  string
	}{
		{"twice", [][]string{lines, lines[10:11]}, "step from"},
		{"missing", [][]string{without(10)}, "want one per record"},
		{"missing a key's last", [][]string{without(records - 1)}, "have no line"},
		{"wrong sum", [][]string{append([]string{"0 2"}, lines[1:]...)}, "step from"},
		{"malformed", [][]string{append(slices.Clone(lines), "x")}, "is not \"key sum\""},
	} {
		_, _, problems := staleCheckParts(write(tc.parts...), records, keys)
		if !strings.Contains(fmt.Sprint(problems), tc.want) {
			t.Errorf("%s: problems %v, want one saying %q", tc.name, problems, tc.want)
		}
	}
}
