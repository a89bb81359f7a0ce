package actors_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology/filesink"
)

// soPartValues returns the values in the committed part files of sink task
// subtask in dir.
func soPartValues(t testing.TB, dir string, subtask int) []int64 {
	t.Helper()
	prefix := strings.TrimSuffix(filesink.FinalName(subtask, 0), "0000000000")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Error(err)
		return nil
	}
	var out []int64
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Error(err)
			return nil
		}
		for _, line := range strings.Fields(string(data)) {
			v, err := strconv.ParseInt(line, 10, 64)
			if err != nil {
				t.Errorf("%s: %q: %v", e.Name(), line, err)
				return nil
			}
			out = append(out, v)
		}
	}
	return out
}

// TestStopWithSavepointOriginWriteFails: a stop-with-savepoint whose
// savepoint completes but whose origin write (<job>/origin) fails once.
// StopWithSavepoint must return an error saying so (wrapping the store's
// and actors.ErrNotStopped);
// the sinks must not commit at that savepoint (each sink task's committed
// files, read just before it handles the next checkpoint's completion,
// hold only what the checkpoint before the savepoint committed, 0..999);
// the job must keep running (its source produces past the savepoint);
// the origin must not name the savepoint. Then the job either stops with
// another savepoint, and a plain restart (no WithSavepoint) resumes from
// it, or runs to the end, or fails over (restoring a checkpoint, not the
// savepoint whose transactions were never committed) before it stops with
// another savepoint, or is stopped plainly and restarted (from the
// checkpoint after the savepoint); each way the committed files hold
// every record exactly once.
func TestStopWithSavepointOriginWriteFails(t *testing.T) {
	for _, then := range []string{"stop again", "run to the end", "fail over, then stop again", "plain stop, then restart"} {
		t.Run(then, func(t *testing.T) {
			const n = 8000
			job := "origin-fails"
			out := t.TempDir()
			mem := snapshots.NewMem()
			store := newFaultyStore(mem)
			// The sink tasks' committed values, read as each first handles
			// the completion of a checkpoint after the failed stop's
			// savepoint (spID, once known).
			var spID atomic.Uint64
			var mu sync.Mutex
			before := map[string][]int64{}
			faults := &actorstest.Faults{Complete: func(task string, checkpoint uint64) {
				sp := spID.Load()
				if sp == 0 || checkpoint <= sp || !strings.HasPrefix(task, "out#") {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if _, done := before[task]; !done {
					sub := int(task[len(task)-1] - '0')
					before[task] = soPartValues(t, out, sub)
				}
			}}
			var ev events
			opts := []actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)),
				actors.WithCheckpointInterval(0), actors.WithListener(ev.listen), actorstest.WithFaults(faults)}
			var failAt int64
			if strings.HasPrefix(then, "fail over") {
				failAt = 2500 // after the failed stop, before the next checkpoint
			}
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, gate, failAt), opts...)
			if err != nil {
				t.Fatal(err)
			}
			gate.WaitReached(t, 1000)
			older, err := j.Checkpoint(context.Background()) // commits 0..999
			if err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(2000)
			gate.WaitReached(t, 2000)

			store.set(store.putFail, snapshots.OriginKey(job), 1)
			_, err = j.StopWithSavepoint(context.Background(), "first")
			if err == nil {
				t.Fatal("StopWithSavepoint returned nil although recording the savepoint as the job's origin failed")
			}
			t.Logf("StopWithSavepoint: %v", err)
			if !errors.Is(err, errFaulty) || !errors.Is(err, actors.ErrNotStopped) || !strings.Contains(err.Error(), `"first"`) || !strings.Contains(err.Error(), "goes on") {
				t.Fatalf("StopWithSavepoint: %v, want an error naming the savepoint, saying the job goes on, wrapping the store's and actors.ErrNotStopped", err)
			}
			select {
			case <-j.Done():
				t.Fatalf("the job ended after the failed stop: %v", j.Wait())
			default:
			}
			m, err := j.Checkpoints().ReadSavepointManifest(context.Background(), "first")
			if err != nil {
				t.Fatalf("the failed stop's savepoint: %v", err)
			}
			spID.Store(m.GetCheckpointId())
			if o, err := j.Checkpoints().ReadOrigin(context.Background()); err != nil || o != nil {
				t.Fatalf("origin after the failed stop: %v, %v; want none", o, err)
			}
			// The job goes on: its source produces past the savepoint (and,
			// failing over on record 2500, runs again).
			sub := ev.subscribe()
			gate.SetLimit(3000)
			if failAt != 0 {
				waitFor(t, sub, "the job running again after the failover", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
			} else {
				gate.WaitReached(t, 3000)
			}
			next, err := j.Checkpoint(context.Background())
			if err != nil {
				t.Fatalf("checkpoint after the failed stop: %v", err)
			}
			if next <= m.GetCheckpointId() || next <= older {
				t.Fatalf("checkpoint %d after the savepoint's %d", next, m.GetCheckpointId())
			}
			// One more: the sink tasks handled the completion of next (and
			// so ran the hook) before its barrier reached them.
			if next, err = j.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}

			if r := ev.of(actors.EventRestoring); (failAt != 0) != (len(r) > 0) {
				t.Fatalf("restores %+v; want one only when the count fails", r)
			} else if len(r) > 0 {
				t.Logf("the failover restored checkpoint %d (the savepoint's is %d)", r[0].Checkpoint, m.GetCheckpointId())
			}
			switch then {
			case "stop again", "fail over, then stop again":
				gate.SetLimit(4000)
				gate.WaitReached(t, 4000)
				id := stopWithSavepoint(t, j, "second")
				o, err := mem.Get(context.Background(), snapshots.OriginKey(job))
				if err != nil || len(o) == 0 {
					t.Fatalf("origin after the second stop: %v", err)
				}
				var ev2 events
				j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0),
					actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)), actors.WithListener(ev2.listen))
				if err != nil {
					t.Fatal(err)
				}
				if err := waitJob(t, j2); err != nil {
					t.Fatal(err)
				}
				if r := ev2.of(actors.EventRunning); len(r) == 0 || r[0].Savepoint != "second" || r[0].Checkpoint != id {
					t.Fatalf("the plain restart ran from %+v, want savepoint second (checkpoint %d)", r, id)
				}
			case "plain stop, then restart":
				if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
					t.Fatal(err)
				}
				var ev2 events
				j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0),
					actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)), actors.WithListener(ev2.listen))
				if err != nil {
					t.Fatal(err)
				}
				if err := waitJob(t, j2); err != nil {
					t.Fatal(err)
				}
				if r := ev2.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != next || r[0].Savepoint != "" {
					t.Fatalf("the plain restart ran from %+v, want checkpoint %d", r, next)
				}
			case "run to the end":
				gate.SetLimit(n)
				if err := waitJob(t, j); err != nil {
					t.Fatal(err)
				}
				// Starting the finished job again runs nothing.
				j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0),
					actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)))
				if err == nil {
					_ = j2.Stop()
					t.Fatal("a plain restart of the finished job started")
				}
				if !errors.Is(err, actors.ErrAlreadyFinished) {
					t.Fatalf("plain restart of the finished job: %v, want ErrAlreadyFinished", err)
				}
			}

			mu.Lock()
			got := map[int64]int{}
			for _, task := range []string{"out#0", "out#1"} {
				vs, ok := before[task]
				if !ok {
					t.Fatalf("%s never handled a checkpoint's completion after the savepoint", task)
				}
				for _, v := range vs {
					got[v]++
				}
			}
			mu.Unlock()
			// Before the checkpoint after the savepoint, the sinks had
			// committed 0..999 (the checkpoint before it) and nothing of
			// the savepoint's 1000..1999.
			exactlyOnce(t, got, 1000)
			seen, hidden := readParts(t, out)
			exactlyOnce(t, seen, n)
			if len(hidden) > 0 {
				t.Errorf("in-progress files left: %v", hidden)
			}
		})
	}
}
