package kafka_test

import (
	"context"
	"errors"
	"strings"
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
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSinkReusesPooledIDs: Kafka -> keyed job -> Kafka with the smallest
// pool (three ids per sink task) over many checkpoints, with a task
// failure in every round of input: the output holds every input once, and
// the sink used no transactional id outside its pools.
func TestSinkReusesPooledIDs(t *testing.T) {
	const rounds, per = 8, 500
	brokers := startKafka(t, "in", "out")
	var completed atomic.Int64
	var fail atomic.Bool
	var failures atomic.Int64
	faults := &actorstest.Faults{Process: func(task string) {
		if strings.HasPrefix(task, "count#") && fail.CompareAndSwap(true, false) {
			failures.Add(1)
			panic("injected failure in " + task)
		}
	}}
	j, err := actors.Start(context.Background(), pipeline("pooled", brokers, 2, func(c *kafka.SinkConfig) { c.PoolSize = 3 }),
		actors.WithStore(snapshots.NewMem()), actorstest.WithFaults(faults),
		actors.WithCheckpointInterval(20*time.Millisecond),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted {
				completed.Add(1)
			}
		}),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 100, Window: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	for r := range int64(rounds) {
		fail.Store(true)
		fillFrom(t, brokers, "in", r*per, (r+1)*per)
		waitCommitted(t, brokers, "out", (r+1)*per)
		// A few more checkpoints before the next round, so that each
		// round's transactions have their ids reused.
		// (A checkpoint that a failover aborts is tried again.)
		for c, try := completed.Load(), 0; completed.Load() < c+3; try++ {
			if try == 100 {
				t.Fatalf("round %d: 100 checkpoints tried, %d completed", r, completed.Load()-c)
			}
			j.Checkpoint(context.Background())
		}
	}
	stopWith(t, j, "end")
	wantOnce(t, committed(t, brokers, "out"), rounds*per)
	ids, incarnations := inPools(t, brokers, "pooled", 2, 3)
	if n := completed.Load(); n < 3*rounds {
		t.Fatalf("%d checkpoints completed, want at least %d", n, 3*rounds)
	}
	if f := failures.Load(); f != rounds {
		t.Fatalf("%d failures injected, want one per round, %d", f, rounds)
	}
	t.Logf("%d checkpoints completed over %d transactional ids of %d incarnations", completed.Load(), ids, incarnations)
}

// epochOf returns the producer epoch of transactional id id.
func epochOf(t *testing.T, cl *kgo.Client, id string) int16 {
	t.Helper()
	req := kmsg.NewPtrDescribeTransactionsRequest()
	req.TransactionalIDs = []string{id}
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range resp.TransactionStates {
		if s.TransactionalID == id {
			return s.ProducerEpoch
		}
	}
	t.Fatalf("transactional id %s unknown", id)
	return 0
}

// TestSinkOlderSavepointFencedCommit: a savepoint taken while the job ran
// on lists a transaction that was committed, and whose id the job used
// again after. Restored later, the commit finds the id at a newer epoch:
// Kafka cannot say whether the transaction committed, so the restore fails
// loudly, naming SinkConfig.AssumeFencedCommitted; with that option the job
// starts from the savepoint.
func TestSinkOlderSavepointFencedCommit(t *testing.T) {
	const n = 2_000
	brokers := startKafka(t, "in", "out")
	fill(t, brokers, "in", n)
	store := snapshots.NewMem()
	wrote := make(chan struct{})
	var once atomic.Bool
	j, err := actors.Start(context.Background(), pipeline("older", brokers, 2), actors.WithStore(store),
		actors.WithCheckpointInterval(0),
		actorstest.WithFaults(&actorstest.Faults{Process: func(task string) {
			if strings.HasPrefix(task, "out#") && once.CompareAndSwap(false, true) {
				close(wrote)
			}
		}}))
	if err != nil {
		t.Fatal(err)
	}
	<-wrote
	if _, err := j.Savepoint(context.Background(), "old"); err != nil {
		t.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// The savepoint pre-committed each task's first transaction, on id 0
	// of its pool; checkpoints go on until both ids have a newer epoch.
	var first [2]string
	for task := range first {
		if first[task], err = poolID(brokers, "older", task, 0); err != nil {
			t.Fatal(err)
		}
	}
	before := [2]int16{epochOf(t, cl, first[0]), epochOf(t, cl, first[1])}
	for try := 0; epochOf(t, cl, first[0]) == before[0] || epochOf(t, cl, first[1]) == before[1]; try++ {
		if try == 100 {
			t.Fatal("the ids of the savepoint's transactions were not used again in 100 checkpoints")
		}
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// The job takes no checkpoint of its own: records processed after
	// the last one above are committed by the next, so it checkpoints
	// until every value is.
	waitCommitted(t, brokers, "out", n, func() {
		if _, err := j.Checkpoint(context.Background()); err != nil {
			t.Fatalf("checkpoint: %v", err)
		}
	})
	stopWith(t, j, "end")

	err = actors.Run(context.Background(), pipeline("older", brokers, 2), actors.WithStore(store), actors.WithSavepoint("old"),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 1, Window: time.Hour}))
	if !errors.Is(err, topology.ErrCommit) || !strings.Contains(err.Error(), "AssumeFencedCommitted") {
		t.Fatalf("restore of the older savepoint: %v, want ErrCommit naming AssumeFencedCommitted", err)
	}

	j, err = actors.Start(context.Background(), pipeline("older", brokers, 2, func(c *kafka.SinkConfig) { c.AssumeFencedCommitted = true }),
		actors.WithStore(store), actors.WithSavepoint("old"), actors.WithCheckpointInterval(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatalf("a checkpoint after the restore with AssumeFencedCommitted: %v", err)
	}
	stopWith(t, j, "again")
}
