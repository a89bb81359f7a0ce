package actors_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
)

// TestStopWithSavepointOriginWriteInDoubt: the origin write of a
// stop-with-savepoint lands, but its answer is lost (the store reports an
// error). The job reads the origin back:
//   - found: the stop succeeds, and the sinks commit at the savepoint;
//   - the read-back fails too: nobody can tell whether the savepoint is
//     where the job resumes, so the job fails at once, rather than restore
//     the checkpoint before the savepoint and abort the transactions that
//     the next start from the savepoint commits.
//
// Either way a plain restart (which finds the origin naming the savepoint)
// ends with every record exactly once in the committed files.
func TestStopWithSavepointOriginWriteInDoubt(t *testing.T) {
	for _, readBack := range []string{"found", "fails"} {
		t.Run(readBack, func(t *testing.T) {
			const n = 8000
			job := "origin-doubt-" + readBack
			out := t.TempDir()
			store := newFaultyStore(snapshots.NewMem())
			gate := testsrc.NewGate(1000)
			// Record 2500 would fail the count: a failover after a failed
			// stop would restore the checkpoint before the savepoint.
			j, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, gate, 2500), actors.WithStore(store),
				actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)), actors.WithCheckpointInterval(0))
			if err != nil {
				t.Fatal(err)
			}
			gate.WaitReached(t, 1000)
			if _, err := j.Checkpoint(context.Background()); err != nil {
				t.Fatal(err)
			}
			gate.SetLimit(2000)
			gate.WaitReached(t, 2000)
			store.set(store.putThenFail, snapshots.OriginKey(job), 1)
			if readBack == "fails" { // every read of the origin fails once it landed
				store.afterPut = func(key string) {
					if key == snapshots.OriginKey(job) {
						store.set(store.getFail, key, -1)
					}
				}
			}
			_, serr := j.StopWithSavepoint(context.Background(), "first")
			gate.SetLimit(n)
			werr := waitJob(t, j)
			switch readBack {
			case "found":
				if serr != nil {
					t.Fatalf("StopWithSavepoint: %v, want nil: the origin is in place", serr)
				}
				if !errors.Is(werr, actors.ErrStopped) {
					t.Fatalf("Wait: %v, want ErrStopped", werr)
				}
			case "fails":
				var je *actors.JobError
				if serr == nil || !errors.As(werr, &je) || !strings.Contains(werr.Error(), "unknown") {
					t.Fatalf("StopWithSavepoint: %v; Wait: %v; want both to fail, saying that whether the savepoint is where the job resumes is unknown", serr, werr)
				}
			}
			store.set(store.getFail, snapshots.OriginKey(job), 0)
			o, err := j.Checkpoints().ReadOrigin(context.Background())
			if err != nil || o.GetSavepoint() != "first" {
				t.Fatalf("origin %v, %v: want the savepoint, whose write landed", o, err)
			}
			j2, err := actors.Start(context.Background(), gatedFileSinkJob(job, n, out, testsrc.NewGate(n), 0), actors.WithStore(store),
				actors.WithInlineStateLimit(0), actors.WithLogger(testLogger(t)))
			if err != nil {
				t.Fatalf("plain restart: %v", err)
			}
			if err := waitJob(t, j2); err != nil {
				t.Fatalf("the plain restart failed: %v", err)
			}
			seen, hidden := readParts(t, out)
			exactlyOnce(t, seen, n)
			if len(hidden) > 0 {
				t.Errorf("in-progress files left: %v", hidden)
			}
		})
	}
}
