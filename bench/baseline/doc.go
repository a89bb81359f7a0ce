// Package baseline is the hand-written protoactor-go pipeline that snapflow's
// benchmark compares the runtime against: the same shape and per-record work
// as the "paritysum" job, with no checkpoints, epochs or runtime.
//
// One source actor generates records (package internal/benchwork), partitions
// them by key over Parallelism worker actors, and each worker adds every
// record into a per-key sum and emits the running sum to one sink actor, which
// counts the records and records their end-to-end latency. Records move in
// batches of BatchSize, flushed when full, after Linger when partly filled, and
// at the end. Every channel has a credit window of Credits batches: a sender
// keeps at most that many unacknowledged batches per receiver, and the
// receiver returns the credits (and the batches, for reuse) as it consumes
// them.
//
// Config and Result are shared with the Go-channels baseline of the bench
// program, so that both baselines are configured and reported alike.
package baseline
