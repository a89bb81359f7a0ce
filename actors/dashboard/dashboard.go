package dashboard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/actors/web"
)

// TokenEnv is the environment variable that snapflow's programs read the
// token from: the examples' -http servers and snapflow jobs status.
const TokenEnv = "SNAPFLOW_TOKEN"

// ErrNoJob is returned to a checkpoint or savepoint request that comes
// while no job is attached (before the first, or between two).
var ErrNoJob = errors.New("dashboard: no job is attached")

// Server is a running monitoring server: a monitor and the HTTP server
// that serves it. A nil *Server is valid: its methods do nothing, so that
// a program can wire it whether -http is given or not.
type Server struct {
	mon *monitor.Monitor
	web *web.Server

	token bool // requests need a bearer token

	mu  sync.Mutex
	job *actors.Job // the job that checkpoint and savepoint requests go to
}

// Config configures a Server.
type Config struct {
	// Addr is where the server listens, "host:port" (a host-less ":8080"
	// binds loopback). With Addr empty nothing is served: Start returns a
	// nil *Server, whose methods do nothing, so that a program can pass
	// its -http flag as it is.
	Addr string
	// Token, when set, is the bearer token every request must carry (the
	// page and the event stream also take ?token=). Set it whenever Addr
	// is off loopback; TokenEnv names the variable the CLI reads it from.
	Token string
	// Logger receives the server's logs (nil: slog.Default()).
	Logger *slog.Logger
}

// Start starts serving until Close. ctx bounds only the start: the server
// outlives it until Close.
func Start(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Addr == "" {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	mon, err := monitor.New(monitor.Options{Registry: reg})
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s := &Server{mon: mon, token: cfg.Token != ""}
	s.web, err = web.Start(context.WithoutCancel(ctx), web.Config{Addr: cfg.Addr, Token: cfg.Token, Gatherer: reg, Logger: cfg.Logger}, mon, controller{s})
	if err != nil {
		return nil, fmt.Errorf("dashboard: %s: %w", cfg.Addr, err)
	}
	return s, nil
}

// Banner is the line a program prints for its user: "dashboard:
// http://127.0.0.1:8080/", saying so when the server wants a token. ""
// for a nil Server.
func (s *Server) Banner() string {
	if s == nil {
		return ""
	}
	note := ""
	if s.token {
		note = fmt.Sprintf(" (it wants the bearer token, as in %s: open it once as /?token=...)", TokenEnv)
	}
	return fmt.Sprintf("dashboard: %s/%s", s.web.URL(), note)
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
		return fmt.Errorf("dashboard: close: %w", err)
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
