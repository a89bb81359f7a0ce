package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
)

// TokenEnv is the environment variable whose value, when set, the server
// requires as a bearer token.
const TokenEnv = "SNAPFLOW_TOKEN"

// ErrNoJob is returned to a checkpoint or savepoint request that comes
// while no job is attached (before the first, or between two).
var ErrNoJob = errors.New("serve: no job is attached")

// Server is a running monitoring server: a monitor and the HTTP server
// that serves it. A nil *Server is valid: its methods do nothing, so that
// a program can wire it whether -http is given or not.
type Server struct {
	mon *monitor.Monitor
	web *web.Server

	mu  sync.Mutex
	job *actors.Job // the job that checkpoint and savepoint requests go to
}

// Start starts serving on addr ("host:port"; a host-less ":8080" binds
// loopback) until Close, and prints "dashboard: URL/" on stdout. With an
// empty addr it starts nothing and returns a nil *Server. ctx bounds only
// the start: the server outlives it until Close. The server logs to
// logger (nil: slog.Default()).
func Start(ctx context.Context, addr string, stdout io.Writer, logger *slog.Logger) (*Server, error) {
	if addr == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	mon, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	s := &Server{mon: mon}
	token := os.Getenv(TokenEnv)
	s.web, err = web.Start(context.WithoutCancel(ctx), web.Config{Addr: addr, Token: token, Gatherer: reg, Logger: logger}, mon, controller{s})
	if err != nil {
		return nil, fmt.Errorf("serve: -http %s: %w", addr, err)
	}
	note := ""
	if token != "" {
		note = fmt.Sprintf(" (it wants the bearer token in %s: open it once as /?token=...)", TokenEnv)
	}
	fmt.Fprintf(stdout, "dashboard: %s/%s\n", s.web.URL(), note)
	return s, nil
}

// Options returns the options that feed the monitor with a job's events;
// give them to actors.Start before any other listener, so that the
// monitor has seen an event by the time the others do. Nil for a nil
// Server.
func (s *Server) Options() []actors.Option {
	if s == nil {
		return nil
	}
	return []actors.Option{actors.WithListener(s.mon.Listener())}
}

// Attach makes j the job the server shows and controls, in place of the
// one attached before. A nil job is ignored.
func (s *Server) Attach(j *actors.Job) {
	if s == nil || j == nil {
		return
	}
	s.mon.Attach(j)
	s.mu.Lock()
	s.job = j
	s.mu.Unlock()
}

// URL is the server's base URL, "http://host:port"; "" for a nil Server.
func (s *Server) URL() string {
	if s == nil {
		return ""
	}
	return s.web.URL()
}

// Close stops the server. It is safe to call more than once.
func (s *Server) Close() error {
	if s == nil {
		return nil
	}
	if err := s.web.Close(); err != nil {
		return fmt.Errorf("serve: close: %w", err)
	}
	return nil
}

// attached returns the attached job.
func (s *Server) attached() (*actors.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.job == nil {
		return nil, ErrNoJob
	}
	return s.job, nil
}

// controller is the web.Controller of a Server: it forwards each request
// to the job attached at that moment.
type controller struct{ s *Server }

func (c controller) Checkpoint(ctx context.Context) (uint64, error) {
	j, err := c.s.attached()
	if err != nil {
		return 0, err
	}
	return j.Checkpoint(ctx)
}

func (c controller) Savepoint(ctx context.Context, name string) (uint64, error) {
	j, err := c.s.attached()
	if err != nil {
		return 0, err
	}
	return j.Savepoint(ctx, name)
}

func (c controller) StopWithSavepoint(ctx context.Context, name string) (uint64, error) {
	j, err := c.s.attached()
	if err != nil {
		return 0, err
	}
	return j.StopWithSavepoint(ctx, name)
}
