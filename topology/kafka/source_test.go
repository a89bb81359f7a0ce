package kafka_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/kafka"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fill writes the values 0..n-1 to topic, spread over its partitions.
func fill(t *testing.T, brokers []string, topic string, n int64) { fillFrom(t, brokers, topic, 0, n) }

// waitCommitted reads topic read_committed until every value of 0..n-1
// has appeared (or the deadline passes). quiet, when given, is called each
// time a read of a quarter second finds no new value.
func waitCommitted(t *testing.T, brokers []string, topic string, n int64, quiet ...func()) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := map[int64]bool{}
	for int64(len(seen)) < n {
		poll, stop := ctx, context.CancelFunc(func() {})
		if len(quiet) > 0 {
			poll, stop = context.WithTimeout(ctx, 250*time.Millisecond)
		}
		fs := cl.PollFetches(poll)
		stop()
		if ctx.Err() != nil {
			t.Fatalf("only %d of %d values committed in time", len(seen), n)
		}
		before := len(seen)
		fs.EachRecord(func(r *kgo.Record) { seen[int64(binary.BigEndian.Uint64(r.Value))] = true })
		if len(seen) == before {
			for _, f := range quiet {
				f()
			}
		}
	}
}

// pipeline is Kafka "in" -> keyed count -> Kafka "out", at parallelism p;
// sink edits the sink's configuration.
func pipeline(name string, brokers []string, p int, sink ...func(*kafka.SinkConfig)) *topology.Graph {
	g := topology.New(name)
	in := kafka.Source(g, "in", kafka.SourceConfig{Brokers: brokers, Topic: "in", ReadCommitted: true}, topology.Parallelism(p))
	vals := topology.Map(in, "decode", func(r kafka.Record) int64 { return int64(binary.BigEndian.Uint64(r.Value)) }, topology.Parallelism(p))
	keyed := topology.Process(topology.KeyBy(vals, func(v int64) int64 { return v % 11 }), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			c := topology.Value[int64](ks, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				x, _ := c.Get()
				c.Set(x + 1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(p))
	cfg := kafka.SinkConfig{Brokers: brokers, Topic: "out", TransactionalIDPrefix: name}
	for _, f := range sink {
		f(&cfg)
	}
	kafka.Sink(keyed, "out", cfg,
		func(v int64) ([]byte, []byte) { return nil, binary.BigEndian.AppendUint64(nil, uint64(v)) }, topology.Parallelism(2))
	return g
}

// TestKafkaToKafkaExactlyOnce: Kafka -> keyed job -> Kafka with seeded task
// panics at 20 ms checkpoints; once the output holds every input, the job
// stops with a savepoint and a read_committed consumer finds each input's
// effect exactly once.
func TestKafkaToKafkaExactlyOnce(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	const n = 20_000
	brokers := startKafka(t, "in", "out")
	fill(t, brokers, "in", n)
	rng := rand.New(rand.NewPCG(seed, 5))
	var mu sync.Mutex
	var failures atomic.Int64
	faults := &actorstest.Faults{Process: func(task string) {
		mu.Lock()
		fail := failures.Load() < 6 && rng.IntN(30) == 0
		mu.Unlock()
		if fail {
			failures.Add(1)
			panic("injected failure in " + task)
		}
	}}
	j, err := actors.Start(context.Background(), pipeline("k2k", brokers, 2), actors.WithStore(snapshots.NewMem()),
		actorstest.WithFaults(faults), actors.WithCheckpointInterval(20*time.Millisecond),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 100, Window: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, brokers, "out", n)
	stopWith(t, j, "done")
	wantOnce(t, committed(t, brokers, "out"), n)
	t.Logf("%d failures injected", failures.Load())
}

// stopWith stops j with a savepoint, retrying while a failover aborts it.
func stopWith(t *testing.T, j *actors.Job, name string) {
	t.Helper()
	for try := 0; ; try++ {
		_, err := j.StopWithSavepoint(context.Background(), name)
		if err == nil {
			if werr := j.Wait(); !errors.Is(werr, actors.ErrStopped) {
				t.Fatalf("Wait: %v", werr)
			}
			return
		}
		if try == 20 {
			t.Fatalf("StopWithSavepoint: %v", err)
		}
	}
}

// TestKafkaSourceRescales: a job stopped with a savepoint part way through
// the input at source parallelism 2 resumes at 3, and then at 1, its
// partitions dealt out again: the output holds every input once.
func TestKafkaSourceRescales(t *testing.T) {
	const n = 9_000
	brokers := startKafka(t, "in", "out")
	store := snapshots.NewMem()
	fill(t, brokers, "in", n/3)
	for i, p := range []int{2, 3, 1} {
		opts := []actors.Option{actors.WithStore(store), actors.WithCheckpointInterval(20 * time.Millisecond)}
		if i > 0 {
			opts = append(opts, actors.WithSavepoint(string(rune('a'+i-1))))
		}
		j, err := actors.Start(context.Background(), pipeline("rescale", brokers, p), opts...)
		if err != nil {
			t.Fatal(err)
		}
		waitCommitted(t, brokers, "out", n*int64(i+1)/3)
		stopWith(t, j, string(rune('a'+i)))
		if i < 2 {
			fillFrom(t, brokers, "in", n*int64(i+1)/3, n*int64(i+2)/3)
		}
	}
	wantOnce(t, committed(t, brokers, "out"), n)
}

// fillFrom writes the values from..to-1 to topic.
func fillFrom(t *testing.T, brokers []string, topic string, from, to int64) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, to-from)
	for v := from; v < to; v++ {
		recs = append(recs, &kgo.Record{Key: binary.BigEndian.AppendUint64(nil, uint64(v)), Value: binary.BigEndian.AppendUint64(nil, uint64(v))})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestStopWithSavepointCommits: a job stopped with a savepoint mid-stream
// has committed its sinks' transactions when StopWithSavepoint returns:
// none is left open (which would hold read_committed consumers back until
// the broker aborted it, and then make the savepoint unusable); started
// again from the savepoint, it completes the output exactly once.
func TestStopWithSavepointCommits(t *testing.T) {
	const n = 20_000
	brokers := startKafka(t, "in", "out")
	fill(t, brokers, "in", n)
	store := snapshots.NewMem()
	// No periodic checkpoint: everything the sink wrote is in the
	// transaction the savepoint pre-commits.
	wrote := make(chan struct{})
	var once sync.Once
	j, err := actors.Start(context.Background(), pipeline("stop-commits", brokers, 2), actors.WithStore(store),
		actors.WithCheckpointInterval(0),
		actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
			if strings.HasPrefix(task, "out#") {
				once.Do(func() { close(wrote) })
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	<-wrote
	stopWith(t, j, "mid")
	for _, id := range openTransactions(t, brokers, "stop-commits") {
		t.Errorf("transaction %s is still open after StopWithSavepoint", id)
	}
	j, err = actors.Start(context.Background(), pipeline("stop-commits", brokers, 2), actors.WithStore(store),
		actors.WithCheckpointInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	waitCommitted(t, brokers, "out", n)
	stopWith(t, j, "end")
	wantOnce(t, committed(t, brokers, "out"), n)
}

// TestSourceRecordFields: a record's key, value, headers, timestamp,
// partition and offset reach the job as written.
func TestSourceRecordFields(t *testing.T) {
	brokers := startKafka(t, "in")
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("in"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ts := time.UnixMilli(1_700_000_000_123)
	sent := []*kgo.Record{
		{Partition: 1, Key: []byte("k"), Value: []byte("v"), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("abc")}, {Key: "empty"}}},
		{Partition: 1, Key: []byte("k2"), Value: []byte("v2"), Timestamp: ts.Add(time.Second)},
	}
	if err := cl.ProduceSync(context.Background(), sent...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	got := make(chan kafka.Record, 2)
	g := topology.New("fields")
	topology.Sink(kafka.Source(g, "in", kafka.SourceConfig{Brokers: brokers, Topic: "in"}), "collect",
		func(r kafka.Record) error { got <- r; return nil })
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	want := []kafka.Record{
		{Key: []byte("k"), Value: []byte("v"), Timestamp: ts, Partition: 1, Offset: 0,
			Headers: []kafka.Header{{Key: "trace", Value: []byte("abc")}, {Key: "empty"}}},
		{Key: []byte("k2"), Value: []byte("v2"), Timestamp: ts.Add(time.Second), Partition: 1, Offset: 1},
	}
	for i, w := range want {
		r := <-got
		if !bytes.Equal(r.Key, w.Key) || !bytes.Equal(r.Value, w.Value) || !r.Timestamp.Equal(w.Timestamp) ||
			r.Partition != w.Partition || r.Offset != w.Offset || len(r.Headers) != len(w.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, r, w)
		}
		for h := range w.Headers {
			if r.Headers[h].Key != w.Headers[h].Key || !bytes.Equal(r.Headers[h].Value, w.Headers[h].Value) {
				t.Fatalf("record %d header %d: %+v, want %+v", i, h, r.Headers[h], w.Headers[h])
			}
		}
	}
}
