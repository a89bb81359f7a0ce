//go:build unix

package actors_test

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/messages"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// forgedCluster starts the forged-message test's cluster (a coordinator
// and two workers, see TestForgedHelperProcess) and waits for a completed
// checkpoint. It returns the processes, the coordinator's address, the
// workers' addresses and ids, and the environment that carries the secret.
func forgedCluster(t *testing.T) (coord *swProc, workers []*swProc, addr string, addrs, ids, env []string) {
	t.Helper()
	env = []string{nodeauth.EnvSecret + "=" + nodeauth.NewSecret()}
	coord = startHelper(t, "coordinator", "TestForgedHelperProcess", append(env, fgRoleEnv+"=coordinator", fgStoreEnv+"="+t.TempDir()))
	_, line := coord.await(t, 0, "the coordinator's address", func(l string) bool { return strings.HasPrefix(l, "listening ") })
	addr = strings.TrimPrefix(line, "listening ")
	idRe := regexp.MustCompile(` worker=(w-\S+)`)
	for i := range 2 {
		w := startHelper(t, "worker "+strconv.Itoa(i+1), "TestForgedHelperProcess", append(env, fgRoleEnv+"=worker", fgJoinEnv+"="+addr))
		_, line := w.await(t, 0, "the worker's address", func(l string) bool { return strings.HasPrefix(l, "listening ") })
		_, idLine := w.await(t, 0, "the worker's id", func(l string) bool { return strings.Contains(l, "worker listening") })
		m := idRe.FindStringSubmatch(idLine)
		if m == nil {
			t.Fatalf("no worker id in %q", idLine)
		}
		workers, addrs, ids = append(workers, w), append(addrs, strings.TrimPrefix(line, "listening ")), append(ids, m[1])
	}
	coord.await(t, 0, "a completed checkpoint", func(l string) bool { return strings.HasPrefix(l, "completed ") })
	return coord, workers, addr, addrs, ids, env
}

// finishExact releases the workers' sources and checks that the job ends
// exactly once, its workers with it.
func finishExact(t *testing.T, coord *swProc, workers []*swProc) {
	t.Helper()
	for _, w := range workers {
		w.send(t, "release")
	}
	if _, line := coord.await(t, 0, "the job's result", func(l string) bool { return strings.HasPrefix(l, "result ") }); line != "result exact" {
		t.Fatalf("coordinator: %s", line)
	}
	for _, w := range workers {
		if _, line := w.await(t, 0, "the worker's result", func(l string) bool { return strings.HasPrefix(l, "result ") }); line != "result ok" {
			t.Errorf("%s: %s", w.name, line)
		}
	}
}

// spy listens where a node will dial (a worker's Join address) and keeps
// all it is sent: the raw bytes of each connection, and, as a gRPC server,
// the metadata of every call that reaches it.
type spy struct {
	l        net.Listener
	mu       sync.Mutex
	raw      [][]byte
	md       metadata.MD
	captured chan struct{} // closed at the first connection closed or call seen
	once     sync.Once
}

func newSpy(t *testing.T) *spy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &spy{l: l, captured: make(chan struct{})}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(stream.Context())
		s.mu.Lock()
		s.md = metadata.Join(s.md, md)
		s.mu.Unlock()
		s.once.Do(func() { close(s.captured) })
		return status.Error(codes.Unavailable, "spy")
	}))
	go func() { _ = srv.Serve(&teeListener{Listener: l, s: s}) }()
	t.Cleanup(srv.Stop)
	return s
}

// teeListener records what its connections read.
type teeListener struct {
	net.Listener
	s *spy
}

func (l *teeListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.s.mu.Lock()
	i := len(l.s.raw)
	l.s.raw = append(l.s.raw, nil)
	l.s.mu.Unlock()
	return &teeConn{Conn: c, s: l.s, i: i}, nil
}

// teeConn reads what the peer sent in full, whatever its reader asks for
// (gRPC's server reads a preface of 24 bytes first), and records it.
type teeConn struct {
	net.Conn
	s       *spy
	i       int
	pending []byte
}

func (c *teeConn) Read(b []byte) (int, error) {
	if len(c.pending) == 0 {
		buf := make([]byte, 64<<10)
		n, err := c.Conn.Read(buf)
		c.s.mu.Lock()
		c.s.raw[c.i] = append(c.s.raw[c.i], buf[:n]...)
		c.s.mu.Unlock()
		if n == 0 {
			return 0, err
		}
		c.pending = buf[:n]
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

func (c *teeConn) Close() error {
	c.s.once.Do(func() { close(c.s.captured) })
	return c.Conn.Close()
}

// capture returns the metadata (without gRPC's own keys) and the raw
// bytes of the first connection.
func (s *spy) capture() (map[string]string, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	md := map[string]string{}
	for k, v := range s.md {
		if !strings.HasPrefix(k, ":") && k != "content-type" && k != "user-agent" && k != "te" && len(v) > 0 {
			md[k] = v[0]
		}
	}
	var raw []byte
	if len(s.raw) > 0 {
		raw = append(raw, s.raw[0]...)
	}
	return md, raw
}

// capturedMetadata presents, on every call, the metadata in js (a JSON
// object) that a listener captured.
type capturedMetadata string

func (c capturedMetadata) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	md := map[string]string{}
	if c != "" {
		if err := json.Unmarshal([]byte(c), &md); err != nil {
			return nil, err
		}
	}
	return md, nil
}

func (capturedMetadata) RequireTransportSecurity() bool { return false }

// TestCapturedCredentialReplayRefused: a listener at a new worker's Join
// address keeps whatever the worker sends it (the bytes of its
// connection, the metadata of its calls). A bare protoactor-go node that
// presents every captured header then sends the coordinator and each
// worker a PoisonPill, a registration, acknowledgements and failures; the
// captured bytes are also replayed as they are to the coordinator and to
// a worker. Every node refuses the replays, the job finishes exactly, and
// the attacker hears nothing.
func TestCapturedCredentialReplayRefused(t *testing.T) {
	coord, workers, addr, addrs, _, env := forgedCluster(t)
	s := newSpy(t)
	victim := startHelper(t, "worker joining the listener", "TestForgedHelperProcess", append(env, fgRoleEnv+"=worker", fgJoinEnv+"="+s.l.Addr().String()))
	victim.await(t, 0, "the worker's address", func(l string) bool { return strings.HasPrefix(l, "listening ") })
	select {
	case <-s.captured:
	case <-time.After(swDeadline):
		t.Fatalf("the listener captured nothing within %v", swDeadline)
	}
	md, raw := s.capture()
	if len(raw) == 0 {
		t.Fatal("the listener captured no bytes")
	}
	js, err := json.Marshal(md)
	if err != nil {
		t.Fatal(err)
	}
	a := startHelper(t, "attacker replaying the capture", "TestForgedHelperProcess",
		[]string{fgRoleEnv + "=attacker", fgTokenEnv + "=replay", fgCapturedEnv + "=" + string(js),
			fgJoinEnv + "=" + addr, fgWorkersEnv + "=" + strings.Join(addrs, ",")})
	a.await(t, 0, "its messages sent", func(l string) bool { return l == "forged" })
	for _, to := range []string{addr, addrs[0]} {
		replayRaw(t, to, raw)
	}
	finishExact(t, coord, workers)
	refused := func(l string) bool { return strings.Contains(l, "refused a connection from outside the cluster") }
	coord.await(t, 0, "a refusal of the replays", refused)
	workers[0].await(t, 0, "a refusal of the replays", refused)
	a.send(t, "count")
	if _, line := a.await(t, 0, "its count of replies", func(l string) bool { return strings.HasPrefix(l, "replies ") }); line != "replies 0" {
		t.Errorf("%s: %s to its registration", a.name, line)
	}
}

// replayRaw sends raw to addr on a new connection, as captured, reads the
// node's first answer, and closes the connection.
func replayRaw(t *testing.T, addr string, raw []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Errorf("replaying the capture to %s: %v (has the node ended?)", addr, err)
		return
	}
	defer c.Close()
	if _, err := c.Write(raw); err != nil {
		t.Logf("replaying to %s: %v", addr, err)
		return
	}
	_ = c.SetReadDeadline(time.Now().Add(nodeauth.HandshakeTimeout))
	_, _ = c.Read(make([]byte, 4096))
}

// impersonate is the impersonate attacker of TestForgedHelperProcess: a
// node with the cluster's secret that claims the ids of the cluster's
// workers, over and over until the process ends: registrations under
// them, and, for every task in the first epochs, failures, declines, ends
// of input and acknowledgements without state.
func impersonate(system *actor.ActorSystem, coordinator string, ids []string) {
	coord := actor.NewPID(coordinator, "snapflow-coordinator")
	tasks := []string{"src#0", "sum#0", "sum#1", "sum#2", "sink#0"}
	pass := func() {
		for _, id := range ids {
			for epoch := uint64(1); epoch <= 3; epoch++ {
				for i, task := range tasks {
					system.Root.Send(coord, &messages.TaskFailed{WorkerId: id, Epoch: epoch, TaskId: task, Reason: "impersonated"})
					system.Root.Send(coord, &messages.TaskFinished{WorkerId: id, Epoch: epoch, Task: uint32(i)})
					for c := uint64(1); c <= 20; c++ {
						system.Root.Send(coord, &messages.DeclineCheckpoint{WorkerId: id, Epoch: epoch, CheckpointId: c, TaskId: task, Reason: "impersonated"})
						system.Root.Send(coord, &messages.AckCheckpoint{WorkerId: id, Epoch: epoch, CheckpointId: c, TaskId: task})
					}
				}
			}
		}
	}
	pass()
	go func() {
		pace := time.NewTicker(10 * time.Millisecond)
		for range pace.C {
			pass()
		}
	}()
}

// reportForOthers sends the coordinator, in the names of the real workers
// ids, the reports that carry no acknowledgement or failure: a source's end
// of its records (which, counted, ends the job before its input has), a
// task's restore and its commit of a checkpoint, for every task index and
// the first epochs.
func reportForOthers(system *actor.ActorSystem, coordinator string, ids []string) {
	coord := actor.NewPID(coordinator, "snapflow-coordinator")
	pass := func() {
		for _, id := range ids {
			for e := uint64(1); e <= 3; e++ {
				for _, epoch := range []uint64{e, e<<20 | 1} {
					for task := uint32(0); task < 6; task++ {
						system.Root.Send(coord, &messages.TaskExhausted{WorkerId: id, Epoch: epoch, Task: task})
						system.Root.Send(coord, &messages.TaskRestored{WorkerId: id, Epoch: epoch, Task: task})
						for c := uint64(1); c <= 20; c++ {
							system.Root.Send(coord, &messages.CheckpointCommitted{WorkerId: id, Epoch: epoch, CheckpointId: c, Task: task})
						}
					}
				}
			}
		}
	}
	pass()
	go func() {
		pace := time.NewTicker(10 * time.Millisecond)
		for range pace.C {
			pass()
		}
	}()
}

// TestUnboundReportsRefused: a node with the cluster's secret that sends,
// in the names of the real workers, sources' ends of their records, tasks'
// restores and commits is refused by the coordinator (it logs why): the
// job, whose workers hold their sources until then, finishes exactly. Before
// these reports carried a worker id bound to the sending node, a forged end
// of records ended the job with its input unread.
func TestUnboundReportsRefused(t *testing.T) {
	coord, workers, addr, _, ids, env := forgedCluster(t)
	insider := startHelper(t, "insider reporting for the workers", "TestForgedHelperProcess",
		append(env, fgRoleEnv+"=attacker", fgTokenEnv+"=unbound", fgJoinEnv+"="+addr, fgWorkerIDsEnv+"="+strings.Join(ids, ",")))
	insider.await(t, 0, "its messages sent", func(l string) bool { return l == "forged" })
	finishExact(t, coord, workers)
	coord.await(t, 0, "the reports refused", func(l string) bool {
		return strings.Contains(l, "refused a message that names a worker of another node")
	})
}

// TestWorkerImpersonationRefused: a node with the cluster's secret that
// names the cluster's real workers in failures, declines, ends of input and
// acknowledgements of their tasks is refused by the coordinator (it logs
// why), which logs no failed or declined task: the job finishes exactly.
func TestWorkerImpersonationRefused(t *testing.T) {
	coord, workers, addr, _, ids, env := forgedCluster(t)
	insider := startHelper(t, "insider naming the workers", "TestForgedHelperProcess",
		append(env, fgRoleEnv+"=attacker", fgTokenEnv+"=impersonate", fgJoinEnv+"="+addr, fgWorkerIDsEnv+"="+strings.Join(ids, ",")))
	insider.await(t, 0, "its messages sent", func(l string) bool { return l == "forged" })
	finishExact(t, coord, workers)
	acted := 0
	for _, l := range coord.snapshot() {
		if strings.Contains(l, "task failed") || strings.Contains(l, "declined") {
			if acted++; acted <= 3 {
				t.Errorf("the coordinator acted on an impersonated message: %s", l)
			}
		}
	}
	if acted > 0 {
		t.Errorf("%d lines of the coordinator say it acted on impersonated messages", acted)
	}
	coord.await(t, 0, "the impersonation refused", func(l string) bool {
		return strings.Contains(l, "refused a message that names a worker of another node")
	})
}
