package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceErr keeps the first error of asynchronous produces: reading it is
// an atomic load, cheap enough per record.
type produceErr struct{ err atomic.Pointer[error] }

// promise is a produce callback that keeps the first error.
func (e *produceErr) promise(_ *kgo.Record, err error) {
	if err != nil {
		e.err.CompareAndSwap(nil, &err)
	}
}

func (e *produceErr) get() error {
	if p := e.err.Load(); p != nil {
		return *p
	}
	return nil
}

// startKafkaLoop starts the plain loops: one per unit of parallelism, each
// a franz-go client that reads its share of the input's partitions (k
// modulo the parallelism) with read_committed, does kafkaWork on each
// record and produces the result to the output topic, without
// transactions.
func startKafkaLoop(ctx context.Context, brokers []string, partitions int32, rc rowConfig) (*kafkaPipeline, error) {
	lctx, cancel := context.WithCancel(ctx)
	p := &kafkaPipeline{failed: make(chan struct{})}
	var once sync.Once
	fail := func(err error) { once.Do(func() { p.err = err; close(p.failed) }) }
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for i := range int32(rc.Parallelism) {
		offsets := map[int32]kgo.Offset{}
		for k := i; k < partitions; k += int32(rc.Parallelism) {
			offsets[k] = kgo.NewOffset().AtStart()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkaOut),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{kafkaIn: offsets}), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if err != nil {
			cancel()
			for _, c := range clients {
				c.Close()
			}
			return nil, fmt.Errorf("bench: kafka loop: %w", err)
		}
		clients = append(clients, cl)
		wg.Go(func() {
			if err := runKafkaLoop(lctx, cl); err != nil {
				fail(err)
			}
		})
	}
	p.stop = func() error {
		cancel()
		wg.Wait()
		for _, c := range clients {
			c.Close()
		}
		return nil
	}
	return p, nil
}

// runKafkaLoop is one consume → produce loop, until ctx ends.
func runKafkaLoop(ctx context.Context, cl *kgo.Client) error {
	var perr produceErr
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("bench: kafka loop: fetch: %w", err)
		}
		if err := perr.get(); err != nil {
			return fmt.Errorf("bench: kafka loop: produce: %w", err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			cl.Produce(ctx, &kgo.Record{Value: kafkaWork(r.Value)}, perr.promise)
		})
	}
}

// startKafkaJob starts the snapflow job of an alo or eo row.
func startKafkaJob(ctx context.Context, brokers []string, rc rowConfig) (*kafkaPipeline, error) {
	interval, err := parseInterval(rc.Interval)
	if err != nil {
		return nil, err
	}
	name := fmt.Sprintf("bench-kafka-%d", time.Now().UnixNano())
	g := topology.New(name)
	src := kafka.Source(g, "source", kafka.SourceConfig{Brokers: brokers, Topic: kafkaIn, ReadCommitted: true},
		topology.Parallelism(rc.Parallelism))
	out := topology.Map(src, "work", func(r kafka.Record) []byte { return kafkaWork(r.Value) }, topology.Parallelism(rc.Parallelism))
	var producer *kgo.Client
	if rc.Mode == kafkaALO {
		if producer, err = kafkaALOSink(out, brokers, rc.Parallelism); err != nil {
			return nil, err
		}
	} else {
		kafka.Sink(out, "sink", kafka.SinkConfig{Brokers: brokers, Topic: kafkaOut, TransactionalIDPrefix: name},
			func(v []byte) ([]byte, []byte) { return nil, v }, topology.Parallelism(rc.Parallelism))
	}
	p := &kafkaPipeline{failed: make(chan struct{})}
	var mu sync.Mutex
	var ckpts []kafkaCheckpoint
	p.checkpoints = func() []kafkaCheckpoint { mu.Lock(); defer mu.Unlock(); return ckpts }
	job, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(interval),
		actors.WithCheckpointTimeout(time.Minute),
		actors.WithRestartPolicy(restart.Policy{MaxFailures: restart.NoRestarts}),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && !e.Final {
				mu.Lock()
				ckpts = append(ckpts, kafkaCheckpoint{at: e.Time, duration: e.Duration, align: e.Alignment, bytes: e.Bytes})
				mu.Unlock()
			}
		}))
	if err != nil {
		if producer != nil {
			producer.Close()
		}
		return nil, err
	}
	var stopping atomic.Bool
	go func() {
		err := job.Wait()
		if !stopping.Load() {
			p.err = fmt.Errorf("the job ended before it was stopped: %w", err)
			close(p.failed)
		}
	}()
	p.stop = func() error {
		stopping.Store(true)
		err := job.Stop()
		if producer != nil {
			producer.Close()
		}
		if err != nil && !errors.Is(err, actors.ErrStopped) {
			return err
		}
		return nil
	}
	return p, nil
}

// kafkaALOSink adds the alo row's sink: a topology.Sink whose tasks share
// one plain franz-go producer. A produce is asynchronous: franz-go batches
// the records by partition and sends a batch while the one before it is in
// flight, so there is nothing to flush per batch; the first failed produce
// fails the task at its next record. (With checkpoints on, an at-least-once
// sink would also flush at each barrier, which topology.Sink has no hook
// for; this row has checkpoints off.)
func kafkaALOSink(out topology.Stream[[]byte], brokers []string, parallelism int) (*kgo.Client, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(kafkaOut))
	if err != nil {
		return nil, fmt.Errorf("bench: kafka alo sink: %w", err)
	}
	perr := &produceErr{}
	ctx := context.Background()
	topology.Sink(out, "sink", func(v []byte) error {
		if err := perr.get(); err != nil {
			return fmt.Errorf("bench: kafka alo sink: produce to %s: %w", kafkaOut, err)
		}
		cl.Produce(ctx, &kgo.Record{Value: v}, perr.promise)
		return nil
	}, topology.Parallelism(parallelism))
	return cl, nil
}
