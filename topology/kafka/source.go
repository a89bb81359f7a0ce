package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/snapflow/snapflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Record is a record read from Kafka.
type Record struct {
	Key, Value []byte
	Headers    []Header // nil when the record has none
	Timestamp  time.Time
	Partition  int32
	Offset     int64
}

// Header is a record header.
type Header struct {
	Key   string
	Value []byte
}

// DefaultDiscoveryInterval is how often Source looks for new partitions
// when SourceConfig.DiscoveryInterval is 0.
const DefaultDiscoveryInterval = 10 * time.Second

// SourceConfig configures Source.
type SourceConfig struct {
	// Brokers are the seed brokers, "host:port".
	Brokers []string
	// Topic is the topic read.
	Topic string
	// ReadCommitted reads only committed records of transactional
	// producers (isolation level read_committed).
	ReadCommitted bool
	// DiscoveryInterval is how often the source looks for partitions added
	// to the topic (default DefaultDiscoveryInterval; negative: never
	// after the start).
	DiscoveryInterval time.Duration
	// ClientOptions are added to the options of the client (TLS, SASL,
	// ...).
	ClientOptions []kgo.Opt
	// CheckTimeout bounds the check at Start that the brokers answer and
	// the topic exists (default DefaultCheckTimeout).
	CheckTimeout time.Duration
}

// DefaultCheckTimeout bounds the checks the connectors run when a job
// starts, when their configuration gives none.
const DefaultCheckTimeout = 10 * time.Second

// Source adds a source of the records of a Kafka topic, read from the
// start of each partition. Its position is a list of splits: one per
// partition it reads, with the offset of the next record (stored in
// checkpoints: a consumer group's committed offsets play no part), and one
// per class of partition numbers it will read when they appear (partition k
// belongs to the class k modulo m equal to r). At the start, task s of p
// owns the class of s modulo p; a job restored at another parallelism
// deals the splits out again, and divides classes when it has more tasks
// than splits.
func Source(g *topology.Graph, name string, cfg SourceConfig, opts ...topology.Option) topology.Stream[Record] {
	if cfg.DiscoveryInterval == 0 {
		cfg.DiscoveryInterval = DefaultDiscoveryInterval
	}
	opts = append(opts, topology.Check(func(ctx context.Context) error {
		if len(cfg.Brokers) == 0 || cfg.Topic == "" {
			return fmt.Errorf("kafka: SourceConfig needs Brokers and a Topic")
		}
		_, err := checkTopic(ctx, cfg.Brokers, cfg.ClientOptions, cfg.Topic, cfg.CheckTimeout)
		return err
	}))
	return topology.FromSplits(g, name, topology.Splits{
		Initial: func(p int) [][]byte {
			out := make([][]byte, p)
			for s := range out {
				out[s] = classSplit{mod: int32(p), rem: int32(s)}.encode()
			}
			return out
		},
		Divide: func(b []byte) ([]byte, []byte, bool) {
			c, ok := decodeClass(b)
			if !ok || c.mod > 1<<20 {
				return nil, nil, false
			}
			return classSplit{mod: 2 * c.mod, rem: c.rem, from: c.from}.encode(),
				classSplit{mod: 2 * c.mod, rem: c.rem + c.mod, from: c.from}.encode(), true
		},
	}, func(int, int) topology.SplitSource[Record] { return &source{cfg: cfg} }, opts...)
}

// classSplit owns the partitions k >= from with k % mod == rem that are
// not yet partition splits.
type classSplit struct{ mod, rem, from int32 }

func (c classSplit) encode() []byte {
	b := append([]byte{'c'}, binary.BigEndian.AppendUint32(nil, uint32(c.mod))...)
	b = binary.BigEndian.AppendUint32(b, uint32(c.rem))
	return binary.BigEndian.AppendUint32(b, uint32(c.from))
}

func decodeClass(b []byte) (classSplit, bool) {
	if len(b) != 13 || b[0] != 'c' {
		return classSplit{}, false
	}
	return classSplit{int32(binary.BigEndian.Uint32(b[1:])), int32(binary.BigEndian.Uint32(b[5:])), int32(binary.BigEndian.Uint32(b[9:]))}, true
}

// partSplit is a partition and the offset of its next record (-1: its
// start).
type partSplit struct {
	partition int32
	next      int64
	index     int // in the list Splits returns
}

func (p partSplit) encode() []byte {
	b := append([]byte{'p'}, binary.BigEndian.AppendUint32(nil, uint32(p.partition))...)
	return binary.BigEndian.AppendUint64(b, uint64(p.next))
}

func decodeSplit(b []byte) (*partSplit, *classSplit, error) {
	if c, ok := decodeClass(b); ok {
		if c.mod < 1 || c.rem < 0 || c.rem >= c.mod || c.from < 0 {
			return nil, nil, fmt.Errorf("kafka: split %+v is invalid", c)
		}
		return nil, &c, nil
	}
	if len(b) == 13 && b[0] == 'p' {
		return &partSplit{partition: int32(binary.BigEndian.Uint32(b[1:])), next: int64(binary.BigEndian.Uint64(b[5:]))}, nil, nil
	}
	return nil, nil, fmt.Errorf("kafka: source split of %d bytes is not one of this source's", len(b))
}

// source is one task's reader.
type source struct {
	cfg     SourceConfig
	cl      *kgo.Client
	parts   []*partSplit
	byPart  map[int32]*partSplit
	classes []*classSplit
	// order is every split's encoder, in the order of Open's list, then
	// the partitions found since: the list Splits returns, which
	// SplitRead.Split indexes.
	order []func() []byte
	// ended are the indices of class splits, which never hold records
	// themselves, not yet reported done.
	ended []int
	wake  func()

	cancel  context.CancelFunc
	done    sync.WaitGroup
	fetched chan []*kgo.Record // from the poller; cap 1 bounds the memory
	found   chan int32         // partition counts the poller discovered
	batch   []*kgo.Record      // fetched, not yet read
}

// SetWake implements topology.Waker.
func (s *source) SetWake(w func()) { s.wake = w }

// Open positions the reader at its splits, materialises the partitions its
// classes own, and starts polling.
func (s *source) Open(ctx context.Context, splits [][]byte) error {
	switch {
	case len(s.cfg.Brokers) == 0:
		return fmt.Errorf("kafka: SourceConfig: no Brokers")
	case s.cfg.Topic == "":
		return fmt.Errorf("kafka: SourceConfig: no Topic")
	}
	s.byPart = map[int32]*partSplit{}
	for _, b := range splits {
		p, c, err := decodeSplit(b)
		if err != nil {
			return err
		}
		if p != nil {
			s.addPart(p)
		} else {
			s.ended = append(s.ended, len(s.order))
			s.classes = append(s.classes, c)
			s.order = append(s.order, func() []byte { return c.encode() }) // c as it is then
		}
	}
	opts := append([]kgo.Opt{kgo.SeedBrokers(s.cfg.Brokers...)}, s.cfg.ClientOptions...)
	if s.cfg.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return fmt.Errorf("kafka: %w", err)
	}
	s.cl = cl
	n, err := partitionCount(ctx, cl, s.cfg.Topic)
	if err != nil {
		return err
	}
	s.consume(s.parts)
	s.materialise(n)
	pctx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	s.fetched, s.found = make(chan []*kgo.Record, 1), make(chan int32, 1)
	s.done.Add(1)
	go s.poll(pctx)
	return nil
}

// addPart adds a partition split at the end of the list.
func (s *source) addPart(p *partSplit) {
	p.index = len(s.order)
	s.parts, s.byPart[p.partition] = append(s.parts, p), p
	s.order = append(s.order, func() []byte { return p.encode() }) // p as it is then
}

// consume starts reading the partitions of ps at their offsets.
func (s *source) consume(ps []*partSplit) {
	if len(ps) == 0 {
		return
	}
	offsets := map[int32]kgo.Offset{}
	for _, p := range ps {
		if p.next < 0 {
			offsets[p.partition] = kgo.NewOffset().AtStart()
		} else {
			offsets[p.partition] = kgo.NewOffset().At(p.next)
		}
	}
	s.cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{s.cfg.Topic: offsets})
}

// materialise turns the partitions below n that the classes own into
// partition splits, read from their start.
func (s *source) materialise(n int32) {
	var added []*partSplit
	for _, c := range s.classes {
		for k := c.from; k < n; k++ {
			if k%c.mod == c.rem {
				if _, ok := s.byPart[k]; !ok {
					p := &partSplit{partition: k, next: -1}
					s.addPart(p)
					added = append(added, p)
				}
			}
		}
		c.from = max(c.from, n)
	}
	s.consume(added)
}

// checkTopic connects to brokers and returns the number of partitions of
// topic, within timeout (DefaultCheckTimeout when 0), with errors that say
// what is wrong.
func checkTopic(ctx context.Context, brokers []string, extra []kgo.Opt, topic string, timeout time.Duration) (int32, error) {
	if timeout <= 0 {
		timeout = DefaultCheckTimeout
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(brokers...)}, extra...)...)
	if err != nil {
		return 0, fmt.Errorf("kafka: %w", err)
	}
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	n, err := partitionCount(cctx, cl, topic)
	var kafkaErr *kerr.Error
	if err != nil && !errors.As(err, &kafkaErr) && ctx.Err() == nil { // the brokers, not the topic
		return 0, fmt.Errorf("kafka: the brokers %s did not answer within %v: is the address right, and the cluster up? (%w)",
			strings.Join(brokers, ","), timeout, err)
	}
	return n, err
}

// partitionCount returns the number of partitions of topic.
func partitionCount(ctx context.Context, cl *kgo.Client, topic string) (int32, error) {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return 0, fmt.Errorf("kafka: metadata of topic %q: %w", topic, err)
	}
	for _, rt := range resp.Topics {
		if rt.Topic == nil || *rt.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			return 0, fmt.Errorf("kafka: topic %q: %w", topic, err)
		}
		return int32(len(rt.Partitions)), nil
	}
	return 0, fmt.Errorf("kafka: topic %q: not in the metadata", topic)
}

// poll fetches records into s.fetched, and looks for new partitions every
// DiscoveryInterval, until ctx ends.
func (s *source) poll(ctx context.Context) {
	defer s.done.Done()
	next := time.Now().Add(s.cfg.DiscoveryInterval)
	for ctx.Err() == nil {
		if s.cfg.DiscoveryInterval > 0 && len(s.classes) > 0 && time.Now().After(next) {
			next = time.Now().Add(s.cfg.DiscoveryInterval)
			if n, err := partitionCount(ctx, s.cl, s.cfg.Topic); err == nil {
				select {
				case s.found <- n:
					s.wake()
				default:
				}
			}
		}
		wait := time.Second // how long a poll may wait for records
		if s.cfg.DiscoveryInterval > 0 {
			wait = min(wait, s.cfg.DiscoveryInterval)
		}
		pctx, cancel := context.WithTimeout(ctx, wait)
		fs := s.cl.PollRecords(pctx, 4096)
		cancel()
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		select {
		case s.fetched <- recs:
			s.wake()
		case <-ctx.Done():
		}
	}
}

// Read returns the records fetched so far, or ErrSourceIdle; the poller
// wakes the task when it has more. It never ends (io.EOF) by itself.
func (s *source) Read(buf []Record) (int, error) {
	r, err := s.ReadSplit(buf)
	return r.N, err
}

// ReadSplit implements topology.SplitReader: a read returns records of one
// partition, so that each keeps its own watermark. It first reports the
// class splits done: they hold no records themselves.
func (s *source) ReadSplit(buf []Record) (topology.SplitRead, error) {
	select {
	case n := <-s.found:
		s.materialise(n)
	default:
	}
	if len(s.ended) > 0 {
		i := s.ended[0]
		s.ended = s.ended[1:]
		return topology.SplitRead{Split: i, Done: true}, nil
	}
	if len(s.batch) == 0 {
		select {
		case s.batch = <-s.fetched:
		default:
			return topology.SplitRead{}, topology.ErrSourceIdle
		}
	}
	// The poller's records come in runs of one partition: one lookup per
	// run.
	var p *partSplit
	n := 0
	for n < len(buf) && len(s.batch) > 0 {
		r := s.batch[0]
		if p == nil || r.Partition != p.partition {
			if n > 0 {
				break // a read holds the records of one partition
			}
			if p = s.byPart[r.Partition]; p == nil {
				s.batch = s.batch[1:]
				continue // not ours
			}
		}
		s.batch = s.batch[1:]
		if r.Offset < p.next {
			continue // before the position (a refetch)
		}
		p.next = r.Offset + 1
		buf[n] = Record{Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Partition: r.Partition, Offset: r.Offset}
		if len(r.Headers) > 0 {
			buf[n].Headers = make([]Header, len(r.Headers))
			for i, h := range r.Headers {
				buf[n].Headers[i] = Header{Key: h.Key, Value: h.Value}
			}
		}
		n++
	}
	if n == 0 {
		return topology.SplitRead{}, nil
	}
	return topology.SplitRead{N: n, Split: p.index}, nil
}

// Splits returns every split's state, in the order of the splits given to
// Open, then the partitions found since.
func (s *source) Splits() [][]byte {
	out := make([][]byte, len(s.order))
	for i, enc := range s.order {
		out[i] = enc()
	}
	return out
}

// Close stops polling and closes the client.
func (s *source) Close() error {
	if s.cancel != nil {
		s.cancel()
		s.done.Wait()
	}
	if s.cl != nil {
		s.cl.Close()
	}
	return nil
}
