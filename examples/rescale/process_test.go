package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/snapshots"
)

var okLine = regexp.MustCompile(`^exactly-once: OK$`)

// storeArgs are the flags of the multi-process tests: a small job, so
// that the race-detector build runs it quickly; the stop points are exact
// whatever the speed (20000 orders: the first stop of a run from the
// beginning with one more phase to come is at 10000).
func storeArgs(store string, extra ...string) []string {
	return append([]string{"-store", store, "-records", "20000", "-keys", "100"}, extra...)
}

// TestDefaultRun runs the example with no flags, as a user would on a
// fresh clone: it rescales 2 -> 3 -> 1 through two savepoints in a fresh
// temporary directory, stops each phase exactly at its stop point, and
// ends with exactly-once: OK. The savepoints it leaves record the
// parallelism and key-group ranges of the phase that took them. A second
// run works too, in a directory of its own.
func TestDefaultRun(t *testing.T) {
	env := []string{"TMPDIR=" + t.TempDir()}
	p := mustSucceed(t, "default run", env)
	dir := p.MustFind(regexp.MustCompile(`^store: dir:(.+) \(a fresh directory; -store chooses another\)$`))[1]
	if filepath.Dir(dir) != strings.TrimPrefix(env[0], "TMPDIR=") {
		t.Errorf("the store %s is not a fresh directory in TMPDIR", dir)
	}
	m1 := p.MustFind(regexp.MustCompile(`^phase 1: parallelism 2, from the beginning at 0 orders; stopped with savepoint "sp-1" \(checkpoint (\d+)\) at 200000 of 600000 orders$`))
	m2 := p.MustFind(regexp.MustCompile(`^phase 2: parallelism 3, from savepoint "sp-1" \(checkpoint (\d+)\) at 200000 orders; stopped with savepoint "sp-2" \(checkpoint (\d+)\) at 400000 of 600000 orders$`))
	m3 := p.MustFind(regexp.MustCompile(`^phase 3: parallelism 1, from savepoint "sp-2" \(checkpoint (\d+)\) at 400000 orders; finished \(final checkpoint \d+\) at 600000 of 600000 orders$`))
	if m2[1] != m1[1] || m3[1] != m2[2] {
		t.Errorf("a phase did not start from the previous phase's savepoint: sp-1 is checkpoint %s, phase 2 started from %s; sp-2 is %s, phase 3 started from %s",
			m1[1], m2[1], m2[2], m3[1])
	}
	p.MustFind(regexp.MustCompile(`^final state, read from checkpoint \d+ \(totals in 1 task\): 1000 customers, 600000 orders, (\d+) cents; closed form: 1000 customers, 600000 orders, (\d+) cents$`))
	p.MustFind(okLine)

	store, err := snapshots.NewDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cps := snapshots.NewCheckpoints(store, jobName, nil)
	for name, par := range map[string]int{"sp-1": 2, "sp-2": 3} {
		m, err := cps.ReadSavepointManifest(t.Context(), name)
		if err != nil {
			t.Fatalf("savepoint %s: %v", name, err)
		}
		tasks := 0
		for _, e := range m.GetTasks() {
			if e.GetOperatorId() != totalsID {
				continue
			}
			tasks++
			start, end := dataflow.KeyGroupRange(maxParallelism, par, int(e.GetSubtask()))
			if int(e.GetKeyGroupStart()) != start || int(e.GetKeyGroupEnd()) != end {
				t.Errorf("savepoint %s: %s records key groups [%d,%d), want [%d,%d)", name, e.GetTaskId(), e.GetKeyGroupStart(), e.GetKeyGroupEnd(), start, end)
			}
		}
		if tasks != par {
			t.Errorf("savepoint %s holds %d tasks of %s, want %d", name, tasks, totalsID, par)
		}
		if m.GetMaxParallelism() != maxParallelism {
			t.Errorf("savepoint %s records max parallelism %d, want %d", name, m.GetMaxParallelism(), maxParallelism)
		}
	}

	again := mustSucceed(t, "second default run", env)
	if dir2 := again.MustFind(regexp.MustCompile(`^store: dir:(.+) \(a fresh`))[1]; dir2 == dir {
		t.Errorf("the second run used the first run's store %s", dir)
	}
	again.MustFind(okLine)
}

// TestSavepointAcrossProcesses: a savepoint taken by one process is
// restored by another at another parallelism, three times over: process 1
// runs at parallelism 2 and stops with savepoint first; process 2 starts
// from it at 3 and stops with second; process 3 finishes from it at 1.
// The final state is exact. On a directory store and on MinIO.
func TestSavepointAcrossProcesses(t *testing.T) {
	t.Run("dir", func(t *testing.T) {
		acrossProcesses(t, filepath.Join(t.TempDir(), "store"), nil)
	})
	t.Run("minio", func(t *testing.T) {
		srv := miniotest.Start(t)
		srv.MakeBucket(t, "rescale")
		acrossProcesses(t, srv.URL("rescale", "across"), srv.Env())
	})
}

func acrossProcesses(t *testing.T, store string, env []string) {
	p1 := mustSucceed(t, "process 1", env, storeArgs(store, "-phases", "2", "-stop-with", "first")...)
	first := p1.MustFind(regexp.MustCompile(`^phase 1: parallelism 2, from the beginning at 0 orders; stopped with savepoint "first" \(checkpoint (\d+)\) at 10000 of 20000 orders$`))[1]
	p2 := mustSucceed(t, "process 2", env, storeArgs(store, "-savepoint", "first", "-phases", "3", "-stop-with", "second")...)
	m := p2.MustFind(regexp.MustCompile(`^phase 1: parallelism 3, from savepoint "first" \(checkpoint (\d+)\) at 10000 orders; stopped with savepoint "second" \(checkpoint (\d+)\) at 15000 of 20000 orders$`))
	if m[1] != first {
		t.Errorf("process 2 started from checkpoint %s, but savepoint first is checkpoint %s", m[1], first)
	}
	if a, b := atoi(t, first), atoi(t, m[2]); b <= a {
		t.Errorf("savepoint second is checkpoint %d, not above first's %d", b, a)
	}
	p3 := mustSucceed(t, "process 3", env, storeArgs(store, "-savepoint", "second", "-phases", "1")...)
	p3.MustFind(regexp.MustCompile(`^phase 1: parallelism 1, from savepoint "second" \(checkpoint ` + m[2] + `\) at 15000 orders; finished \(final checkpoint \d+\) at 20000 of 20000 orders$`))
	p3.MustFind(okLine)
}

// TestKilledPhaseResumes: a process that started from a savepoint is
// SIGKILLed during its phase, and started again without -savepoint.
//   - Killed before the phase completed a checkpoint of its own, the job
//     restarts from the savepoint again (its origin), not from the older
//     checkpoints of process 1 still in the store, here at another
//     parallelism.
//   - Killed after one, it restarts from that checkpoint.
//
// Either way the final state is exact.
func TestKilledPhaseResumes(t *testing.T) {
	t.Run("before its own checkpoint", func(t *testing.T) {
		store := filepath.Join(t.TempDir(), "store")
		// Process 0 leaves a checkpoint of the job's earlier history in
		// the store, which process 3 must not resume.
		p0 := startProc(t, "process 0", nil, storeArgs(store, "-phases", "2", "-hold", "-hold-checkpoint", "-interval", "0")...)
		old := p0.AwaitLine(regexp.MustCompile(`holding at 10000 of 20000 orders, last checkpoint of this phase: (\d+);`))[1]
		killed(t, p0)
		p1 := mustSucceed(t, "process 1", nil, storeArgs(store, "-phases", "2", "-stop-with", "first", "-interval", "0")...)
		sp := p1.MustFind(regexp.MustCompile(`^phase 1: parallelism 2, from checkpoint ` + old + ` \(the job's newest\) at 10000 orders; stopped with savepoint "first" \(checkpoint (\d+)\) at 15000 of 20000 orders$`))[1]
		// No periodic checkpoint: the phase has none of its own when killed.
		p2 := startProc(t, "process 2", nil, storeArgs(store, "-savepoint", "first", "-phases", "3", "-hold", "-interval", "0")...)
		p2.AwaitLine(regexp.MustCompile(`^phase 1: parallelism 3, from savepoint "first" \(checkpoint ` + sp + `\) at 15000 orders; holding at 17500 of 20000 orders, last checkpoint of this phase: none; waiting to be killed$`))
		killed(t, p2)
		if rp, err := latest(t, store); err != nil || rp.Manifest.GetCheckpointId() != uint64(atoi(t, old)) {
			t.Fatalf("the newest checkpoint in the store: %v, %v; want process 0's, %s (so that the test shows the origin is preferred)", rp, err, old)
		}
		p3 := mustSucceed(t, "process 3", nil, storeArgs(store, "-phases", "1")...)
		p3.MustFind(regexp.MustCompile(`^phase 1: parallelism 1, from savepoint "first" \(checkpoint ` + sp + `\) again \(the job's origin: it has no checkpoint of its own yet\) at 15000 orders; finished \(final checkpoint \d+\) at 20000 of 20000 orders$`))
		p3.MustFind(okLine)
	})
	t.Run("after its own checkpoint", func(t *testing.T) {
		store := filepath.Join(t.TempDir(), "store")
		mustSucceed(t, "process 1", nil, storeArgs(store, "-phases", "2", "-stop-with", "first")...)
		p2 := startProc(t, "process 2", nil, storeArgs(store, "-savepoint", "first", "-phases", "3", "-hold", "-hold-checkpoint", "-interval", "0")...)
		own := p2.AwaitLine(regexp.MustCompile(`^phase 1: parallelism 3, from savepoint "first" \(checkpoint \d+\) at 10000 orders; holding at 15000 of 20000 orders, last checkpoint of this phase: (\d+); waiting to be killed$`))[1]
		killed(t, p2)
		// It resumes at parallelism 3 from its checkpoint, then rescales
		// to 1 through a savepoint of its own.
		p3 := mustSucceed(t, "process 3", nil, storeArgs(store, "-phases", "3,1")...)
		p3.MustFind(regexp.MustCompile(`^phase 1: parallelism 3, from checkpoint ` + own + ` \(the job's newest\) at 15000 orders; stopped with savepoint "sp-1" \(checkpoint \d+\) at 17500 of 20000 orders$`))
		p3.MustFind(regexp.MustCompile(`^phase 2: parallelism 1, from savepoint "sp-1" `))
		p3.MustFind(okLine)
	})
}

// latest loads the newest complete checkpoint of the job in the directory
// store dir.
func latest(t *testing.T, dir string) (*snapshots.Restorable, error) {
	t.Helper()
	store, err := snapshots.NewDir(dir)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return snapshots.NewCheckpoints(store, jobName, nil).LoadLatest(t.Context())
}

// killed SIGKILLs p and checks that the signal ended it.
func killed(t *testing.T, p *proc) {
	t.Helper()
	p.Kill()
	if code := p.Exit(); code != -1 {
		t.Fatalf("%s exited %d before the SIGKILL", p.Name, code)
	}
}

// TestRefusals: what the example refuses, through the runtime or its
// flags, with the exit code and a message that names the problem.
func TestRefusals(t *testing.T) {
	store := filepath.Join(t.TempDir(), "store")
	mustSucceed(t, "setup", nil, storeArgs(store, "-phases", "2", "-stop-with", "first")...)

	t.Run("missing savepoint", func(t *testing.T) {
		p, code := runProc(t, "missing", nil, storeArgs(store, "-savepoint", "nope", "-phases", "3")...)
		expectRefused(t, p, code, 1, `savepoint "nope"`, "not found", "savepoints list")
	})
	t.Run("existing savepoint name", func(t *testing.T) {
		p, code := runProc(t, "existing", nil, storeArgs(store, "-savepoint", "first", "-stop-with", "first-again", "-phases", "1")...)
		if code != 0 {
			t.Fatalf("exit %d, want 0", code)
		}
		p, code = runProc(t, "existing", nil, storeArgs(store, "-savepoint", "first", "-stop-with", "first-again", "-phases", "1")...)
		expectRefused(t, p, code, 1, `savepoint "first-again"`, "already", "savepoints delete")
	})
	t.Run("corrupt savepoint", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		mustSucceed(t, "setup", nil, storeArgs(dir, "-phases", "2", "-stop-with", "first")...)
		// The state object, or, for a state small enough to travel inline,
		// the manifest that holds it.
		objs, err := filepath.Glob(filepath.Join(dir, jobName, "savepoints", "first", "chk-*", "totals#0.state"))
		if err != nil || len(objs) > 1 {
			t.Fatalf("the savepoint's totals#0.state: %v, %v", objs, err)
		}
		obj, what := filepath.Join(dir, jobName, "savepoints", "first", "_manifest"), "_manifest"
		if len(objs) == 1 {
			obj, what = objs[0], "totals#0.state"
		}
		b, err := os.ReadFile(obj)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(obj, b, 0o600); err != nil {
			t.Fatal(err)
		}
		p, code := runProc(t, "corrupt", nil, storeArgs(dir, "-savepoint", "first", "-phases", "3")...)
		expectRefused(t, p, code, 1, `savepoint "first"`, what, "corrupt")
	})
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"phases", []string{"-phases", "2,0"}, "parallelism 0"},
		{"phases above max", []string{"-phases", "129"}, "max parallelism"},
		{"phases not numbers", []string{"-phases", "two"}, `"two" is not a number`},
		{"records", []string{"-records", "1"}, "-records 1"},
		{"hold and stop", []string{"-hold", "-stop-with", "x"}, "-hold and -stop-with"},
		{"savepoint name", []string{"-savepoint", "a/b"}, "-savepoint"},
		{"start over from a savepoint", []string{"-start-over", "-savepoint", "first"}, "-start-over and -savepoint"},
		{"unknown flag", []string{"-nope"}, "-nope"},
	} {
		t.Run("flag "+c.name, func(t *testing.T) {
			p, code := runProc(t, c.name, nil, append([]string{"-store", store}, c.args...)...)
			expectRefused(t, p, code, 2, c.want)
		})
	}
}

// expectRefused checks that p exited with code before running any phase,
// and said why on stderr.
func expectRefused(t *testing.T, p *proc, code, want int, says ...string) {
	t.Helper()
	if code != want {
		t.Fatalf("%s exited %d, want %d", p.Name, code, want)
	}
	stderr := strings.Join(p.Lines(true), "\n")
	for _, s := range says {
		if !strings.Contains(stderr, s) {
			t.Errorf("%s's message does not say %q:\n%s", p.Name, s, stderr)
		}
	}
	for _, l := range p.Lines(false) {
		if strings.HasPrefix(l, "phase ") {
			t.Errorf("%s ran a phase although refused: %s", p.Name, l)
		}
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
