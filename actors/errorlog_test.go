package actors_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// failureLogs keeps the attributes of every "task failed" record.
type failureLogs struct {
	mu      *sync.Mutex
	records *[]map[string]string
}

func (h failureLogs) Enabled(context.Context, slog.Level) bool { return true }
func (h failureLogs) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "task failed" {
		return nil
	}
	attrs := map[string]string{}
	r.Attrs(func(a slog.Attr) bool { attrs[a.Key] = a.Value.String(); return true })
	h.mu.Lock()
	*h.records = append(*h.records, attrs)
	h.mu.Unlock()
	return nil
}
func (h failureLogs) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h failureLogs) WithGroup(string) slog.Handler      { return h }

// TestReturnedErrorLogsNoStack: an operator's returned error is logged as
// the error, without the runtime's stack (before, several KB of snapflow's
// own frames on every restart); a panic is logged with the stack of the
// code that panicked.
func TestReturnedErrorLogsNoStack(t *testing.T) {
	for _, c := range []struct {
		name  string
		fail  func(int64) (int64, error)
		stack bool
	}{
		{"returned", func(int64) (int64, error) { return 0, errors.New("bad record") }, false},
		{"panic", func(int64) (int64, error) { panic("bad record") }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := topology.New("errlog-" + c.name)
			src := topology.Sequence(g, "source", 1, 10)
			keyed := topology.KeyBy(src, func(v int64) int64 { return v % 2 })
			bad := topology.Process(keyed, "bad", func(*topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
				return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
					r, err := c.fail(v)
					out.Emit(r)
					return err
				}
			})
			topology.Sink(bad, "sink", func(int64) error { return nil })
			var mu sync.Mutex
			var recs []map[string]string
			j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()),
				actors.WithLogger(slog.New(failureLogs{mu: &mu, records: &recs})),
				actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 1, Window: time.Minute}))
			if err != nil {
				t.Fatal(err)
			}
			if err := waitJob(t, j); err == nil {
				t.Fatal("the job succeeded")
			}
			mu.Lock()
			defer mu.Unlock()
			if len(recs) == 0 {
				t.Fatal("no task failure logged")
			}
			for _, r := range recs {
				if !strings.Contains(r["err"], "bad record") {
					t.Errorf("logged err %q", r["err"])
				}
				stack, has := r["stack"]
				if has != c.stack || (c.stack && !strings.Contains(stack, "TestReturnedErrorLogsNoStack")) {
					t.Errorf("logged stack (%v): %.300s", has, stack)
				}
			}
		})
	}
}
