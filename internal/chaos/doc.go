// Package chaos is snapflow's failure-injection harness and semantics
// checker, for tests, soaks and the benchmark program.
//
// An Injector, seeded, decides where failures strike: operator panics at
// chosen records, panics while snapshotting or restoring, dropped or
// duplicated batches, a straggler task, and (through Store) store errors and
// latency. It counts what it injected by kind.
//
// The semantics checker follows Flink's SemanticsCheckMapper: a generator
// emits (key, seq) for many keys, and a keyed checker operator keeps the last
// seq of each key in state and fails loudly when the next one is not exactly
// one more. With exactly-once state this never fires, whatever the failures;
// a lost or duplicated record makes it fire, and the violation is recorded
// even though the job then recovers. The sink checks that no seq is ever
// skipped (replays after a recovery may repeat seqs: sinks are at-least-once).
//
// The rescale shape (Rescale) runs in phases of different parallelisms:
// each phase is stopped with a savepoint (retried while injected failures
// abort it) and the next starts from it. Its sources are KeyedSplits, one
// split per key like Kafka partitions, so that a key's records stay in seq
// order at any parallelism; a Gate ends each phase part way through the
// records. Every savepoint must hold each checker exactly at the sources'
// positions, and every phase's recovery must restore its savepoint again
// after a failure while restoring it.
package chaos
