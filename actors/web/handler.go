package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// handler builds the server's routes on a mux of its own, inside the
// middleware every request passes: panic recovery, common headers,
// authentication and cross-origin protection for POST requests.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/{$}", methods{http.MethodGet: s.dashboard})
	mux.Handle("/metrics", methods{http.MethodGet: s.metrics()})
	mux.Handle("/api/v1/job", methods{http.MethodGet: s.job})
	mux.Handle("/api/v1/checkpoints", methods{http.MethodGet: s.checkpoints, http.MethodPost: s.triggerCheckpoint})
	mux.Handle("/api/v1/checkpoints/{id}", methods{http.MethodGet: s.checkpoint})
	mux.Handle("/api/v1/timeline", methods{http.MethodGet: s.timeline})
	mux.Handle("/api/v1/events", methods{http.MethodGet: s.events})
	mux.Handle("/api/v1/savepoints", methods{http.MethodPost: s.savepoint})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "web: no route %s %q", r.Method, r.URL.Path)
	})

	// A page of another site must not make a visitor's browser trigger
	// checkpoints on a loopback server without a token.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusForbidden, "web: cross-origin %s %q refused", r.Method, r.URL.Path)
	}))
	return s.guard(s.checkHost(s.authenticate(cop.Handler(mux))))
}

// checkHost refuses, on a server without a token, a request whose Host is
// a name other than localhost: a page of another site whose name the
// attacker rebinds to 127.0.0.1 (DNS rebinding) would otherwise pass the
// cross-origin check, its Origin and Host being the same name, and read
// the API or stop the job. IP literals and localhost are what a browser
// sends for a loopback or LAN address typed by hand. With a token, the
// token protects every request.
func (s *Server) checkHost(next http.Handler) http.Handler {
	if s.cfg.Token != "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hostAllowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Warn("web: request for another host name refused (DNS rebinding?); set a token to serve other names", "host", r.Host, "remote", r.RemoteAddr)
		writeError(w, http.StatusMisdirectedRequest, "web: host %q refused: without a token this server answers only localhost and IP addresses", r.Host)
	})
}

// hostAllowed reports whether a Host header names localhost or an IP
// address.
func hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.EqualFold(host, "localhost.") {
		return true
	}
	_, err := netip.ParseAddr(host)
	return err == nil
}

// methods routes a path by method; a method it lacks gets 405 with Allow.
// HEAD is served by GET.
type methods map[string]http.HandlerFunc

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := m[r.Method]
	if !ok && r.Method == http.MethodHead {
		h, ok = m[http.MethodGet]
	}
	if ok {
		h(w, r)
		return
	}
	allow := make([]string, 0, len(m)+1)
	for method := range m {
		allow = append(allow, method)
		if method == http.MethodGet {
			allow = append(allow, http.MethodHead)
		}
	}
	slices.Sort(allow)
	w.Header().Set("Allow", strings.Join(allow, ", "))
	writeError(w, http.StatusMethodNotAllowed, "web: method %s not allowed on %q (allowed: %s)",
		r.Method, r.URL.Path, strings.Join(allow, ", "))
}

// guard is the outermost middleware: it counts the handler as running (so
// that Close waits for it), sets the headers every answer carries, and
// turns a panic into a 500 rather than a dropped connection.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.enter() {
			writeError(w, http.StatusServiceUnavailable, "web: server closing")
			return
		}
		defer s.active.Done()
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer") // the page's URL may hold ?token=
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-store")
		rw := &watchedWriter{ResponseWriter: w}
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("web: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v, "stack", string(debug.Stack()))
			if rw.wrote {
				panic(http.ErrAbortHandler) // cut the answer short rather than let it look complete
			}
			writeError(rw, http.StatusInternalServerError, "web: internal error serving %s %q", r.Method, r.URL.Path)
		}()
		next.ServeHTTP(rw, r)
	})
}

// watchedWriter remembers whether the answer has started. Unwrap lets
// http.ResponseController reach the connection's Flush and deadlines.
type watchedWriter struct {
	http.ResponseWriter
	wrote bool
}

func (w *watchedWriter) WriteHeader(code int) {
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *watchedWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

func (w *watchedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// authenticate requires Config.Token, when set, on every request.
func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	want := sha256.Sum256([]byte(s.cfg.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.authorized(r, want) {
			next.ServeHTTP(w, r)
			return
		}
		s.log.Debug("web: unauthorized request", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
		w.Header().Set("WWW-Authenticate", `Bearer realm="snapflow"`)
		writeError(w, http.StatusUnauthorized, "web: missing or wrong bearer token")
	})
}

// authorized checks the request's bearer token, or its ?token= on the
// routes a browser opens without headers (the page and the event stream).
// The comparison hashes both sides so that it takes the same time whatever
// the token's length or content.
func (s *Server) authorized(r *http.Request, want [sha256.Size]byte) bool {
	equal := func(got string) bool {
		h := sha256.Sum256([]byte(got))
		return subtle.ConstantTimeCompare(h[:], want[:]) == 1
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		scheme, tok, ok := strings.Cut(auth, " ")
		return ok && strings.EqualFold(scheme, "Bearer") && equal(strings.TrimSpace(tok))
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	if r.URL.Path != "/" && r.URL.Path != "/api/v1/events" {
		return false
	}
	tok := r.URL.Query()["token"]
	return len(tok) == 1 && equal(tok[0])
}

// metrics serves Config.Gatherer, or 404 without one.
func (s *Server) metrics() http.HandlerFunc {
	if s.cfg.Gatherer == nil {
		return func(w http.ResponseWriter, _ *http.Request) {
			writeError(w, http.StatusNotFound, "web: no metrics: the server has no Prometheus gatherer (Config.Gatherer)")
		}
	}
	h := promhttp.HandlerFor(s.cfg.Gatherer, promhttp.HandlerOpts{
		ErrorLog:      promLogger{s},
		ErrorHandling: promhttp.ContinueOnError,
	})
	return h.ServeHTTP
}

// promLogger passes promhttp's errors to the server's logger.
type promLogger struct{ s *Server }

func (l promLogger) Println(v ...any) {
	l.s.log.Warn("web: metrics", "err", strings.TrimSpace(fmt.Sprintln(v...)))
}
