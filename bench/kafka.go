package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The kafka rows (-topology kafka) measure Kafka in and Kafka out on kfake,
// franz-go's in-process broker, which each row's child process starts for
// itself, so that every run begins on an empty cluster:
//
//   - loop: a plain franz-go consume → produce loop per partition share,
//     at-least-once, without transactions: the practical limit;
//   - alo: snapflow, kafka.Source → kafkaWork → a topology.Sink that
//     produces with a plain franz-go producer, checkpoints off;
//   - eo: snapflow, kafka.Source → kafkaWork → kafka.Sink (transactional),
//     at each checkpoint interval.
//
// Every row does the same per-record work (kafkaWork), reads the input with
// read_committed, and is measured by a read_committed consumer of the
// output, in the same process. Without -rate the input topic is filled
// with a backlog before the row starts, and records/s is the number of
// records processed during the measuring window, counted when they are
// visible to that consumer. With -rate the input is produced at that rate
// while the row runs (open loop), and the consumer also measures each
// record's latency from its production to its visibility. With -records
// each row carries that backlog to the output, and records/s is over the
// whole run, from the row's start to its last record visible (the smoke
// test's mode).
//
// The window's records are all counted once the consumer has seen a
// sentinel that the bench writes to every output partition kafkaTail after
// the window (kafkaSentinels); a snapflow job is stopped with Job.Stop only
// then.

// Modes of the kafka rows.
const (
	kafkaLoop = "loop"
	kafkaALO  = "alo"
	kafkaEO   = "eo"
)

// Shape and timing of the kafka rows.
const (
	kafkaIn, kafkaOut = "in", "out"
	// kafkaPartitions is the partitions of each topic (more when the
	// parallelism is higher).
	kafkaPartitions = 4
	// kafkaTail is how long after the window the sentinels are written
	// (kafkaSentinels): the records processed in the window have been
	// written to the output by then, well within it.
	kafkaTail = 500 * time.Millisecond
	// kafkaBacklogRate is the records/s a default backlog lasts for through
	// the warm-up, the window and the tail: above what any row drains.
	kafkaBacklogRate = 3.5e6
	// kafkaWait bounds the wait for the window's records after it closed.
	kafkaWait = 2 * time.Minute
)

// kafkaModes are the modes a kafka row can have.
var kafkaModes = []string{kafkaLoop, kafkaALO, kafkaEO}

// kafkaWarm is the warm-up of a kafka row: long enough for a job to start
// and commit a first time at 1s.
func kafkaWarm(rc rowConfig) time.Duration { return min(time.Second, rc.Duration/2) }

// kafkaBacklog is the number of records filled into the input topic before
// a row without a rate: -records, -backlog, or enough for kafkaBacklogRate.
func kafkaBacklog(rc rowConfig) int64 {
	switch {
	case rc.Records > 0:
		return rc.Records
	case rc.Backlog > 0:
		return rc.Backlog
	}
	startup := 500 * time.Millisecond
	return int64(kafkaBacklogRate * (startup + kafkaWarm(rc) + rc.Duration + kafkaTail).Seconds())
}

// kafkaPipeline is a running row: stop ends it; failed is closed, with
// err set, if it fails by itself.
type kafkaPipeline struct {
	stop   func() error
	failed chan struct{}
	err    error
	// checkpoints lists the completed checkpoints (end time, duration,
	// alignment, state bytes) of a snapflow row.
	checkpoints func() []kafkaCheckpoint
}

type kafkaCheckpoint struct {
	at              time.Time
	duration, align time.Duration
	bytes           uint64
}

// runKafka measures one kafka row in this process.
func runKafka(ctx context.Context, rc rowConfig) (Row, error) {
	if err := checkKafka(rc); err != nil {
		return Row{}, err
	}
	partitions := int32(max(kafkaPartitions, rc.Parallelism))
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, kafkaIn, kafkaOut))
	if err != nil {
		return Row{}, fmt.Errorf("bench: kafka: start kfake: %w", err)
	}
	defer cluster.Close()
	brokers := cluster.ListenAddrs()
	var backlog int64
	if rc.Rate == 0 {
		backlog = kafkaBacklog(rc)
		if err := kafkaFill(ctx, brokers, backlog, rc.RecordSize); err != nil {
			return Row{}, err
		}
	}
	start := time.Now()
	w := kafkaWindow{from: 0, to: math.MaxInt64, want: backlog, exactlyOnce: rc.Mode == kafkaEO}
	if rc.Records == 0 {
		w.from = start.Add(kafkaWarm(rc)).UnixNano()
		w.to = w.from + int64(rc.Duration)
		w.sentinel, w.latency = true, rc.Rate > 0
	}
	rd, err := newKafkaReader(brokers, kafkaOut, partitions, w)
	if err != nil {
		return Row{}, err
	}
	rctx, stopReader := context.WithCancel(ctx)
	var bg sync.WaitGroup
	defer bg.Wait()
	defer stopReader()
	bg.Go(func() { rd.run(rctx) })
	if rc.Rate > 0 {
		feed, err := newKafkaFeed(brokers, rc.Rate, rc.RecordSize)
		if err != nil {
			return Row{}, err
		}
		fctx, stopFeed := context.WithCancel(ctx)
		defer stopFeed()
		bg.Go(func() { feed.run(fctx) })
	}
	var p *kafkaPipeline
	switch rc.Mode {
	case kafkaLoop:
		p, err = startKafkaLoop(ctx, brokers, partitions, rc)
	default:
		p, err = startKafkaJob(ctx, brokers, rc)
	}
	if err != nil {
		return Row{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.stop()
		}
	}()
	k := kafkaRun{rc: rc, brokers: brokers, partitions: partitions, start: start, w: w, rd: rd, p: p}
	cpu, err := k.measure(ctx)
	if err != nil {
		return Row{}, err
	}
	stopped = true
	if err := p.stop(); err != nil {
		return Row{}, fmt.Errorf("bench: kafka %s: stop: %w", rc.Mode, err)
	}
	row, err := kafkaRow(rc, start, w, rd.reading(), p)
	if v, ok := cpu.value(); ok && row.Records > 0 {
		row.CPUPerRecordUs = measured(v / float64(row.Records))
	}
	return row, err
}

// kafkaRun is a kafka row under way.
type kafkaRun struct {
	rc         rowConfig
	brokers    []string
	partitions int32
	start      time.Time
	w          kafkaWindow
	rd         *kafkaReader
	p          *kafkaPipeline
}

// measure waits out the warm-up and the window, writes the sentinels, and
// waits until the reader has seen the window's records. It returns the
// CPU time of the window in µs.
func (k *kafkaRun) measure(ctx context.Context) (metric, error) {
	rc, w, rd, p := k.rc, k.w, k.rd, k.p
	var m kafkaMeter
	defer m.end()
	if rc.Records > 0 {
		if err := m.begin(rc); err != nil {
			return metric{}, err
		}
	} else if kafkaSleepUntil(ctx, w.from, p) {
		if err := m.begin(rc); err != nil {
			return metric{}, err
		}
		if kafkaSleepUntil(ctx, w.to, p) {
			m.end()
		}
	}
	if w.sentinel && kafkaSleepUntil(ctx, w.to+int64(kafkaTail), p) {
		if err := kafkaSentinels(ctx, k.brokers, kafkaOut, k.partitions); err != nil {
			return metric{}, err
		}
	}
	deadline := k.start.Add(kafkaWait)
	if rc.Records == 0 {
		deadline = time.Unix(0, w.to).Add(kafkaWait)
	}
	wait := time.NewTimer(time.Until(deadline))
	defer wait.Stop()
	select {
	case <-rd.done:
	case <-p.failed:
		return metric{}, fmt.Errorf("bench: kafka %s: %w", rc.Mode, p.err)
	case <-wait.C:
		r := rd.reading()
		return metric{}, fmt.Errorf("bench: kafka %s: the output's records were not all visible by %v: %s distinct records seen",
			rc.Mode, deadline.Format(time.TimeOnly), count(r.distinct))
	case <-ctx.Done():
		return metric{}, ctx.Err()
	}
	if rd.err != nil {
		return metric{}, rd.err
	}
	m.end()
	return m.cpu, nil
}

// kafkaMeter measures a kafka row's window: the CPU time the process used
// (the broker, the row and the reader), and its CPU profile if asked for.
type kafkaMeter struct {
	begun, ended bool
	cpu0         time.Duration
	cpuOK        bool
	stopProfile  func()
	cpu          metric // µs
}

func (m *kafkaMeter) begin(rc rowConfig) error {
	path := ""
	if rc.CPUProfile != "" {
		path = rc.CPUProfile + ".pprof"
	}
	stop, err := startProfile(path)
	if err != nil {
		return err
	}
	m.begun, m.stopProfile = true, stop
	m.cpu0, m.cpuOK = processCPU()
	return nil
}

// end closes the window, once; it does nothing if it never began.
func (m *kafkaMeter) end() {
	if !m.begun || m.ended {
		return
	}
	m.ended = true
	cpu1, ok := processCPU()
	m.stopProfile()
	if ok && m.cpuOK {
		m.cpu = measured(float64(cpu1-m.cpu0) / float64(time.Microsecond))
	}
}

// kafkaRow is the row of a finished run.
func kafkaRow(rc rowConfig, start time.Time, w kafkaWindow, r kafkaReading, p *kafkaPipeline) (Row, error) {
	var row Row
	if rc.Records > 0 {
		row.Records, row.Seconds = r.distinct, r.lastSeen.Sub(start).Seconds()
	} else {
		if w.want > 0 && r.lastProc < w.to {
			return Row{}, fmt.Errorf("bench: kafka %s: the backlog of %s records ran out before the window closed: raise -backlog", rc.Mode, count(w.want))
		}
		row.Records, row.Seconds = r.counted, time.Duration(w.to-w.from).Seconds()
		row.LatencyP50Ms, row.LatencyP99Ms = r.latencyP50, r.latencyP99
	}
	row.RecordsPerSec = per(float64(row.Records), row.Seconds)
	if p.checkpoints != nil {
		var ckpt, align []time.Duration
		var bytes uint64
		for _, c := range p.checkpoints() {
			if n := c.at.UnixNano(); n >= w.from && n < w.to {
				ckpt, align = append(ckpt, c.duration), append(align, c.align)
				bytes += c.bytes
			}
		}
		row.Checkpoints = len(ckpt)
		row.BytesPerCkpt = per(float64(bytes), float64(len(ckpt)))
		row.CkptP50Ms, row.CkptP99Ms = quantiles(ckpt)
		row.AlignP50Ms, row.AlignP99Ms = quantiles(align)
	}
	return row, nil
}

// checkKafka refuses a kafka row that cannot run.
func checkKafka(rc rowConfig) error {
	switch {
	case rc.RecordSize < kafkaMinSize:
		return fmt.Errorf("bench: kafka: -record-size %d, want at least %d", rc.RecordSize, kafkaMinSize)
	case rc.Mode == kafkaEO && rc.Interval == "off":
		return fmt.Errorf("bench: kafka eo: checkpoints off: its transactions would never commit")
	case rc.Mode != kafkaLoop && rc.Mode != kafkaALO && rc.Mode != kafkaEO:
		return fmt.Errorf("bench: kafka: unknown mode %q (%v)", rc.Mode, kafkaModes)
	}
	_, err := parseInterval(rc.Interval)
	return err
}

// kafkaSleepUntil waits until the unix time t, and reports whether it did
// (rather than ctx ending or p failing).
func kafkaSleepUntil(ctx context.Context, t int64, p *kafkaPipeline) bool {
	tm := time.NewTimer(time.Until(time.Unix(0, t)))
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
	case <-p.failed:
	}
	return false
}

// kafkaValue is an input value of size bytes: stamp and seq, then padding.
func kafkaValue(buf []byte, stamp int64, seq uint64) {
	binary.BigEndian.PutUint64(buf[kafkaStampAt:], uint64(stamp))
	binary.BigEndian.PutUint64(buf[kafkaSeqAt:], seq)
}

// kafkaFill produces n records into the input topic, from two producers,
// and returns once the broker has them all.
func kafkaFill(ctx context.Context, brokers []string, n int64, size int) error {
	const producers, slab = 2, 4096
	errs := make([]error, producers)
	var wg sync.WaitGroup
	for k := range producers {
		wg.Go(func() {
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkaIn),
				kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(100_000))
			if err != nil {
				errs[k] = err
				return
			}
			defer cl.Close()
			var first error
			var mu sync.Mutex
			onErr := func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
				}
			}
			var buf []byte
			for seq := int64(k); seq < n && ctx.Err() == nil; seq += producers {
				if len(buf) < size {
					buf = make([]byte, slab*size)
				}
				v := buf[:size:size]
				buf = buf[size:]
				kafkaValue(v, time.Now().UnixNano(), uint64(seq))
				cl.Produce(ctx, &kgo.Record{Value: v}, onErr)
			}
			err = cl.Flush(ctx)
			mu.Lock()
			errs[k] = cmpErr(first, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("bench: kafka: fill the input topic with %s records: %w", count(n), err)
	}
	return nil
}

// cmpErr is the first of a and b that is not nil.
func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// kafkaFeed produces into the input topic at a rate, open loop: a record's
// stamp is when the rate meant it to be produced, so that a stall of the
// producer or the broker counts as latency instead of hiding it.
type kafkaFeed struct {
	cl   *kgo.Client
	rate float64
	size int
}

func newKafkaFeed(brokers []string, rate float64, size int) (*kafkaFeed, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkaIn))
	if err != nil {
		return nil, fmt.Errorf("bench: kafka feed: %w", err)
	}
	return &kafkaFeed{cl: cl, rate: rate, size: size}, nil
}

// run produces until ctx ends, a millisecond's records at a time.
func (f *kafkaFeed) run(ctx context.Context) {
	defer f.cl.Close()
	t0 := time.Now()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var seq uint64
	for {
		due := uint64(time.Since(t0).Seconds() * f.rate)
		if due > seq {
			buf := make([]byte, int(due-seq)*f.size)
			for ; seq < due; seq++ {
				v := buf[:f.size:f.size]
				buf = buf[f.size:]
				kafkaValue(v, t0.UnixNano()+int64(float64(seq)/f.rate*1e9), seq)
				f.cl.Produce(ctx, &kgo.Record{Value: v}, nil)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
