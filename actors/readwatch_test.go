package actors_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// blockedWarnings is a slog handler that sends the task of every warning
// about a blocked source read to a channel, and drops every other record.
type blockedWarnings struct {
	tasks chan string
	task  string // from the logger's attributes
}

func (h blockedWarnings) Enabled(context.Context, slog.Level) bool { return true }
func (h blockedWarnings) Handle(_ context.Context, r slog.Record) error {
	if r.Level == slog.LevelWarn && strings.HasPrefix(r.Message, "a source read is blocked") {
		select {
		case h.tasks <- h.task:
		default: // one is enough
		}
	}
	return nil
}
func (h blockedWarnings) WithAttrs(as []slog.Attr) slog.Handler {
	for _, a := range as {
		if a.Key == "task" {
			h.task = a.Value.String()
		}
	}
	return h
}
func (h blockedWarnings) WithGroup(string) slog.Handler { return h }

// stuckSource emits 1..10, then blocks in Read until release closes.
type stuckSource struct {
	release chan struct{}
	next    int64
}

func (s *stuckSource) Open(context.Context, []byte) error { return nil }
func (s *stuckSource) Read(buf []int64) (int, error) {
	if s.next == 10 {
		<-s.release
		return 0, io.EOF
	}
	n := 0
	for ; n < len(buf) && s.next < 10; n++ {
		s.next++
		buf[n] = s.next
	}
	return n, nil
}
func (s *stuckSource) Offset() []byte { return nil }
func (s *stuckSource) Close() error   { return nil }

// TestBlockedReadNamedWhileBlocked: a source whose Read blocks is named in
// a warning while it blocks, not only once it returns; when it returns,
// the job finishes.
// startStuck starts job name, whose source blocks in Read until release
// closes, and returns once the runtime has warned about the blocked read,
// with the task the warning named.
func startStuck(t *testing.T, name string, release chan struct{}, opts ...actors.Option) (*actors.Job, string) {
	t.Helper()
	g := topology.New(name)
	src := topology.FromSource(g, "stuck", func(int, int) topology.Source[int64] { return &stuckSource{release: release} })
	topology.Sink(src, "sink", func(int64) error { return nil })
	warned := make(chan string, 1)
	j, err := actors.Start(context.Background(), g, append(opts, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0),
		actors.WithLogger(slog.New(blockedWarnings{tasks: warned})))...)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case task := <-warned:
		return j, task
	case <-time.After(time.Minute): // a failure bound only: the warning comes at 1 s
		t.Fatal("no warning about the blocked read within a minute")
		return nil, ""
	}
}

func TestBlockedReadNamedWhileBlocked(t *testing.T) {
	release := make(chan struct{})
	j, task := startStuck(t, "blocked-read", release)
	if task != "stuck#0" {
		t.Errorf("the warning names task %q, want stuck#0", task)
	}
	close(release)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
}

// TestStopBoundedWhileReadBlocks: Stop returns within its timeout while a
// source blocks in Read and ignores its context, with an error naming the
// task (before, it did not return); once the read returns, the job ends
// and Wait says it was stopped.
func TestStopBoundedWhileReadBlocks(t *testing.T) {
	release := make(chan struct{})
	j, _ := startStuck(t, "blocked-stop", release, actors.WithStopTimeout(200*time.Millisecond))
	err := j.Stop()
	if !errors.Is(err, actors.ErrStopTimeout) || !strings.Contains(err.Error(), "task stuck#0") {
		t.Fatalf("Stop: %v, want ErrStopTimeout naming task stuck#0", err)
	}
	close(release)
	if err := waitJob(t, j); !errors.Is(err, actors.ErrStopped) {
		t.Fatalf("Wait after the read returned: %v, want ErrStopped", err)
	}
}
