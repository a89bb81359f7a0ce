// Package membership holds the coordinator's pure decisions about the workers
// of a cluster: which workers are registered and live, when a silent worker
// is declared lost, and which worker hosts each task. It starts no
// goroutines, reads no clock, does no I/O and imports no actor code; the
// actor shell passes the time of every event and carries out the result.
//
// # Members
//
// A worker process registers with an id, unique to this incarnation of the
// process, the host:port it listens on, and a number of task slots. The
// shell steps a Members table with:
//
//   - Register when a worker registers. A worker replaced by a new process
//     on the same address comes back in replaced, declared lost.
//   - Heartbeat when a worker acks a heartbeat. False means the worker is
//     unknown or lost: fence it out.
//   - Expired on a timer (see Deadline): the workers silent for
//     HeartbeatTimeout, declared lost now and returned once.
//   - Lose when the transport says a worker is gone (its connection broke,
//     its process died).
//
// Every worker declared lost (by Register, Expired or Lose) is the failure of
// all the tasks it hosts; Worker.Err is the error to fail them with. A lost
// worker never becomes live again: its id is refused by Register (ErrLost)
// and its heartbeats are ignored, so a process that was stopped and resumed
// must drop its tasks and register again under a new id.
//
// # Placement
//
// Place assigns the planned tasks to the live workers, deterministically,
// spreading each operator's tasks over different workers and keeping the
// load even, within each worker's slots. With fewer slots than tasks it
// fails with ErrNotEnoughSlots, and the shell waits for workers to join.
//
// The guide is docs/cluster.md (placement and failure detection) in the repository.
package membership
