package cluster

import (
	"context"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/internal/engine"
)

// ServeWorker runs a worker: it registers with the coordinator at w.Join,
// runs the tasks the coordinator places on it and returns nil when the
// coordinator says the job has ended (finished or stopped), an error
// wrapping ErrJobFailed when it says the job failed (not when a takeover
// superseded the coordinator: the job goes on under the new one). It returns
// ctx's cause when ctx ends, and an error wrapping ErrRegister when the
// coordinator cannot be reached within w.RegisterTimeout or refuses the
// worker (another binary, another job). A worker that loses its coordinator
// drops its tasks and registers again, so that a restarted coordinator finds
// it.
func ServeWorker(ctx context.Context, w Worker) error {
	return engine.ServeWorker(ctx, engine.Worker(w))
}

// TLS configures mutual TLS between the nodes: each presents the
// certificate of CertFile and KeyFile and accepts peers whose certificates
// CAFile signed; ServerName, when set, is the name the peers' certificates
// must carry (default: the host of the address dialled).
//
// Its fields:
//   - CertFile string: the node's certificate (PEM).
//   - KeyFile string: its private key (PEM).
//   - CAFile string: the CA that signs the peers' certificates (PEM).
//   - ServerName string: the name the peers' certificates must carry
//     (default: the host of the address dialled).
type TLS = engine.TLS

// NodeLostError is the failure of every task of a lost worker.
//
// Its fields:
//   - Worker string: the worker's id.
//   - Address string: its address.
//   - Reason string: why it was lost ("no heartbeat for 5.1s").
//   - Tasks []string: the tasks it ran.
type NodeLostError = engine.NodeLostError

// WireStats counts the batches this process's tasks encoded for tasks on
// other nodes, since the process started.
//
// Its fields:
//   - Batches uint64: the batches encoded.
//   - Records uint64: their records.
//   - Bytes uint64: the encoded record bytes (RecordBatch data and ends),
//     not counting gRPC framing.
//   - Refused uint64: the calls from peers outside the cluster that this
//     process's nodes refused (each is also logged as a warning).
//   - Misdirected uint64: the checkpoint acknowledgements and declines a
//     coordinator dropped because they did not come from the worker it
//     deployed their task on.
type WireStats = engine.WireStats

// ReadWireStats returns the process's WireStats.
func ReadWireStats() WireStats { return engine.ReadWireStats() }

// WithCoordinator makes the job's process the coordinator of a cluster. The
// store is opened from c.Store (actors.WithStore must not be given).
func WithCoordinator(c Coordinator) actors.Option { return engine.WithCoordinator(engine.Cluster(c)) }

// The errors of cluster mode: check them with errors.Is.
var (
	// ErrNodeLost is wrapped by the failure of the tasks of a lost worker.
	ErrNodeLost = engine.ErrNodeLost
	// ErrRegister is wrapped by ServeWorker's error when the worker could
	// not register: the coordinator is unreachable or refused it.
	ErrRegister = engine.ErrRegister
	// ErrJobFailed is wrapped by ServeWorker's error when the coordinator
	// ended the job because it failed: the worker did its part, but the job
	// did not finish.
	ErrJobFailed = engine.ErrJobFailed
)

// Defaults of cluster mode.
const (
	DefaultListen            = engine.DefaultListen // loopback, a free port
	DefaultHeartbeatInterval = engine.DefaultHeartbeatInterval
	DefaultHeartbeatTimeout  = engine.DefaultHeartbeatTimeout
	DefaultSlotTimeout       = engine.DefaultSlotTimeout
	DefaultSlots             = engine.DefaultSlots
	DefaultRegisterTimeout   = engine.DefaultRegisterTimeout
	// MaxWireRecord is the largest encoded record that may cross nodes.
	MaxWireRecord = engine.MaxWireRecord
)
