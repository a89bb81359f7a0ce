// Package linkwatch decides when a channel between two nodes has lost its
// link: the failure detection that node heartbeats cannot give when two
// workers both still reach the coordinator but not each other.
//
// A broken stream between two nodes loses what was in flight (protoactor-go
// reconnects on the next send), and a silent partition loses everything
// until TCP gives up, minutes later. The per-channel sequence number sees a
// loss only when a later message arrives; under backpressure none does.
//
// The receiver of a channel reports, every heartbeat interval and from
// outside its task's mailbox, what has arrived on the channel (the last
// batch seq, the last barrier, the end) and the credit it grants, as a
// cumulative total. The sender feeds every report to its Sender and asks
// Check on every tick of its own. The link is lost when, for longer than
// the timeout,
//
//   - something sent (a batch, a barrier, the end) has not arrived while
//     reports come (the sender-to-receiver direction is cut), or
//   - no report came while something sent has not arrived or batches wait
//     for credit (the receiver-to-sender direction is cut, or the receiver
//     is gone).
//
// A receiver that is merely slow is not lost: its reports keep coming and
// say that everything sent has arrived. A tick that the sender handles late
// (its actor was busy, the machine overloaded) judges nothing: it restarts
// the clock, as the coordinator's heartbeat tick does.
//
// Sender is a pure type: no goroutines, clocks or I/O. The caller passes the
// time, which makes it deterministic to test.
//
// The guide is docs/cluster.md (failure detection) in the repository.
package linkwatch
