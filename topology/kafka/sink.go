package kafka

import (
	"context"
	"encoding/binary"
	"fmt"
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

// SinkConfig configures Sink.
type SinkConfig struct {
	// Brokers are the seed brokers, "host:port".
	Brokers []string
	// Topic is the topic written to.
	Topic string
	// TransactionalIDPrefix starts every transactional id of the sink:
	// "<prefix>-<subtask>-<checkpoint>". It must stay the same across
	// restarts of the job, and no other producer of the cluster may use
	// it.
	TransactionalIDPrefix string
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
	if len(ps) > 0 {
		return fmt.Errorf("kafka: SinkConfig: %s", strings.Join(ps, "; "))
	}
	return nil
}

// preflight checks the configuration, that the brokers answer and the
// topic exists, and that a transactional id of the prefix may be
// initialised ("<prefix>-check", which no transaction uses).
func (c SinkConfig) preflight(ctx context.Context) error {
	if err := c.check(); err != nil {
		return err
	}
	if _, err := checkTopic(ctx, c.Brokers, c.ClientOptions, c.Topic, c.CheckTimeout); err != nil {
		return err
	}
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
	if cfg.TransactionTimeout == 0 {
		cfg.TransactionTimeout = DefaultTransactionTimeout
	}
	opts = append(opts, topology.Check(func(ctx context.Context) error { return cfg.preflight(ctx) }))
	topology.TwoPhaseCommitSink(s, name, func(subtask, _ int) topology.TwoPhaseSink[T] {
		return &sink[T]{cfg: cfg, encode: encode, subtask: subtask, live: map[string]*kgo.Client{}}
	}, opts...)
}

// sink is one task's transactional producer side.
type sink[T any] struct {
	cfg     SinkConfig
	encode  func(T) (key, value []byte)
	subtask int
	admin   *kgo.Client // plain: raw EndTxn and probes

	open *txn                   // the transaction records go into
	live map[string]*kgo.Client // pre-committed transactions this task still has the producer of
}

// txn is an open transaction.
type txn struct {
	id      string
	cl      *kgo.Client
	records int64
	mu      sync.Mutex
	err     error // the first produce error
}

func (s *sink[T]) txnID(after uint64) string {
	return fmt.Sprintf("%s-%d-%d", s.cfg.TransactionalIDPrefix, s.subtask, after)
}

func (s *sink[T]) client(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)
	cl, err := kgo.NewClient(append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	return cl, nil
}

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

// Recover commits the pending transactions by their stored producer id and
// epoch, then fences and aborts every transactional id the task may have
// used after checkpoint: from the restored checkpoint's open transaction
// on, up to the first id that was never used.
func (s *sink[T]) Recover(ctx context.Context, checkpoint uint64, pending [][]byte, _ []byte) error {
	if err := s.cfg.check(); err != nil {
		return err
	}
	if s.admin == nil {
		cl, err := s.client()
		if err != nil {
			return err
		}
		s.admin = cl
	}
	for _, h := range pending {
		if err := s.commitRaw(ctx, h); err != nil {
			return err
		}
	}
	for after := checkpoint; ; after++ {
		used, err := s.fence(ctx, s.txnID(after))
		if err != nil {
			return err
		}
		if !used && after > checkpoint {
			return nil
		}
	}
}

// fence initialises transactional id id, which aborts a transaction open
// under it and fences its producer, and reports whether the id had been
// used before (an epoch above 0).
func (s *sink[T]) fence(ctx context.Context, id string) (bool, error) {
	cl, err := s.client(kgo.TransactionalID(id), kgo.TransactionTimeout(s.cfg.TransactionTimeout))
	if err != nil {
		return false, err
	}
	defer cl.Close()
	_, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		return false, fmt.Errorf("kafka: initialise transactional id %q (to abort what it left open): %w", id, err)
	}
	return epoch > 0, nil
}

// Begin opens the transaction that follows checkpoint after.
func (s *sink[T]) Begin(ctx context.Context, after uint64) ([]byte, error) {
	id := s.txnID(after)
	cl, err := s.client(kgo.TransactionalID(id), kgo.TransactionTimeout(s.cfg.TransactionTimeout),
		kgo.DefaultProduceTopic(s.cfg.Topic))
	if err != nil {
		return nil, err
	}
	if _, _, err := cl.ProducerID(ctx); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: initialise transactional id %q: %w", id, err)
	}
	if err := cl.BeginTransaction(); err != nil {
		cl.Close()
		return nil, fmt.Errorf("kafka: begin a transaction of %q: %w", id, err)
	}
	s.open = &txn{id: id, cl: cl}
	return []byte(id), nil
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
	s.live[t.id] = t.cl
	s.open = nil
	return encodeHandle(t.id, pid, epoch, t.records), nil
}

// Commit ends a pre-committed transaction with a commit: through its
// producer when this task still has it, else by its stored producer id and
// epoch. A transaction without records has nothing to commit.
func (s *sink[T]) Commit(ctx context.Context, h []byte) error {
	id, _, _, records, err := decodeHandle(h)
	if err != nil {
		return err
	}
	cl := s.live[id]
	if cl == nil {
		if records == 0 {
			return nil
		}
		return s.commitRaw(ctx, h)
	}
	if records > 0 {
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			return fmt.Errorf("kafka: commit transaction %q: %w", id, err)
		}
	}
	delete(s.live, id)
	cl.Close()
	return nil
}

// commitRaw commits transaction h with an EndTxn request that carries its
// stored producer id and epoch.
func (s *sink[T]) commitRaw(ctx context.Context, h []byte) error {
	id, pid, epoch, records, err := decodeHandle(h)
	if err != nil || records == 0 {
		return err
	}
	req := kmsg.NewPtrEndTxnRequest()
	req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit = id, pid, epoch, true
	resp, err := req.RequestWith(ctx, s.admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
	}
	if err != nil {
		return fmt.Errorf("kafka: commit transaction %q (producer %d, epoch %d) of a restored checkpoint: %w; if the broker aborted it (after the transaction timeout, %v), its %d records are lost",
			id, pid, epoch, err, s.cfg.TransactionTimeout, records)
	}
	return nil
}

// Close closes the producers without committing: what they left open is
// aborted by the next recovery's fencing, or by the broker's timeout.
func (s *sink[T]) Close() error {
	if s.open != nil {
		s.open.cl.Close()
		s.open = nil
	}
	for id, cl := range s.live {
		cl.Close()
		delete(s.live, id)
	}
	if s.admin != nil {
		s.admin.Close()
		s.admin = nil
	}
	return nil
}
