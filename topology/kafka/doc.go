// Package kafka connects snapflow jobs to Kafka, through franz-go
// (github.com/twmb/franz-go).
//
// Source reads a topic. Its position is a list of splits (see
// topology.FromSplits): one per partition with the offset of its next
// record, kept in snapflow's checkpoints (a consumer group's committed
// offsets play no part), and classes of partition numbers that it reads
// when they appear (discovery), so that a job restored at another
// parallelism deals the partitions out again. ReadCommitted reads only what
// transactional producers committed.
//
// Sink is a transactional sink (a topology.TwoPhaseSink): each sink task
// writes the records between two checkpoints in one Kafka transaction,
// flushed at the checkpoint's barrier (pre-commit) and committed when the
// checkpoint completes, so that a read_committed consumer sees every
// record's effect exactly once.
//
// Kafka lets a producer have one open transaction, and the one after a
// barrier must begin before the one before it commits; so each sink task
// takes turns over a pool of transactional ids,
// "<prefix>-<subtask>-e<incarnation>-<n>" for n < SinkConfig.PoolSize. The
// incarnation is the task's epoch (topology.Incarnation), which grows with
// every restore of the job and every new holder of it: no two incarnations
// share an id. Each transaction initialises its id anew, which gives it a
// producer epoch of its own, and its producer id and epoch are stored in
// the checkpoint with it. An id is used again only once a checkpoint taken
// after its transaction committed has completed: a restore, which picks the
// newest completed checkpoint, never finds a listed transaction's id moved
// on.
//
// The window between a checkpoint's completion and its commit: a task that
// fails there is restored from that checkpoint, and commits the
// transactions it holds as pre-committed with an EndTxn request that
// carries their stored producer id and epoch, which Kafka accepts for a
// transaction still open under them (and, as a retry, for one already
// committed). Then it lists the open transactions (ListTransactions, Kafka
// 3.0 and later) and initialises the ids of those that older incarnations
// of the task left, which aborts them and fences their producers, so that
// they neither commit late nor hold back read_committed consumers. It
// never touches the ids of a newer incarnation: an incarnation that finds
// one of them with a transaction open is stale (its process was paused
// while the job moved on), and its Recover fails with ErrSuperseded before
// it commits or aborts anything. With brokers that cannot list
// transactions, the restore aborts the pool of the restored checkpoint's
// incarnation only, and logs once that the rest waits for the transaction
// timeout.
//
// What Kafka does not allow (KIP-939, committing a prepared transaction
// from another client, is not generally available) bounds the guarantee:
// the transaction must still be open when the restore commits it. A
// transaction that stays open longer than the producer's transaction
// timeout (TransactionTimeout) is aborted by the broker; committing it
// then fails, loudly (the job fails with topology.ErrCommit once its
// restart strategy gives up), rather than losing its records silently.
// Keep the timeout above the time the job needs to recover. For the same
// reason a start from a savepoint or checkpoint older than the job's
// newest, whose transactions were committed and their ids used again
// since, fails too: Kafka cannot tell such a transaction from one it
// aborted. SinkConfig.AssumeFencedCommitted takes them as committed.
//
// The guide is docs/sources-and-sinks.md in the repository.
package kafka
