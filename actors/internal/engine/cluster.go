package engine

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"github.com/snapflow/snapflow/actors/membership"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/snapshots"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Cluster runs a job's tasks on worker processes (see ServeWorker) over
// protoactor-go remote, with the process that calls Start as the job's
// coordinator: it places the tasks, runs the checkpoint coordinator and the
// restart strategy, and writes the manifests. A lost worker (its process
// died, hung or lost its network) is the failure of every task on it: the
// job rolls back to the newest complete checkpoint and places its tasks on
// the workers that remain.
type Cluster struct {
	// Listen is the coordinator's address, host:port. The default,
	// "127.0.0.1:0", listens on loopback on a free port; Job.Address
	// returns the address taken.
	Listen string
	// Workers is how many workers must register before the job starts
	// (default 1). The job starts once at least this many have registered
	// and their slots hold every task.
	Workers int
	// Store is the URL of the snapshot store that every node opens (see
	// snapshots.Open): s3://..., or a directory every node shares. mem://
	// is refused: the workers could not see it. Credentials come from each
	// node's environment and are never sent.
	Store string
	// HeartbeatInterval is how often the coordinator and the workers check
	// on each other (default 1s); a node silent for HeartbeatTimeout
	// (default 5s) is lost.
	HeartbeatInterval, HeartbeatTimeout time.Duration
	// TLS, when set, makes every connection between nodes mutual TLS.
	// A Listen host off loopback needs it (see AllowPlaintext).
	TLS *TLS
	// Secret authenticates the nodes to each other: every node of the
	// cluster has the same one, of at least 16 bytes (for example the
	// output of `openssl rand -hex 32`), and refuses every connection
	// that does not prove it in a handshake of its own, before reading a
	// message (see docs/cluster.md). Default: the environment variable
	// SNAPFLOW_CLUSTER_SECRET. Keep it like the store's credentials.
	Secret string
	// AllowPlaintext lets Listen be off loopback without TLS, which is
	// refused otherwise: anyone on the network between the nodes could
	// read the data, and one who can alter traffic could take over a
	// connection after its handshake (see docs/cluster.md). It is logged
	// as a warning.
	AllowPlaintext bool
	// SlotTimeout is how long a failover waits for workers to offer slots
	// enough for every task, when a lost worker took too many with it
	// (default 5m; negative: the job fails at once). The wait counts
	// against no restart policy: a replacement that joins within it (a
	// restarted worker, a new one) resumes the job.
	SlotTimeout time.Duration
}

// TLS names the PEM files of mutual TLS between nodes: every node presents
// CertFile/KeyFile and accepts only peers whose certificate CAFile signed.
type TLS struct {
	CertFile, KeyFile, CAFile string
	// ServerName is the name the peers' certificates must carry (default:
	// the host of the address dialled).
	ServerName string
}

// Defaults of cluster mode.
const (
	DefaultListen            = "127.0.0.1:0"
	DefaultHeartbeatInterval = membership.DefaultHeartbeatInterval
	DefaultHeartbeatTimeout  = membership.DefaultHeartbeatTimeout
	DefaultSlotTimeout       = 5 * time.Minute
	// maxWireMessage bounds the gRPC messages between nodes: the endpoint
	// writer packs up to wireWriterBatch messages into one, each a batch
	// bounded by WithBatchBytes plus one record of at most MaxWireRecord.
	maxWireMessage  = 512 << 20
	wireWriterBatch = 16
	// MaxWireRecord is the largest encoded record that may cross nodes.
	MaxWireRecord = 16 << 20
)

// coordinatorName is the id of a coordinator's job actor, and workerName
// that of a worker's host actor: nodes address each other by them.
const (
	coordinatorName = "snapflow-coordinator"
	workerName      = "snapflow-worker"
)

// ErrNodeLost is wrapped by the failure of the tasks of a lost worker.
var ErrNodeLost = errors.New("actors: worker lost")

// NodeLostError is the failure of every task of a lost worker.
type NodeLostError struct {
	Worker  string // the worker's id
	Address string
	Reason  string // e.g. "no heartbeat for 5.1s"
	Tasks   []string
}

// Error implements error.
func (e *NodeLostError) Error() string {
	return fmt.Sprintf("actors: worker %s at %s lost (%s); its tasks %v fail", e.Worker, e.Address, e.Reason, e.Tasks)
}

// Unwrap returns ErrNodeLost.
func (e *NodeLostError) Unwrap() error { return ErrNodeLost }

// WithCoordinator makes the job's process the coordinator of a cluster: see
// Cluster. The store is opened from c.Store (WithStore must not be given).
func WithCoordinator(c Cluster) Option {
	return func(cfg *config) { cc := c; cfg.cluster = &cc }
}

func (c *Cluster) finish() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if c.Workers == 0 {
		c.Workers = 1
	}
	if c.Workers < 0 {
		return fmt.Errorf("cluster: Coordinator.Workers %d: must be at least 1", c.Workers)
	}
	hb := membership.Config{HeartbeatInterval: c.HeartbeatInterval, HeartbeatTimeout: c.HeartbeatTimeout}.WithDefaults()
	if err := hb.Validate(); err != nil {
		return fmt.Errorf("actors: Cluster: %w", err)
	}
	c.HeartbeatInterval, c.HeartbeatTimeout = hb.HeartbeatInterval, hb.HeartbeatTimeout
	if c.SlotTimeout == 0 {
		c.SlotTimeout = DefaultSlotTimeout
	}
	if c.Store == "" {
		return errors.New("cluster: Coordinator.Store is empty: every node must open the same store (s3://... or a shared directory)")
	}
	if scheme, _, ok := strings.Cut(c.Store, "://"); ok && strings.EqualFold(scheme, "mem") {
		return fmt.Errorf("cluster: Coordinator.Store %q: a memory store lives in one process and the workers could not read or write it; use s3://... or a directory every node shares", c.Store)
	}
	secret, err := nodeauth.Secret("cluster: Coordinator.Secret", c.Secret, os.Getenv)
	if err != nil {
		return err
	}
	c.Secret = secret
	_, _, err = splitHostPort("Coordinator.Listen", c.Listen) // TLS off loopback: see startNode
	return err
}

// splitHostPort splits addr, the value of option, into a host and a port
// (0 picks a free port), or says what is wrong with it.
func splitHostPort(option, addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return "", 0, fmt.Errorf("actors: %s %q: want host:port (port 0 picks a free port)", option, addr)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		return "", 0, fmt.Errorf("actors: %s %q: bad port", option, addr)
	}
	return host, p, nil
}

// node is one process's remote endpoint.
type node struct {
	remote *remote.Remote
	addr   string
}

// nodeSpec is what startNode needs of a Cluster or a Worker.
type nodeSpec struct {
	option, listen string // the listen option's name, and its value
	tls            *TLS
	secret         string
	allowPlaintext bool
	allowOption    string // the name of the AllowPlaintext option
	log            *slog.Logger
	identity       *nodeauth.Identity // the node's key; see newIdentity
	jobs           []string           // the jobs the node serves
	// bindWorkers: the node is a coordinator, which reads a message about
	// a worker only from that worker's node (see bindWorkers).
	bindWorkers bool
}

// newIdentity makes a node's key.
func newIdentity() (*nodeauth.Identity, error) {
	id, err := nodeauth.NewIdentity(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("actors: %w", err)
	}
	return id, nil
}

// startNode makes system reachable from the nodes that share spec's secret,
// and from no one else.
func startNode(system *actor.ActorSystem, spec nodeSpec) (*node, error) {
	option, listen := spec.option, spec.listen
	host, _, err := splitHostPort(option, listen)
	if err != nil {
		return nil, err
	}
	plaintextOff, err := nodeauth.Listener("actors: "+option, host, spec.tls != nil, spec.allowPlaintext, spec.allowOption)
	if err != nil {
		return nil, err
	}
	if plaintextOff {
		spec.log.Warn("listening off loopback without TLS: anyone on the network between the nodes can read the data and take over a connection once it is authenticated (it cannot replay one)", "listen", listen, spec.allowOption, true)
	}
	server, client, err := spec.tls.configs()
	if err != nil {
		return nil, err
	}
	// remote.Start panics when it cannot listen: try first, for a clear
	// error.
	probe, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("actors: %s %q: %w", option, listen, err)
	}
	port := probe.Addr().(*net.TCPAddr).Port // the free port found for port 0
	probe.Close()
	creds := nodeauth.Credentials(nodeauth.Config{
		Local:  nodeauth.Local{Secret: spec.secret, Identity: spec.identity, Address: net.JoinHostPort(host, strconv.Itoa(port)), Jobs: spec.jobs},
		Server: server, Client: client,
		Refused:    refusedLogger(spec.log),
		DialFailed: dialFailedLogger(spec.log),
	})
	streams := []grpc.StreamServerInterceptor{survivePanics(spec.log)}
	if spec.bindWorkers {
		streams = append(streams, bindWorkers(spec.log))
	}
	cfg := remote.Configure(host, port,
		remote.WithServerOptions(append(nodeauth.ServerOptions(), grpc.ChainStreamInterceptor(streams...), grpc.MaxRecvMsgSize(maxWireMessage), grpc.Creds(creds))...),
		remote.WithDialOptions(grpc.WithTransportCredentials(creds),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxWireMessage), grpc.MaxCallSendMsgSize(maxWireMessage))),
		remote.WithEndpointWriterBatchSize(wireWriterBatch),
	)
	// A dead peer stalls its writer for MaxRetryCount attempts 2s apart;
	// the heartbeat notices a lost node sooner.
	cfg.MaxRetryCount = 1
	r := remote.NewRemote(system, cfg)
	if err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("actors: %s %q: %v", option, listen, p)
			}
		}()
		r.Start()
		return nil
	}(); err != nil {
		return nil, err
	}
	return &node{remote: r, addr: system.Address()}, nil
}

// configs returns the server and client TLS configurations (nil, nil
// without TLS).
func (t *TLS) configs() (server, client *tls.Config, err error) {
	if t == nil {
		return nil, nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("actors: TLS: load the certificate %s and key %s: %w", t.CertFile, t.KeyFile, err)
	}
	pem, err := os.ReadFile(t.CAFile)
	if err != nil {
		return nil, nil, fmt.Errorf("actors: TLS: read the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("actors: TLS: the CA file %s holds no PEM certificate", t.CAFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS13}
	return server, client, nil
}

// survivePanics is a stream interceptor that ends a stream whose handler
// panics with an error, instead of the process. protoactor-go's endpoint
// reader panics when a peer's message arrives while the node shuts down:
// its endpoint manager checks a stopped flag, then reads the connections
// that Shutdown has set to nil in between (a nil *sync.Map), in the gRPC
// handler's goroutine, where nothing of ours could recover it.
func survivePanics(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				log.Warn("a remote stream's handler panicked; the stream is closed", "method", info.FullMethod, "panic", fmt.Sprint(p))
				err = status.Errorf(codes.Internal, "snapflow: the stream's handler panicked: %v", p)
			}
		}()
		return h(srv, ss)
	}
}

// shutdownGrace bounds the wait for a node's graceful shutdown.
const shutdownGrace = 100 * time.Millisecond

// shutdown stops the node's server and connections. protoactor-go's
// graceful shutdown waits for every endpoint writer to stop, and a writer
// that is trying to reach a lost peer sleeps 2 s between its attempts: after
// shutdownGrace the server is stopped hard, and the graceful shutdown ends
// in the background. It can also panic (it sends on an endpoint reader's
// channel that a peer's departure closed): the node is then stopped hard.
func (n *node) shutdown() {
	if n == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				n.remote.Shutdown(false)
			}
		}()
		n.remote.Shutdown(true)
	}()
	timer := time.NewTimer(shutdownGrace)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		n.remote.Shutdown(false)
	}
}

// remoteCreditFactor multiplies the credits of an input fed from another
// node: a credit's round trip crosses the network and two gRPC streams, and
// with the in-process window the sender stalls (measured in bench: 8
// credits 3.9 M records/s across nodes, 32 credits 6.0 M; against
// in-process off in the same run, 32 credits 0.25x, 128 credits 0.30x).
const remoteCreditFactor = 16

// taskActorName is the name, under its worker's host actor, of a task of
// one coordinator incarnation and epoch: a stale task can never receive
// the messages of a newer incarnation.
func taskActorName(coordinator string, epoch uint64, task string) string {
	return fmt.Sprintf("%s-e%d-%s", coordinator, epoch, task)
}

// taskPID is the address of a task actor placed on the worker at addr.
func taskPID(addr, coordinator string, epoch uint64, task string) *actor.PID {
	return actor.NewPID(addr, workerName+"/"+taskActorName(coordinator, epoch, task))
}

// newNodeID returns a random id for a node incarnation, e.g. "c-3f9a1b2c".
func newNodeID(prefix string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// openClusterStore opens the store every node of the cluster shares.
func (cfg *config) openClusterStore(ctx context.Context, plan *dataflow.Plan) (snapshots.Store, error) {
	c := cfg.cluster
	if cfg.storeSet {
		return nil, errors.New("actors: WithStore and cluster.WithCoordinator: in cluster mode every node opens the store from Coordinator.Store; drop WithStore")
	}
	if err := c.finish(); err != nil {
		return nil, err
	}
	if err := plan.CheckWire(); err != nil {
		return nil, fmt.Errorf("actors: job %q in cluster mode: %w", plan.Job, err)
	}
	s, err := snapshots.Open(ctx, c.Store)
	if err != nil {
		return nil, fmt.Errorf("cluster: Coordinator.Store: %w", err)
	}
	cfg.store, cfg.storeSet = s, true
	return s, nil
}

// maxWireBatch bounds the encoded bytes of one batch that crosses nodes: a
// full batch of WithBatchBytes plus a record of MaxWireRecord fits.
const maxWireBatch = 2 * MaxWireRecord

// WireStats counts the batches this process's tasks encoded for tasks on
// other nodes, since the process started.
type WireStats struct {
	Batches, Records uint64
	// Bytes are the encoded record bytes (RecordBatch data and ends), not
	// counting gRPC framing.
	Bytes uint64
	// Refused counts the connections from peers outside the cluster that
	// this process's nodes refused (at TLS, or at the node handshake:
	// none, another secret, a replay): each is also logged as a warning.
	Refused uint64
	// Misdirected counts the checkpoint acknowledgements and declines a
	// coordinator dropped because they did not come from the worker it
	// deployed their task on.
	Misdirected uint64
}

var wireBatches, wireRecords, wireBytes atomic.Uint64

// ReadWireStats returns the process's WireStats.
func ReadWireStats() WireStats {
	return WireStats{Batches: wireBatches.Load(), Records: wireRecords.Load(), Bytes: wireBytes.Load(), Refused: nodeauth.Rejected.Load(), Misdirected: misdirected.Load()}
}
