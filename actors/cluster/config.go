package cluster

import (
	"log/slog"
	"time"

	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/topology"
)

// Coordinator configures the process that calls actors.Start with
// WithCoordinator as the coordinator of a cluster: it hosts the job actor,
// places the tasks on the workers that register (see ServeWorker), runs
// the checkpoint coordinator and the restart strategy, and writes the
// manifests. A lost worker (its process died, hung or lost its network) is
// the failure of every task on it: the job rolls back to the newest
// complete checkpoint and places its tasks on the workers that remain.
type Coordinator struct {
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
	// that does not prove it, before reading a message (see
	// docs/cluster.md). Default: the environment variable
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

// Worker configures a worker process (see ServeWorker).
type Worker struct {
	// Join is the coordinator's address, host:port.
	Join string
	// Listen is the worker's own address (default "127.0.0.1:0": loopback,
	// a free port).
	Listen string
	// Slots is how many tasks the worker runs at most (default 4).
	Slots int
	// Jobs are the jobs this worker can run, by the name of their graph.
	// The coordinator checks that its job is among them with the same
	// topology fingerprint and parameters: run the same binary on every
	// node.
	Jobs []func() *topology.Graph
	// TLS, when set, makes the connections to other nodes mutual TLS.
	// A Listen host off loopback needs it (see AllowPlaintext).
	TLS *TLS
	// Secret is the cluster's secret (see Coordinator.Secret); default: the
	// environment variable SNAPFLOW_CLUSTER_SECRET.
	Secret string
	// AllowPlaintext lets Listen be off loopback without TLS (see
	// Coordinator.AllowPlaintext).
	AllowPlaintext bool
	// RegisterTimeout bounds how long the worker tries to register with
	// the coordinator, at start and again after losing it (default 30s).
	RegisterTimeout time.Duration
	// Logger receives the worker's logs (default: discarded).
	Logger *slog.Logger
	// Listening, when set, is called with the worker's address once it
	// listens.
	Listening func(addr string)
	// Faults injects failures into the worker's tasks, for tests and
	// soaks (see package actorstest); nil in production.
	Faults *actorstest.Faults
}
