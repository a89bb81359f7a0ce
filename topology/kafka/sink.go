package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DefaultTransactionTimeout is the transaction timeout of Sink's producers
// when SinkConfig.TransactionTimeout is 0.
const DefaultTransactionTimeout = time.Minute

// DefaultPoolSize is how many transactional ids each sink task takes turns
// over when SinkConfig.PoolSize is 0.
const DefaultPoolSize = 8

// minPoolSize is the least a task needs with every checkpoint completing
// before the next barrier: the open transaction, the pre-committed one, and
// the committed one that the last completed checkpoint still lists.
const minPoolSize = 3

// SinkConfig configures Sink.
type SinkConfig struct {
	// Brokers are the seed brokers, "host:port".
	Brokers []string
	// Topic is the topic written to.
	Topic string
	// TransactionalIDPrefix starts every transactional id of the sink:
	// "<prefix>-<subtask>-e<incarnation>-<n>", n < PoolSize (see the
	// package documentation). It must stay the same across restarts of
	// the job, and no other producer of the cluster may use it.
	TransactionalIDPrefix string
	// PoolSize is how many transactional ids each sink task takes turns
	// over (default DefaultPoolSize, at least 3). A task needs three while
	// every checkpoint completes before the next barrier, and one more for
	// each checkpoint in a row that does not; when none is free, the task
	// fails (naming this option) and the job recovers.
	PoolSize int
	// AssumeFencedCommitted takes a pre-committed transaction of the
	// restored checkpoint whose id has moved on to a newer producer epoch
	// as committed, with a warning in the log, instead of failing the
	// restore. Kafka cannot tell a transaction that was committed and its
	// id used again from one the broker aborted at its timeout; the first
	// happens when a job starts from an older savepoint or retained
	// checkpoint than its newest (which re-emits what followed it in any
	// case). Leave it off for recoveries.
	AssumeFencedCommitted bool
	// TransactionTimeout bounds how long a transaction may stay open
	// (default DefaultTransactionTimeout): above a checkpoint interval and
	// the time a recovery takes.
	TransactionTimeout time.Duration
	// ClientOptions are added to the options of every client (TLS, SASL,
	// ...).
	ClientOptions []kgo.Opt
	// CheckTimeout bounds the check at Start that the brokers answer, the
	// topic exists and the transactional ids may be used (default
	// DefaultCheckTimeout).
	CheckTimeout time.Duration
}

// withDefaults returns c with the defaults of the options left 0.
func (c SinkConfig) withDefaults() SinkConfig {
	if c.TransactionTimeout == 0 {
		c.TransactionTimeout = DefaultTransactionTimeout
	}
	if c.PoolSize == 0 {
		c.PoolSize = DefaultPoolSize
	}
	return c
}

func (c SinkConfig) check() error {
	var ps []string
	if len(c.Brokers) == 0 {
		ps = append(ps, "no Brokers")
	}
	if c.Topic == "" {
		ps = append(ps, "no Topic")
	}
	if c.TransactionalIDPrefix == "" {
		ps = append(ps, "no TransactionalIDPrefix")
	}
	if c.TransactionTimeout < 0 {
		ps = append(ps, fmt.Sprintf("TransactionTimeout %v is negative", c.TransactionTimeout))
	}
	if c.PoolSize != 0 && c.PoolSize < minPoolSize {
		ps = append(ps, fmt.Sprintf("PoolSize %d is below %d, the least a sink task needs", c.PoolSize, minPoolSize))
	}
	if len(ps) > 0 {
		return fmt.Errorf("kafka: SinkConfig: %s", strings.Join(ps, "; "))
	}
	return nil
}

// preflight checks the configuration, then, at the same time, that the
// brokers answer and the topic exists, and that a transactional id of the
// prefix may be initialised ("<prefix>-check", which no transaction uses).
func (c SinkConfig) preflight(ctx context.Context) error {
	if err := c.check(); err != nil {
		return err
	}
	var topicErr error
	var wg sync.WaitGroup
	wg.Go(func() { _, topicErr = checkTopic(ctx, c.Brokers, c.ClientOptions, c.Topic, c.CheckTimeout) })
	idErr := c.checkTransactionalID(ctx)
	wg.Wait()
	if topicErr != nil {
		// An unreachable broker fails both; say it once.
		return topicErr
	}
	return idErr
}

func (c SinkConfig) checkTransactionalID(ctx context.Context) error {
	timeout := c.CheckTimeout
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	id := c.TransactionalIDPrefix + "-check"
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers...), kgo.TransactionalID(id), kgo.TransactionTimeout(c.TransactionTimeout)}, c.ClientOptions...)...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if _, _, err := cl.ProducerID(cctx); err != nil {
		return fmt.Errorf("kafka: the transactional id %q (of TransactionalIDPrefix %q) cannot be used: %w", id, c.TransactionalIDPrefix, err)
	}
	return nil
}

// Sink adds a transactional Kafka sink of the records of s (see the
// package documentation): encode gives each record's key and value.
func Sink[T any](s topology.Stream[T], name string, cfg SinkConfig, encode func(T) (key, value []byte), opts ...topology.Option) {
	cfg = cfg.withDefaults()
	opts = append(opts, topology.Check(func(ctx context.Context) error { return cfg.preflight(ctx) }))
	topology.TwoPhaseCommitSink(s, name, func(subtask, _ int) topology.TwoPhaseSink[T] {
		return &sink[T]{cfg: cfg, encode: encode, subtask: subtask}
	}, opts...)
}

// sink is one task's transactional producer side. Its transactions take
// turns over a pool of transactional ids (see idPool).
type sink[T any] struct {
	cfg     SinkConfig
	encode  func(T) (key, value []byte)
	subtask int
	admin   *kgo.Client // plain: raw EndTxn

	epoch uint64   // the task's incarnation (topology.Incarnation), from Recover
	ids   []string // the pool's transactional ids, of this incarnation
	pool  *idPool
	txns  []*txn // by slot: open or pre-committed
	open  *txn   // the transaction records go into
}

// txn is a transaction of a slot.
type txn struct {
	slot    int
	id      string
	cl      *kgo.Client
	records int64
	mu      sync.Mutex
	err     error // the first produce error
}

func (s *sink[T]) init() error {
	if s.pool != nil {
		return nil
	}
	if err := s.cfg.check(); err != nil {
		return err
	}
	cl, err := s.client()
	if err != nil {
		return err
	}
	s.admin = cl
	s.pool = newIDPool(s.cfg.PoolSize)
	s.txns = make([]*txn, s.cfg.PoolSize)
	s.ids = make([]string, s.cfg.PoolSize)
	for i := range s.ids {
		s.ids[i] = txnID(s.cfg.TransactionalIDPrefix, s.subtask, s.epoch, i)
	}
	return nil
}

// txnID names slot n of the pool of incarnation epoch of task subtask:
// "<prefix>-<subtask>-e<epoch>-<n>", or "<prefix>-<subtask>-<n>" for epoch
// 0 (unknown), as earlier versions named the pool of every incarnation.
func txnID(prefix string, subtask int, epoch uint64, n int) string {
	if epoch == 0 {
		return fmt.Sprintf("%s-%d-%d", prefix, subtask, n)
	}
	return fmt.Sprintf("%s-%d-e%d-%d", prefix, subtask, epoch, n)
}

// parseTxnID returns the task and the incarnation (0 for a name without
// one) of a transactional id that txnID gave with prefix.
func parseTxnID(prefix, id string) (subtask int, epoch uint64, ok bool) {
	rest, ok := strings.CutPrefix(id, prefix+"-")
	if !ok {
		return 0, 0, false
	}
	parts := strings.Split(rest, "-")
	switch {
	case len(parts) == 2:
	case len(parts) == 3 && strings.HasPrefix(parts[1], "e"):
		e, err := strconv.ParseUint(parts[1][1:], 10, 64)
		if err != nil || e == 0 {
			return 0, 0, false
		}
		epoch = e
	default:
		return 0, 0, false
	}
	sub, err := strconv.Atoi(parts[0])
	if err != nil || sub < 0 {
		return 0, 0, false
	}
	if _, err := strconv.Atoi(parts[len(parts)-1]); err != nil {
		return 0, 0, false
	}
	return sub, epoch, true
}

func (s *sink[T]) client(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cl, nil
}

// slotOf returns the slot whose id is id, or -1.
func (s *sink[T]) slotOf(id string) int { return slices.Index(s.ids, id) }

// A handle is the transaction's producer id, epoch, record count and id.
func encodeHandle(id string, pid int64, epoch int16, records int64) []byte {
	b := binary.BigEndian.AppendUint64(nil, uint64(pid))
	b = binary.BigEndian.AppendUint16(b, uint16(epoch))
	b = binary.BigEndian.AppendUint64(b, uint64(records))
	return append(b, id...)
}

func decodeHandle(b []byte) (id string, pid int64, epoch int16, records int64, err error) {
	if len(b) < 18 {
		return "", 0, 0, 0, fmt.Errorf("kafka: transaction handle of %d bytes, want at least 18", len(b))
	}
	return string(b[18:]), int64(binary.BigEndian.Uint64(b)), int16(binary.BigEndian.Uint16(b[8:])), int64(binary.BigEndian.Uint64(b[10:])), nil
}

// ErrSuperseded is wrapped by the error of Recover when a newer
// incarnation of the same sink task has a transaction open: this one is
// stale (its process was paused while the job moved on), and must not run.
var ErrSuperseded = errors.New("kafka: a newer incarnation of the sink task is writing")

// Recover commits the pending transactions by their stored producer id and
// epoch, then aborts the transactions that older incarnations of the task
// left open, by initialising their ids, which also fences their producers.
// It finds them by listing the open transactions (ListTransactions, Kafka
// 3.0 and later); a broker that cannot list them has only the restored
// checkpoint's incarnation's pool aborted, and the rest is left to its
// transaction timeout. It touches no transaction of a newer incarnation:
// finding one open, it fails with ErrSuperseded before it commits or
// aborts anything.
func (s *sink[T]) Recover(ctx context.Context, _ uint64, pending [][]byte, open []byte) error {
	s.epoch = topology.Incarnation(ctx)
	if err := s.init(); err != nil {
		return err
	}
	var older []string // open transactions of older incarnations
	listed := false
	if s.epoch != 0 {
		var err error
		older, listed, err = s.openOlder(ctx)
		if err != nil {
			return err
		}
	}
	committed := map[string]bool{} // committed here: a fence would make a retry fail
	for _, h := range pending {
		id, _, _, _, err := decodeHandle(h)
		if err != nil {
			return err
		}
		ok, err := s.commitRaw(ctx, h)
		if err != nil {
			return err
		}
		committed[id] = committed[id] || ok
		if i := s.slotOf(id); i >= 0 { // an id of this incarnation's pool: epoch 0
			s.pool.restored(i)
		}
	}
	switch {
	case s.epoch == 0:
		// The incarnation is unknown: every incarnation uses the same
		// pool, whose other ids may hold what a failed one left open.
		older = s.ids
	case !listed:
		older = s.restoredPool(pending, open)
	}
	errs := make([]error, len(older))
	var wg sync.WaitGroup
	for i, id := range older {
		if !committed[id] {
			wg.Go(func() { errs[i] = s.fence(ctx, id) })
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// openOlder lists the transactions of this task open on the brokers: it
// returns those of older incarnations, fails with ErrSuperseded on one of a
// newer incarnation, and reports listed false when the brokers cannot list
// them.
func (s *sink[T]) openOlder(ctx context.Context) (older []string, listed bool, err error) {
	req := kmsg.NewPtrListTransactionsRequest()
	req.StateFilters = []string{"Ongoing"}
	resp, err := req.RequestWith(ctx, s.admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, false, fmt.Errorf("kafka: list the open transactions of sink task %d: %w", s.subtask, ctx.Err())
		}
		if _, said := cannotList.LoadOrStore(s.cfg.TransactionalIDPrefix, true); said {
			return nil, false, nil
		}
		slog.Warn("kafka: the brokers cannot list open transactions (ListTransactions needs Kafka 3.0 or later); only the restored checkpoint's transactions are aborted now, what other failed incarnations left open is aborted at their transaction timeout, and read_committed consumers wait until then",
			"transactional_id_prefix", s.cfg.TransactionalIDPrefix, "subtask", s.subtask, "transaction_timeout", s.cfg.TransactionTimeout, "err", err)
		return nil, false, nil
	}
	for _, t := range resp.TransactionStates {
		sub, epoch, ok := parseTxnID(s.cfg.TransactionalIDPrefix, t.TransactionalID)
		if !ok || sub != s.subtask {
			continue
		}
		switch {
		case epoch > s.epoch:
			return nil, true, fmt.Errorf("%w: transaction %q of incarnation %d is open, this task runs incarnation %d: this incarnation is stale, and leaves the transactions alone",
				ErrSuperseded, t.TransactionalID, epoch, s.epoch)
		case epoch < s.epoch:
			older = append(older, t.TransactionalID)
		}
	}
	return older, true, nil
}

// cannotList holds the transactional id prefixes whose brokers could not
// list open transactions, so that each is logged once.
var cannotList sync.Map

// restoredPool returns the ids of the pools of the older incarnations that
// the restored checkpoint's handles name.
func (s *sink[T]) restoredPool(pending [][]byte, open []byte) []string {
	var ids []string
	seen := map[uint64]bool{}
	for _, h := range append(slices.Clip(pending), open) {
		id, _, _, _, err := decodeHandle(h)
		if err != nil {
			continue
		}
		sub, epoch, ok := parseTxnID(s.cfg.TransactionalIDPrefix, id)
		if !ok || sub != s.subtask || epoch >= s.epoch || seen[epoch] {
			continue
		}
		seen[epoch] = true
		for n := range s.cfg.PoolSize {
			ids = append(ids, txnID(s.cfg.TransactionalIDPrefix, s.subtask, epoch, n))
		}
	}
	return ids
}

// fence initialises transactional id id, which aborts a transaction open
// under it and fences its producer.
func (s *sink[T]) fence(ctx context.Context, id string) error {
	cl, err := s.client(kgo.TransactionalID(id), kgo.TransactionTimeout(s.cfg.TransactionTimeout))
	if err != nil {
		return err
	}
	defer cl.Close()
	if _, _, err := cl.ProducerID(ctx); err != nil {
		return fmt.Errorf("kafka: initialise transactional id %q (to abort what it left open): %w", id, err)
	}
	return nil
}

// Begin opens the next transaction, on the first free id of the pool, with
// a producer of its own: its initialisation gives the id a new epoch, so
// that no stored handle of an earlier transaction of the id can commit it.
func (s *sink[T]) Begin(ctx context.Context, _ uint64) ([]byte, error) {
	if err := s.init(); err != nil {
		return nil, err
	}
	i, err := s.pool.take()
	if err != nil {
		return nil, fmt.Errorf("kafka: sink task %d of TransactionalIDPrefix %q: %w", s.subtask, s.cfg.TransactionalIDPrefix, err)
	}
	id := s.ids[i]
	cl, err := s.client(kgo.TransactionalID(id), kgo.TransactionTimeout(s.cfg.TransactionTimeout),
		kgo.DefaultProduceTopic(s.cfg.Topic))
	if err != nil {
		return nil, err
	}
	// A failed begin leaves the slot busy: its id may have been
	// initialised, and only a recovery's fencing settles it.
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: initialise transactional id %q: %w", id, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: begin a transaction of %q: %w", id, err)
	}
	t := &txn{slot: i, id: id, cl: cl}
	s.txns[i], s.open = t, t
	return encodeHandle(id, pid, epoch, 0), nil
}

// Write produces the records into the open transaction; errors surface at
// the next pre-commit at the latest.
func (s *sink[T]) Write(ctx context.Context, _ []byte, records []T) error {
	t := s.open
	if err := t.failed(); err != nil {
		return err
	}
	for _, v := range records {
		key, value := s.encode(v)
		t.records++
		t.cl.Produce(ctx, &kgo.Record{Key: key, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				t.mu.Lock()
				if t.err == nil {
					t.err = fmt.Errorf("kafka: produce to %s in transaction %q: %w", s.cfg.Topic, t.id, err)
				}
				t.mu.Unlock()
			}
		})
	}
	return nil
}

func (t *txn) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// PreCommit flushes the open transaction: every record is acknowledged,
// the transaction stays open. Its handle records the producer id and epoch
// a restore commits it with.
func (s *sink[T]) PreCommit(ctx context.Context, _ []byte) ([]byte, error) {
	t := s.open
	if err := t.cl.Flush(ctx); err != nil {
		return nil, fmt.Errorf("kafka: flush transaction %q: %w", t.id, err)
	}
	if err := t.failed(); err != nil {
		return nil, err
	}
	pid, epoch, err := t.cl.ProducerID(ctx)
	if err != nil {
		return nil, fmt.Errorf("kafka: transaction %q: %w", t.id, err)
	}
	s.pool.preCommit(t.slot)
	s.open = nil
	return encodeHandle(t.id, pid, epoch, t.records), nil
}

// Commit ends a pre-committed transaction with a commit (a transaction
// without records has nothing to commit), and frees the ids whose
// transactions committed before this one's pre-commit.
func (s *sink[T]) Commit(ctx context.Context, h []byte) error {
	id, _, _, records, err := decodeHandle(h)
	if err != nil {
		return err
	}
	i := s.slotOf(id)
	if i < 0 || !s.pool.preCommitted(i) {
		// Not a transaction this task pre-committed: a restore's, which
		// Recover committed (Commit is idempotent).
		_, err := s.commitRaw(ctx, h)
		return err
	}
	t := s.txns[i]
	if records > 0 {
		if err := t.cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka: commit transaction %q: %w", id, err)
		}
	}
	t.cl.Close()
	s.txns[i] = nil
	s.pool.commit(i)
	return nil
}

// commitRaw commits transaction h with an EndTxn request that carries its
// stored producer id and epoch, and reports whether it sent one that
// succeeded (a transaction without records has nothing to commit).
func (s *sink[T]) commitRaw(ctx context.Context, h []byte) (bool, error) {
	id, pid, epoch, records, err := decodeHandle(h)
	if err != nil || records == 0 {
		return false, err
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
	resp, err := req.RequestWith(ctx, s.admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err == nil {
		return true, nil
	}
	if s.cfg.AssumeFencedCommitted && (errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping)) {
		slog.Warn("kafka: a restored transaction's id has moved on; taken as committed (SinkConfig.AssumeFencedCommitted)",
			"transactional_id", id, "producer_id", pid, "epoch", epoch, "records", records, "err", err)
		return false, nil
	}
	return false, fmt.Errorf("kafka: commit transaction %q (producer %d, epoch %d) of a restored checkpoint: %w; if the broker aborted it (after the transaction timeout, %v), its %d records are lost; if the job was started from an older savepoint or checkpoint than its newest, the transaction was likely committed and its id used again since (see SinkConfig.AssumeFencedCommitted)",
		id, pid, epoch, err, s.cfg.TransactionTimeout, records)
}

// Close closes the producers without committing: what they left open is
// aborted by the next recovery's fencing, or by the broker's timeout.
func (s *sink[T]) Close() error {
	for i, t := range s.txns {
		if t != nil {
			t.cl.Close()
			s.txns[i] = nil
		}
	}
	s.open = nil
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
	return nil
}
