package miniotest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// startAttempts bounds the tries with fresh ports, for when another
// process takes a port between picking it and MinIO binding it.
const startAttempts = 3

// Server is a MinIO server running as a child process of the test.
type Server struct {
	bin      string
	dataDir  string
	certsDir string
	logPath  string
	addr     string // API, 127.0.0.1:port
	console  string // console, 127.0.0.1:port
	user     string
	password string
	caFile   string // set with TLS

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
}

// Option changes how Start runs the server.
type Option func(*Server)

// WithTLS serves HTTPS with a fresh self-signed certificate for 127.0.0.1
// and localhost; CAFile returns its path.
func WithTLS() Option {
	return func(s *Server) { s.caFile = filepath.Join(s.certsDir, "public.crt") }
}

// Start starts a MinIO server on free loopback ports with a fresh data
// directory and random root credentials, waits until
// /minio/health/live answers 200 and the server no longer reports itself
// offline (at most 60s), and stops it when the
// test ends. A missing binary skips the test (fails it with CI=true); a
// server that does not start fails it.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	s := &Server{
		bin:      bin,
		dataDir:  filepath.Join(dir, "data"),
		certsDir: filepath.Join(dir, "certs"),
		logPath:  filepath.Join(dir, "minio.log"),
		user:     "snapflow-" + strings.ToLower(rand.Text()[:8]),
		password: rand.Text(),
	}
	for _, o := range opts {
		o(s)
	}
	if err := os.MkdirAll(s.certsDir, 0o700); err != nil {
		t.Fatalf("miniotest: %v", err)
	}
	if s.caFile != "" {
		if err := writeCert(s.certsDir); err != nil {
			t.Fatalf("miniotest: certificate: %v", err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("miniotest: MinIO log %s:\n%s", s.logPath, s.log())
		}
	})
	t.Cleanup(s.Stop)
	var err error
	for range startAttempts {
		if s.addr, err = freeAddr(); err != nil {
			break
		}
		if s.console, err = freeAddr(); err != nil {
			break
		}
		if err = s.start(); err == nil || !strings.Contains(s.log(), "address already in use") {
			break
		}
	}
	if err != nil {
		t.Fatalf("miniotest: MinIO server %s did not start: %v\nlog:\n%s", s.bin, err, s.log())
	}
	return s
}

// freeAddr returns a loopback address with a port that was free just now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// start launches the process and waits until it is live.
func (s *Server) start() error {
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, "server", "--address", s.addr, "--console-address", s.console,
		"--certs-dir", s.certsDir, s.dataDir)
	cmd.Env = append(environ(),
		"MINIO_ROOT_USER="+s.user,
		"MINIO_ROOT_PASSWORD="+s.password,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	err = cmd.Start()
	if cerr := logf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the exit status of a killed server says nothing
		close(done)
	}()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	if err := s.waitLive(done); err != nil {
		s.Stop()
		return err
	}
	return nil
}

// environ returns the test's environment without MINIO_ variables, which
// could change how the server runs.
func environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "MINIO_") {
			env = append(env, kv)
		}
	}
	return env
}

// Stop kills the server (SIGKILL) and waits for it to exit. Its ports and
// data stay, for Restart. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		panic(fmt.Sprintf("miniotest: kill MinIO pid %d: %v", s.cmd.Process.Pid, err))
	}
	<-s.done
	s.cmd = nil
}

// Restart stops the server if it runs and starts it again on the same
// ports with the same data, waiting until it is live. Call it from the
// test's goroutine.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatalf("miniotest: MinIO restart on %s: %v\nlog:\n%s", s.addr, err, s.log())
	}
}

// log returns the end of the server's log.
func (s *Server) log() string {
	data, err := os.ReadFile(s.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const tail = 8 << 10
	if len(data) > tail {
		data = append([]byte("…"), data[len(data)-tail:]...)
	}
	return string(data)
}
