package web

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snapflow/snapflow/actors/monitor"
)

// ErrConfig is wrapped by the errors Start returns for a bad Config or
// argument.
var ErrConfig = errors.New("web: bad config")

// DefaultRequestTimeout bounds how long a POST waits for its checkpoint or
// savepoint when Config.RequestTimeout is zero.
const DefaultRequestTimeout = 2 * time.Minute

// DefaultMaxEventStreams and DefaultMaxControlRequests bound, when Config
// gives 0, how many event streams may be open and how many checkpoint or
// savepoint requests may wait for the job at once: each holds a goroutine
// and a connection. Past them a request gets 503 with Retry-After.
const (
	DefaultMaxEventStreams    = 64
	DefaultMaxControlRequests = 16
)

// timeouts are the http.Server's (variables for the tests).
var timeouts = struct{ readHeader, read, write, idle time.Duration }{
	readHeader: 10 * time.Second,
	read:       30 * time.Second,
	write:      30 * time.Second,
	idle:       2 * time.Minute,
}

// Config configures the server. The zero value serves on a free port of
// 127.0.0.1 without a token and without /metrics.
type Config struct {
	// Addr is "host:port" to listen on. "" means "127.0.0.1:0" (a free
	// port; read it back with Server.Addr), and a host-less ":8080" binds
	// 127.0.0.1, not every interface: give "0.0.0.0:8080" (and a Token)
	// to serve other machines.
	Addr string
	// Token, when set, is required on every request as
	// "Authorization: Bearer <token>" (or "?token=" on the dashboard page
	// and the event stream, see the package documentation).
	Token string
	// Gatherer serves /metrics when set (usually the prometheus.Registry
	// the monitor registers on); /metrics is 404 without it.
	Gatherer prometheus.Gatherer
	// Logger receives the server's logs (nil: slog.Default()).
	Logger *slog.Logger
	// RequestTimeout bounds how long POST /api/v1/checkpoints and
	// /api/v1/savepoints wait for the job (0: DefaultRequestTimeout).
	RequestTimeout time.Duration
	// MaxEventStreams bounds the open event streams (0:
	// DefaultMaxEventStreams), MaxControlRequests the checkpoint and
	// savepoint requests waiting at once (0: DefaultMaxControlRequests).
	MaxEventStreams, MaxControlRequests int
}

// Controller is what the server may ask of a job; *actors.Job implements
// it. Each call gets the request's context, bounded by
// Config.RequestTimeout.
type Controller interface {
	// Checkpoint triggers a checkpoint and returns its id once complete.
	Checkpoint(ctx context.Context) (uint64, error)
	// Savepoint takes a savepoint called name and returns its id.
	Savepoint(ctx context.Context, name string) (uint64, error)
	// StopWithSavepoint takes a savepoint called name and stops the job.
	StopWithSavepoint(ctx context.Context, name string) (uint64, error)
}

// Server is a running HTTP server. Close stops it.
type Server struct {
	cfg  Config
	mon  *monitor.Monitor
	ctl  Controller
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	page []byte // the dashboard, assets inlined
	csp  string

	base   context.Context // parent of every request's context
	cancel context.CancelFunc
	served chan struct{} // closed when Serve has returned
	once   sync.Once
	err    error

	mu      sync.Mutex
	closing bool
	active  sync.WaitGroup // handlers running

	streams, controls chan struct{} // a slot per open event stream, per waiting control request
}

// Start listens on cfg.Addr and serves m (and ctl, when not nil: without
// it the server is read-only and POST requests get 403) until Close is
// called or ctx ends. It returns once the listener is open, so that Addr
// and URL are valid.
func Start(ctx context.Context, cfg Config, m *monitor.Monitor, ctl Controller) (*Server, error) {
	if m == nil {
		return nil, fmt.Errorf("web: start: nil monitor: %w", ErrConfig)
	}
	if cfg.RequestTimeout < 0 {
		return nil, fmt.Errorf("web: start: RequestTimeout %v is negative: %w", cfg.RequestTimeout, ErrConfig)
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxEventStreams < 0 || cfg.MaxControlRequests < 0 {
		return nil, fmt.Errorf("web: start: MaxEventStreams %d and MaxControlRequests %d must not be negative: %w",
			cfg.MaxEventStreams, cfg.MaxControlRequests, ErrConfig)
	}
	if cfg.MaxEventStreams == 0 {
		cfg.MaxEventStreams = DefaultMaxEventStreams
	}
	if cfg.MaxControlRequests == 0 {
		cfg.MaxControlRequests = DefaultMaxControlRequests
	}
	addr, err := listenAddr(cfg.Addr)
	if err != nil {
		return nil, err
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	logger = logger.With("component", "web")
	page, err := buildPage()
	if err != nil {
		return nil, err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("web: listen on %s: %w", addr, err)
	}
	s := &Server{cfg: cfg, mon: m, ctl: ctl, log: logger, ln: ln, page: page.html, csp: page.csp, served: make(chan struct{}),
		streams: make(chan struct{}, cfg.MaxEventStreams), controls: make(chan struct{}, cfg.MaxControlRequests)}
	s.base, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.srv = &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: timeouts.readHeader,
		ReadTimeout:       timeouts.read,
		// The event stream and the POST requests move their own
		// deadlines (see http.ResponseController); everything else is
		// answered well within these.
		WriteTimeout:   timeouts.write,
		IdleTimeout:    timeouts.idle,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return s.base },
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}
	go s.serve()
	go func() {
		select {
		case <-ctx.Done():
			if err := s.Close(); err != nil {
				s.log.Warn("web: close on context end", "err", err)
			}
		case <-s.served:
		}
	}()
	s.log.Info("web: serving", "addr", s.Addr(), "token", cfg.Token != "", "metrics", cfg.Gatherer != nil, "control", ctl != nil)
	if cfg.Token == "" && !loopback(s.ln.Addr()) {
		s.log.Warn("web: serving beyond loopback without a token: anyone who reaches the address can read the job and, with a Controller, take savepoints or stop it; set Config.Token",
			"addr", s.Addr())
	}
	return s, nil
}

// loopback reports whether a listener's address is a loopback one.
func loopback(a net.Addr) bool {
	ta, ok := a.(*net.TCPAddr)
	return ok && ta.IP.IsLoopback()
}

func (s *Server) serve() {
	defer close(s.served)
	if err := s.srv.Serve(s.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Error("web: serve", "addr", s.Addr(), "err", err)
	}
}

// listenAddr applies Config.Addr's defaults: "" is 127.0.0.1:0 and a
// missing host is 127.0.0.1.
func listenAddr(addr string) (string, error) {
	if addr == "" {
		return "127.0.0.1:0", nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("web: address %q: %w: %w", addr, err, ErrConfig)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// Addr is the address the server listens on, "host:port" with the port
// chosen when Config.Addr asked for port 0.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is the server's base URL, "http://host:port" (without the token).
func (s *Server) URL() string { return "http://" + s.Addr() }

// Close stops the server: the listener and every connection close, the
// event streams and pending POST requests end (a checkpoint they asked for
// may still complete), and Close waits until the server's goroutines and
// handlers have returned. It is safe to call more than once; later calls return the
// first's result.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closing = true
		s.mu.Unlock()
		s.cancel()
		if err := s.srv.Close(); err != nil {
			s.err = fmt.Errorf("web: close %s: %w", s.Addr(), err)
		}
		<-s.served
		s.active.Wait()
		s.log.Info("web: closed", "addr", s.Addr())
	})
	return s.err
}

// enter registers a running handler; false once the server is closing.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.active.Add(1)
	return true
}

// slot takes a slot of slots for a request, or answers 503 with
// Retry-After when none is free; release gives it back.
func (s *Server) slot(w http.ResponseWriter, slots chan struct{}, what string) (release func(), ok bool) {
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, true
	default:
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, "web: too many %s at once (%d); try again later", what, cap(slots))
		return nil, false
	}
}
