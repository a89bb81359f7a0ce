package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The values of the kafka rows. An input value is -record-size bytes: the
// time it was produced (or, at a rate, meant to be produced: see
// kafkaFeed) and its sequence number, 8 bytes each, big endian, then
// padding. kafkaWork appends the time it processed the record: an output
// value is the input value and that, 8 bytes more.
const (
	kafkaStampAt = 0
	kafkaSeqAt   = 8
	kafkaMinSize = 16
)

// kafkaWork is the per-record work of every kafka row, in the plain loop
// as in the snapflow jobs: the output value is the input value with the
// time of processing appended. It allocates the output value, which the
// producer holds until the broker has it.
func kafkaWork(in []byte) []byte {
	out := make([]byte, len(in)+8)
	copy(out, in)
	binary.BigEndian.PutUint64(out[len(in):], uint64(time.Now().UnixNano()))
	return out
}

// kafkaWindow is what a kafka row measures: the records processed (by
// kafkaWork) in [from, to), as a read_committed consumer of the output sees
// them. Records processed outside it count for nothing but the checks.
type kafkaWindow struct {
	from, to int64 // unix ns
	// want is the number of input records when known (a backlog), else 0.
	// With -records the reading is complete once it has seen them all;
	// else once it has seen a sentinel on every partition (kafkaSentinels).
	want     int64
	sentinel bool
	// latency: record the latency (visible - produced) of the records of
	// the window; only meaningful when the input is produced at a rate.
	latency bool
	// exactlyOnce: a record seen twice is an error.
	exactlyOnce bool
}

// kafkaReading is what the output's reader saw.
type kafkaReading struct {
	counted   int64 // records of the window
	distinct  int64 // distinct input records seen
	dups      int64 // records seen again
	lastProc  int64 // latest processing time seen (unix ns)
	lastSeen  time.Time
	completed bool // the tail condition (or want) was met
	// latencyP50, latencyP99: of the window's records, when asked for and
	// some were seen
	latencyP50, latencyP99 metric
}

// kafkaReader reads the output topic with a read_committed consumer from
// its start, and counts what it sees against w.
type kafkaReader struct {
	w          kafkaWindow
	cl         *kgo.Client
	partitions int32

	mu   sync.Mutex
	r    kafkaReading
	seen []uint64 // bit per sequence number
	// latency is visible - produced, of the window's records
	latency benchwork.Histogram
	// sentinels seen, per output partition
	sentinels []bool
	done      chan struct{} // closed when completed
	err       error
}

func newKafkaReader(brokers []string, topic string, partitions int32, w kafkaWindow) (*kafkaReader, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, fmt.Errorf("bench: kafka reader: %w", err)
	}
	rd := &kafkaReader{w: w, cl: cl, partitions: partitions, sentinels: make([]bool, partitions), done: make(chan struct{})}
	if w.want > 0 {
		rd.seen = make([]uint64, (w.want+63)/64)
	}
	return rd, nil
}

// run reads until ctx ends; it closes done once the reading is complete,
// or with an error.
func (rd *kafkaReader) run(ctx context.Context) {
	defer rd.cl.Close()
	var stamps []int64
	closed := false
	finish := func(err error) {
		if !closed {
			rd.err, closed = err, true
			close(rd.done)
		}
	}
	for ctx.Err() == nil {
		fs := rd.cl.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		if err := fs.Err0(); err != nil {
			finish(fmt.Errorf("bench: kafka reader: %w", err))
			return
		}
		now := time.Now()
		stamps = stamps[:0]
		rd.mu.Lock()
		var bad error
		fs.EachRecord(func(r *kgo.Record) {
			if bad == nil {
				stamps, bad = rd.record(r, stamps)
			}
		})
		if len(stamps) > 0 {
			rd.latency.RecordBatch(now.UnixNano(), stamps)
		}
		if fs.NumRecords() > 0 {
			rd.r.lastSeen = now
		}
		complete := rd.complete()
		rd.r.completed = rd.r.completed || complete
		rd.mu.Unlock()
		if bad != nil {
			finish(bad)
			return
		}
		if complete {
			finish(nil)
		}
	}
	finish(fmt.Errorf("bench: kafka reader stopped before the window's records were all seen: %w", ctx.Err()))
}

// record counts one output record; the caller holds rd.mu.
func (rd *kafkaReader) record(r *kgo.Record, stamps []int64) ([]int64, error) {
	if string(r.Key) == kafkaSentinel {
		if r.Partition >= 0 && r.Partition < rd.partitions {
			rd.sentinels[r.Partition] = true
		}
		return stamps, nil
	}
	v := r.Value
	if len(v) < kafkaMinSize+8 {
		return stamps, fmt.Errorf("bench: kafka reader: an output value of %d bytes, want at least %d", len(v), kafkaMinSize+8)
	}
	stamp := int64(binary.BigEndian.Uint64(v[kafkaStampAt:]))
	seq := binary.BigEndian.Uint64(v[kafkaSeqAt:])
	proc := int64(binary.BigEndian.Uint64(v[len(v)-8:]))
	word, bit := seq/64, uint64(1)<<(seq%64)
	for word >= uint64(len(rd.seen)) {
		rd.seen = append(rd.seen, make([]uint64, max(1024, len(rd.seen)))...)
	}
	if rd.seen[word]&bit != 0 {
		rd.r.dups++
		if rd.w.exactlyOnce {
			return stamps, fmt.Errorf("bench: kafka reader: input record %d is in the read_committed output twice", seq)
		}
		return stamps, nil
	}
	rd.seen[word] |= bit
	rd.r.distinct++
	rd.r.lastProc = max(rd.r.lastProc, proc)
	if proc >= rd.w.from && proc < rd.w.to {
		rd.r.counted++
		if rd.w.latency {
			stamps = append(stamps, stamp)
		}
	}
	return stamps, nil
}

// complete reports whether every record of the window has been seen: the
// whole backlog with -records, else a sentinel on every partition. The
// caller holds rd.mu.
func (rd *kafkaReader) complete() bool {
	if !rd.w.sentinel {
		return rd.w.want > 0 && rd.r.distinct >= rd.w.want
	}
	for _, ok := range rd.sentinels {
		if !ok {
			return false
		}
	}
	return true
}

// kafkaSentinel is the key of the sentinels.
const kafkaSentinel = "sentinel"

// kafkaSentinels writes a sentinel to every partition of the output topic,
// outside any transaction, once every record processed in the window has
// been written (kafkaTail after it). A read_committed consumer sees a
// partition's records in the order they were written, and sees none past
// a transaction still open: once it has seen the sentinels, it has seen
// every record of the window that was committed, and the transactions
// holding them have all ended.
func kafkaSentinels(ctx context.Context, brokers []string, topic string, partitions int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return fmt.Errorf("bench: kafka sentinels: %w", err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, partitions)
	for p := range partitions {
		recs[p] = &kgo.Record{Partition: p, Key: []byte(kafkaSentinel)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("bench: kafka sentinels: %w", err)
	}
	return nil
}

// reading returns a copy of what the reader has seen so far.
func (rd *kafkaReader) reading() kafkaReading {
	rd.mu.Lock()
	defer rd.mu.Unlock()
	out := rd.r
	out.latencyP50, out.latencyP99 = latencies(&rd.latency)
	return out
}
