package actors_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// TestSavepointMovesBetweenBackends runs a job in four phases ended by
// savepoints, the state alternately on the heap and on disk and at
// another parallelism each time, with a task failure in every phase: the
// final state equals that of the whole input, and the disk phases kept
// their state in databases that are gone once the job has ended.
func TestSavepointMovesBetweenBackends(t *testing.T) {
	shape := rescaleShape{job: "backends", n: 20_000, maxP: 32}
	store := snapshots.NewMem()
	dir := t.TempDir()
	pf := &phaseFaults{}
	faults := pf.faults()
	pars := []int{2, 3, 1, 2}
	for i, par := range pars {
		pf.setPhase(i)
		onDisk := i%2 == 1
		limit := shape.n * int64(i+1) / int64(len(pars))
		gate := testsrc.NewGate(limit)
		g := shape.build(par, gate, func(int64) error { return nil })
		opts := []actors.Option{actors.WithStore(store), actors.WithLogger(testLogger(t)),
			actorstest.WithFaults(faults), actors.WithCheckpointInterval(10 * time.Millisecond),
			actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 100, Window: time.Hour})}
		if onDisk {
			opts = append(opts, actors.WithDiskState(actors.DiskState{Dir: dir}))
		}
		if i > 0 {
			opts = append(opts, actors.WithSavepoint(fmt.Sprintf("phase-%d", i-1)))
		}
		before := diskstate.Opened()
		j, err := actors.Start(context.Background(), g, opts...)
		if err != nil {
			t.Fatalf("phase %d (parallelism %d): %v", i, par, err)
		}
		if i == len(pars)-1 {
			if err := waitJob(t, j); err != nil {
				t.Fatalf("last phase: %v", err)
			}
		} else {
			gate.WaitReached(t, limit)
			stopWithSavepoint(t, j, fmt.Sprintf("phase-%d", i))
		}
		// Each stage's tasks open a database per incarnation.
		if opened := diskstate.Opened() - before; onDisk != (opened >= int64(2*par)) {
			t.Fatalf("phase %d (on disk: %t): %d task databases opened", i, onDisk, opened)
		}
	}
	cps := snapshots.NewCheckpoints(store, shape.job, nil)
	rp, err := cps.LoadLatest(context.Background())
	if err == nil {
		err = topology.ExpandDiskState(context.Background(), cps, rp, t.TempDir())
	}
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("the final checkpoint: %v, %v", rp, err)
	}
	count1, sum1, sum2 := shape.want()
	assertEqualMaps(t, "stage1 count", states(t, rp, "stage1", "count"), count1)
	assertEqualMaps(t, "stage1 sum", states(t, rp, "stage1", "sum"), sum1)
	assertEqualMaps(t, "stage2 sum", states(t, rp, "stage2", "sum"), sum2)
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Fatalf("task databases left behind: %v %v", left, err)
	}
}

// diskSums reads the sum of every key out of checkpoint m of a job whose
// sums are on disk, through their database files.
func diskSums(t *testing.T, cps *snapshots.Checkpoints, m *messages.Manifest) map[int64]int64 {
	t.Helper()
	rp := &snapshots.Restorable{Manifest: m, States: map[string]*messages.TaskState{}}
	for _, e := range m.GetTasks() {
		st, err := cps.ReadTaskState(context.Background(), e.GetState())
		if err != nil {
			t.Fatalf("read the state of %s: %v", e.GetTaskId(), err)
		}
		rp.States[e.GetTaskId()] = st
		if e.GetOperator() == "sum" {
			if _, err := topology.DecodeValueState[int64, int64](st, "sum"); !errors.Is(err, topology.ErrDiskStateNotExpanded) {
				t.Fatalf("decoding %s before its files are read: %v, want ErrDiskStateNotExpanded", e.GetTaskId(), err)
			}
		}
	}
	if err := topology.ExpandDiskState(context.Background(), cps, rp, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	got := map[int64]int64{}
	for _, st := range rp.States {
		if st.GetOperator() != "sum" {
			continue
		}
		part, err := topology.DecodeValueState[int64, int64](st, "sum")
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(got, part)
	}
	return got
}

// TestDiskCheckpointFiles: on disk, with incremental checkpoints, a task's
// state is stored as its database's files: a checkpoint stores the files
// its base does not hold and references the others, which retention keeps
// past their checkpoint's deletion; a failure restores from the files; and
// the state read back from every checkpoint, and the final one, is exact.
func TestDiskCheckpointFiles(t *testing.T) {
	const n, keys = 6000, 1000
	gate := testsrc.NewGate(2000)
	completed := make(chan actors.Event, 64)
	restored := make(chan uint64, 8)
	store := snapshots.NewMem()
	j, err := actors.Start(context.Background(), incrementalJob(n, keys, gate, 5000), actors.WithStore(store),
		actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0), actors.WithIncrementalCheckpoints(1000),
		actors.WithInlineStateLimit(0), actors.WithRetainedCheckpoints(1),
		actors.WithDiskState(actors.DiskState{Dir: t.TempDir()}),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventCheckpointCompleted:
				completed <- e
			case actors.EventRestoring:
				restored <- e.Checkpoint
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	cps := j.Checkpoints()
	checkpoint := func(limit int64) *messages.Manifest {
		t.Helper()
		gate.SetLimit(limit)
		gate.WaitReached(t, limit)
		id, err := j.Checkpoint(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if e := <-completed; e.Checkpoint != id {
			t.Fatalf("completed %d, want %d", e.Checkpoint, id)
		}
		m, err := cps.ReadManifest(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := diskSums(t, cps, m), wantSums(limit, keys); !maps.Equal(got, want) {
			t.Fatalf("checkpoint %d: the sums read back differ from those of records 1..%d (%d keys, want %d)", id, limit, len(got), len(want))
		}
		return m
	}
	// files returns the files of the sum tasks' databases in m, and those
	// stored by an earlier checkpoint.
	files := func(m *messages.Manifest) (all, earlier []*messages.StateFile) {
		for _, e := range m.GetTasks() {
			if e.GetOperator() != "sum" {
				continue
			}
			d := e.GetState().GetDisk()
			if d == nil || len(d.GetFiles()) == 0 {
				t.Fatalf("checkpoint %d: task %s has no database files", m.GetCheckpointId(), e.GetTaskId())
			}
			for _, f := range d.GetFiles() {
				all = append(all, f)
				if id, ok := snapshots.StateFileCheckpoint("incremental", f.GetKey()); ok && id < m.GetCheckpointId() {
					earlier = append(earlier, f)
				}
			}
		}
		return all, earlier
	}
	m1 := checkpoint(2000)
	if _, earlier := files(m1); len(earlier) != 0 {
		t.Fatalf("the first checkpoint references %d files of earlier ones", len(earlier))
	}
	m2 := checkpoint(2000) // nothing changed: every table is referenced
	all2, earlier2 := files(m2)
	tables := 0
	for _, f := range all2 {
		if strings.HasSuffix(f.GetName(), ".sst") {
			tables++
		}
	}
	if tables == 0 || len(earlier2) != tables {
		t.Fatalf("with nothing changed, checkpoint 2 references %d of its %d tables from checkpoint 1", len(earlier2), tables)
	}
	m3 := checkpoint(3000)
	_, earlier3 := files(m3)
	if len(earlier3) == 0 {
		t.Fatal("checkpoint 3 references no table of an earlier checkpoint")
	}
	// Retention keeps one checkpoint (and a fallback that shares no object
	// with it, once there is one): the earlier files 3 references stay.
	for _, f := range earlier3 {
		if _, err := store.Get(context.Background(), f.GetKey()); err != nil {
			t.Errorf("file %s, referenced by checkpoint 3: %v", f.GetKey(), err)
		}
	}
	gate.SetLimit(n) // record 5000 fails the sum once: recovery restores checkpoint 3 from its files
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-restored:
		if id != m3.GetCheckpointId() {
			t.Fatalf("recovery restored checkpoint %d, want %d", id, m3.GetCheckpointId())
		}
	default:
		t.Fatal("the injected failure caused no restore")
	}
	r, err := cps.LoadLatest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if got := diskSums(t, cps, r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
		t.Fatal("the final checkpoint's sums differ from those of a failure-free run")
	}
	// The restore took checkpoint 3's files over as the tasks' databases:
	// the final checkpoint references some of them rather than storing
	// the state again.
	_, earlierFinal := files(r.Manifest)
	if !slices.ContainsFunc(earlierFinal, func(f *messages.StateFile) bool {
		id, _ := snapshots.StateFileCheckpoint("incremental", f.GetKey())
		return id <= m3.GetCheckpointId()
	}) {
		t.Errorf("the final checkpoint %d references no file of checkpoint %d or before, which recovery restored", r.Manifest.GetCheckpointId(), m3.GetCheckpointId())
	}
}

// TestRestoreFallsBackOnDamagedDiskFile: a database file of the newest
// checkpoint that is corrupt or missing (its manifest and state heads
// intact) fails the restore when the file is read, and recovery falls
// back to the checkpoint before, without counting a failure against the
// restart strategy: the job ends with a failure-free run's state.
func TestRestoreFallsBackOnDamagedDiskFile(t *testing.T) {
	for _, damage := range []string{"corrupt", "missing"} {
		t.Run(damage, func(t *testing.T) {
			ctx := context.Background()
			const n, keys = 3000, 1000
			store := snapshots.NewMem()
			gate := testsrc.NewGate(1000)
			disk := actors.WithDiskState(actors.DiskState{Dir: t.TempDir()})
			j, err := actors.Start(ctx, incrementalJob(n, keys, gate, 0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
				actors.WithCheckpointInterval(0), actors.WithInlineStateLimit(0), disk)
			if err != nil {
				t.Fatal(err)
			}
			gate.WaitReached(t, 1000)
			if _, err := j.Checkpoint(ctx); err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(2000)
			gate.WaitReached(t, 2000)
			newest, err := j.Checkpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
				t.Fatalf("Stop: %v", err)
			}
			m, err := j.Checkpoints().ReadManifest(ctx, newest)
			if err != nil {
				t.Fatal(err)
			}
			var f *messages.StateFile
			for _, e := range m.GetTasks() {
				if e.GetTaskId() != "sum#1" {
					continue
				}
				for _, x := range e.GetState().GetDisk().GetFiles() {
					if strings.HasSuffix(x.GetName(), ".sst") {
						f = x
					}
				}
			}
			if f == nil {
				t.Fatalf("checkpoint %d holds no table file for sum#1", newest)
			}
			if damage == "missing" {
				if err := store.Delete(ctx, f.GetKey()); err != nil {
					t.Fatal(err)
				}
			} else {
				data, err := store.Get(ctx, f.GetKey())
				if err != nil {
					t.Fatal(err)
				}
				data = append([]byte(nil), data...)
				data[len(data)/2] ^= 0xff
				if err := store.Put(ctx, f.GetKey(), data); err != nil {
					t.Fatal(err)
				}
			}
			var ev events
			j2, err := actors.Start(ctx, incrementalJob(n, keys, testsrc.NewGate(n), 0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
				actors.WithCheckpointInterval(0), actors.WithInlineStateLimit(0), actors.WithListener(ev.listen), disk,
				actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}))
			if err != nil {
				t.Fatalf("Start: %v (the manifest and the heads are intact: the damage shows when the files are read)", err)
			}
			if err := waitJob(t, j2); err != nil {
				t.Fatal(err)
			}
			var from []uint64
			for _, e := range ev.of(actors.EventRestoring) {
				from = append(from, e.Checkpoint)
			}
			if len(from) == 0 || from[len(from)-1] != newest-1 {
				t.Fatalf("restores from checkpoints %v; want the last from %d, the one before the damaged %d", from, newest-1, newest)
			}
			want := snapshots.ErrCorrupt
			if damage == "missing" {
				want = snapshots.ErrNotFound
			}
			failed := ev.of(actors.EventTaskFailed)
			if len(failed) == 0 || failed[0].Cause != actors.CauseRestore || !errors.Is(failed[0].Err, want) || !strings.Contains(failed[0].Err.Error(), f.GetKey()) {
				t.Fatalf("failures %+v; want a restore failure wrapping %v and naming %s first", failed, want, f.GetKey())
			}
			r, err := j2.Checkpoints().LoadLatest(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got := diskSums(t, j2.Checkpoints(), r.Manifest); !maps.Equal(got, wantSums(n, keys)) {
				t.Fatal("after falling back, the final sums differ from those of a failure-free run")
			}
		})
	}
}

// TestDiskLocalRecovery: a task restores its on-disk state from the local
// copies of the checkpoints its process uploaded, reading none of the
// files from the store, unless local recovery is off or a copy does not
// verify against the manifest (it is then downloaded); the state is exact
// either way, and the copies are gone once the job has ended.
func TestDiskLocalRecovery(t *testing.T) {
	for _, c := range []struct {
		name          string
		off, tampered bool
	}{{"local", false, false}, {"off", true, false}, {"tampered", false, true}} {
		t.Run(c.name, func(t *testing.T) {
			const n, keys = 4000, 1000
			gate := testsrc.NewGate(2000)
			dir := t.TempDir()
			var ev events
			j, err := actors.Start(context.Background(), incrementalJob(n, keys, gate, 3000), actors.WithStore(snapshots.NewMem()),
				actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0), actors.WithIncrementalCheckpoints(1000),
				actors.WithInlineStateLimit(0), actors.WithDiskState(actors.DiskState{Dir: dir, NoLocalRecovery: c.off}),
				actors.WithListener(ev.listen))
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			gate.WaitReached(t, 2000)
			id, err := j.Checkpoint(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			m, err := j.Checkpoints().ReadManifest(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			var tables int64 // the bytes of the tables, which tampering replaces
			for _, e := range m.GetTasks() {
				for _, f := range e.GetState().GetDisk().GetFiles() {
					if strings.HasSuffix(f.GetName(), ".sst") {
						tables += int64(f.GetSize())
					}
				}
			}
			local := filepath.Join(dir, "local")
			var copies []string
			_ = filepath.WalkDir(local, func(p string, d os.DirEntry, err error) error {
				if err == nil && strings.HasSuffix(p, ".sst") {
					copies = append(copies, p)
				}
				return nil
			})
			if c.off != (len(copies) == 0) {
				t.Fatalf("local recovery off: %t, but %d tables are kept locally", c.off, len(copies))
			}
			if c.tampered { // a new file in each copy's place: the database's own is another
				for _, p := range copies {
					data, err := os.ReadFile(p)
					if err != nil {
						t.Fatal(err)
					}
					data[len(data)/2] ^= 0xff
					if err := os.WriteFile(p+".new", data, 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.Rename(p+".new", p); err != nil {
						t.Fatal(err)
					}
				}
			}
			// Record 3000 fails a sum task: both restore checkpoint id. The
			// source ends only after that, so that no later checkpoint
			// (the final one) leaves copies of its own, which verify.
			sub := ev.subscribe()
			gate.SetLimit(3500)
			waitFor(t, sub, "the job running again", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
			gate.SetLimit(n)
			if err := waitJob(t, j); err != nil {
				t.Fatal(err)
			}
			got, downloaded := j.DiskRestoreBytes()
			switch {
			case c.off || c.tampered:
				if downloaded < tables || (c.off && got != 0) {
					t.Errorf("restored %d bytes from local copies and downloaded %d, want at least the %d of the tables downloaded", got, downloaded, tables)
				}
			default:
				if downloaded != 0 || got < tables {
					t.Errorf("restored %d bytes from local copies and downloaded %d, want at least the %d of the tables from local copies", got, downloaded, tables)
				}
			}
			r, err := j.Checkpoints().LoadLatest(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if sums := diskSums(t, j.Checkpoints(), r.Manifest); !maps.Equal(sums, wantSums(n, keys)) {
				t.Fatal("the final sums differ from those of a failure-free run")
			}
			if _, err := os.Stat(local); !os.IsNotExist(err) {
				t.Errorf("the local copies outlive the job: %v", err)
			}
		})
	}
}
