// Package cluster runs a snapflow job across processes: one coordinator
// and any number of workers, over protoactor-go's remote (gRPC).
//
// # Roles
//
// The process that calls actors.Start with WithCoordinator is the
// coordinator: it hosts the job actor, which keeps the checkpoint
// coordinator, the restart strategy and the manifest writes. Worker
// processes call ServeWorker with the same job constructors (the same
// binary, say), register with the coordinator and offer task slots; the
// job's parameters (topology.Params) and its topology fingerprint must
// match, or the worker is refused, naming the differences. Every node opens
// the same store.
//
// # Placement
//
// For every epoch the coordinator places the tasks on the live workers,
// deterministically, spreading each operator's tasks over them (package
// actors/membership), and sends every worker the placement; each worker
// spawns and supervises its own tasks, which load their state from the
// store. Tasks on one node pass Go values; across nodes a batch is a
// messages.RecordBatch encoded by the stream's wire codec, on the same
// ordered stream as the barriers, ends of input and credits that follow it.
// When the workers lack slots the coordinator waits for one to join, at
// most Coordinator.SlotTimeout.
//
// # Failure detection
//
// A worker is lost when its connection breaks, or when it misses heartbeats
// for Coordinator.HeartbeatTimeout (a hung, stopped or cut-off process):
// that is the failure of every task on it (ErrNodeLost, cause node-lost),
// and the job rolls back to its newest complete checkpoint as in one
// process, with its tasks placed on the workers that remain. A link cut
// between two workers that both still reach the coordinator is found by
// the receivers' reports of what arrived (package actors/linkwatch): the
// sender fails with cause link-lost within twice the heartbeat timeout. A
// worker that loses its coordinator drops its tasks and registers again
// under a new id.
//
// # Who may talk to a node
//
// Every connection between nodes starts with a challenge-response in which
// both nodes prove the cluster's secret (Coordinator.Secret,
// Worker.Secret, or SNAPFLOW_CLUSTER_SECRET; ReadSecretFile reads it from
// a private file) and their node keys, bound to that connection, so that
// nothing captured from one is of use on another; connections that do not
// complete it are refused, logged and counted (WireStats.Refused). A
// worker's id is its node's: no node can speak for another's tasks. Off
// loopback a node requires TLS unless told otherwise.
//
// # The lease
//
// The coordinator holds the job's lease in the store, as a job in one
// process does: a second coordinator of the same job on the same store is
// refused unless it takes over (actors.WithTakeOver), and the one it takes
// over from fails with snapshots.ErrLeaseLost at its next write, without
// completing a checkpoint or committing a sink, and tells its workers that
// the job ended.
//
// The guide is docs/cluster.md in the repository: ports, TLS, failure
// detection timings, and the partition tests.
package cluster
