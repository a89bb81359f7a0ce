package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
)

// TestReplayStopOriginAnswerLost: a stop-with-savepoint whose origin
// write lands in the store but reports an error (the answer was lost), or
// fails without landing; and either way, possibly, the read back of the
// origin fails too. Whatever the stop reports (a stop once the origin is
// read back in place; the failure, and the job goes on; the job's failure
// when it cannot tell), the job then possibly fails over (restoring the
// checkpoint before the savepoint), possibly completes another
// checkpoint, and is stopped without a savepoint; a plain restart (no
// WithSavepoint) must then start and end with every record exactly once
// in the committed files. After a lost answer the origin in the store
// names the savepoint, whose transactions the sinks did not commit: a
// restart that resumes from it needs them, so the job must not abandon
// them while the origin names it.
func TestReplayStopOriginAnswerLost(t *testing.T) {
	for _, c := range []struct {
		lost      bool // the write lands, and the answer is lost
		readFails bool // and the next read of the origin fails
		then      string
	}{
		{true, false, "stop"}, {true, false, "checkpoint, stop"}, {true, false, "fail over, stop"}, {true, false, "fail over, checkpoint, stop"},
		{false, false, "fail over, stop"},
		{true, true, "fail over, stop"}, {false, true, "fail over, stop"},
	} {
		then := c.then
		name := "failed, " + then
		if c.lost {
			name = "answer lost, " + then
		}
		if c.readFails {
			name = "read back fails, " + name
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const n = 6000
			const job = "origin-lost"
			out := t.TempDir()
			store := newFaultyStore(snapshots.NewMem())
			var ev events
			opts := func(ev *events) []actors.Option {
				return []actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)),
					actors.WithCheckpointInterval(0), actors.WithListener(ev.listen),
					actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 5, Window: time.Hour})}
			}
			failover := strings.Contains(then, "fail over")
			var failAt int64
			if failover {
				failAt = 2500 // after the savepoint (2000), before the next checkpoint
			}
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, gate, failAt), opts(&ev)...)
			if err != nil {
				t.Fatal(err)
			}
			defer j.Stop()
			gate.WaitReached(t, 1000)
			older, err := j.Checkpoint(ctx)
			if err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(2000)
			gate.WaitReached(t, 2000)

			if c.lost {
				store.set(store.putThenFail, snapshots.OriginKey(job), 1)
			} else {
				store.set(store.putFail, snapshots.OriginKey(job), 1)
			}
			if c.readFails {
				store.set(store.getFail, snapshots.OriginKey(job), 1)
			}
			sp, err := j.StopWithSavepoint(ctx, "first")
			o, oerr := snapshots.NewCheckpoints(store.Store, job, nil).ReadOrigin(ctx)
			t.Logf("StopWithSavepoint: %d, %v; the origin in the store: %v (%v)", sp, err, o, oerr)
			switch {
			case err != nil && c.readFails && strings.Contains(err.Error(), "is unknown"):
				// Whether the savepoint is the job's origin is unknown:
				// the job fails rather than go on.
				werr := waitJob(t, j)
				t.Logf("the job ended: %v", werr)
				if werr == nil || errors.Is(werr, actors.ErrStopped) {
					t.Fatalf("the job whose stop failed ended with %v", werr)
				}
				goto restart
			case err == nil && !c.lost:
				t.Fatal("StopWithSavepoint returned nil although the origin write failed")
			}
			if err == nil {
				// The runtime read the origin back and stopped there: the
				// plain restart below resumes from the savepoint.
				if werr := waitJob(t, j); !errors.Is(werr, actors.ErrStopped) {
					t.Fatalf("Wait after a successful StopWithSavepoint: %v", werr)
				}
			} else {
				select {
				case <-j.Done():
					t.Fatalf("the job ended after the failed stop: %v", j.Wait())
				default:
				}
				sub := ev.subscribe()
				gate.SetLimit(3000)
				if failover {
					waitFor(t, sub, "the job running again after the failover", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
					r := ev.of(actors.EventRestoring)
					if len(r) == 0 {
						t.Fatal("no restore after the count failed")
					}
					t.Logf("the failover restored checkpoint %d (savepoint %q; the older checkpoint is %d)", r[len(r)-1].Checkpoint, r[len(r)-1].Savepoint, older)
				} else {
					gate.WaitReached(t, 3000)
				}
				if strings.Contains(then, "checkpoint") {
					id, err := j.Checkpoint(ctx)
					if err != nil {
						t.Fatalf("checkpoint after the failed stop: %v", err)
					}
					t.Logf("checkpoint %d after the failed stop", id)
				}
				if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
					t.Fatalf("Stop: %v", err)
				}
			}

		restart:
			var ev2 events
			j2, err := actors.Start(ctx, gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), opts(&ev2)...)
			if err != nil {
				t.Fatalf("plain restart: %v", err)
			}
			defer j2.Stop()
			if err := waitJob(t, j2); err != nil {
				t.Fatalf("plain restart: %v", err)
			}
			if r := ev2.of(actors.EventRunning); len(r) > 0 {
				t.Logf("the plain restart ran from checkpoint %d (savepoint %q)", r[0].Checkpoint, r[0].Savepoint)
			}
			seen, hidden := readParts(t, out)
			exactlyOnce(t, seen, n)
			if len(hidden) > 0 {
				t.Errorf("in-progress files left: %v", hidden)
			}
		})
	}
}
