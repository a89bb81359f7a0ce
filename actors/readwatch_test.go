package actors_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// recordsTo is a slog handler that sends every record to a channel.
type recordsTo chan slog.Record

func (c recordsTo) Enabled(context.Context, slog.Level) bool { return true }
func (c recordsTo) Handle(_ context.Context, r slog.Record) error {
	select {
	case c <- r.Clone():
	default:
	}
	return nil
}
func (c recordsTo) WithAttrs(as []slog.Attr) slog.Handler { return attrsHandler{c, as} }
func (c recordsTo) WithGroup(string) slog.Handler         { return c }

type attrsHandler struct {
	c     recordsTo
	attrs []slog.Attr
}

func (h attrsHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h attrsHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(h.attrs...)
	return h.c.Handle(ctx, r)
}
func (h attrsHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return attrsHandler{h.c, append(append([]slog.Attr(nil), h.attrs...), as...)}
}
func (h attrsHandler) WithGroup(string) slog.Handler { return h }

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
func TestBlockedReadNamedWhileBlocked(t *testing.T) {
	release := make(chan struct{})
	g := topology.New("blocked-read")
	src := topology.FromSource(g, "stuck", func(int, int) topology.Source[int64] { return &stuckSource{release: release} })
	topology.Sink(src, "sink", func(int64) error { return nil })
	logs := make(recordsTo, 1024)
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0), actors.WithLogger(slog.New(logs)))
	if err != nil {
		t.Fatal(err)
	}
	for r := range logs {
		if r.Level != slog.LevelWarn || r.Message[:min(len(r.Message), 26)] != "a source read is blocked; " {
			continue
		}
		var task string
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "task" {
				task = a.Value.String()
			}
			return true
		})
		if task != "stuck#0" {
			t.Errorf("the warning names task %q, want stuck#0", task)
		}
		break
	}
	close(release)
	if err := waitJob(t, j); err != nil {
		t.Fatal(err)
	}
}
