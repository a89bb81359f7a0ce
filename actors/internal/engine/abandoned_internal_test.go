package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
)

// stopOnly is a supervisor that records the children it is asked to stop.
type stopOnly struct{ stopped []*actor.PID }

func (s *stopOnly) Children() []*actor.PID          { return nil }
func (s *stopOnly) EscalateFailure(any, any)        {}
func (s *stopOnly) RestartChildren(...*actor.PID)   {}
func (s *stopOnly) StopChildren(pids ...*actor.PID) { s.stopped = append(s.stopped, pids...) }
func (s *stopOnly) ResumeChildren(...*actor.PID)    {}
func (s *stopOnly) String() string                  { return "stopOnly" }

var _ actor.Supervisor = (*stopOnly)(nil)

// TestAbandonedEpochFailureIsNoError: a worker's task of an epoch the job
// has rolled back from fails (on main: level=ERROR "task failed" epoch=2,
// read as a new failure): it is logged at WARN, saying that the epoch was
// abandoned, whether the worker already runs the next deployment, runs
// none, or has only heard the coordinator's new epoch in a heartbeat. A
// failure of the epoch running is still an ERROR.
func TestAbandonedEpochFailureIsNoError(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	deployment := func(epoch uint64) *shared {
		sh := &shared{runCtx: context.Background()}
		sh.inc.Store(sh.newIncarnation(epoch, nil, nil))
		return sh
	}
	for _, tc := range []struct {
		name       string
		dep        *shared
		coordEpoch uint64
		want       string
	}{
		{"the next deployment runs", deployment(3), 3, `level=WARN msg="task of an abandoned epoch failed; not reported, the job has rolled back" task=sum#1 epoch=2 err="link lost" now="epoch 3"`},
		{"no deployment runs", nil, 2, `level=WARN msg="task of an abandoned epoch failed; not reported, the job has rolled back" task=sum#1 epoch=2 err="link lost" now="no deployment"`},
		{"the coordinator's heartbeat says epoch 3", deployment(2), 3, `level=WARN msg="task of an abandoned epoch failed; not reported, the job has rolled back" task=sum#1 epoch=2 err="link lost" now="epoch 3 on the coordinator"`},
		{"the epoch running", deployment(2), 2, `level=ERROR msg="task failed" task=sum#1 epoch=2 err="link lost"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := &workerHost{log: slog.New(slog.NewTextHandler(&buf, nil)), system: system, dep: tc.dep, coordEpoch: tc.coordEpoch,
				coordPID: actor.NewPID(system.Address(), "no-coordinator")}
			sup := &stopOnly{}
			child := actor.NewPID(system.Address(), "sum#1")
			h.HandleFailure(system, sup, child, nil, &TaskError{Task: "sum#1", Epoch: 2, Value: errors.New("link lost")}, nil)
			out := strings.TrimSpace(buf.String())
			if _, line, _ := strings.Cut(out, " "); line != tc.want { // past time=
				t.Errorf("logged\n%s\nwant\n%s", out, tc.want)
			}
			if len(sup.stopped) != 1 {
				t.Errorf("stopped %v, want the failed task", sup.stopped)
			}
		})
	}
}
