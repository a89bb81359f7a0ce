package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rpEvents records a job's events.
type rpEvents struct {
	mu  sync.Mutex
	all []actors.Event
	sub chan actors.Event
}

func newRPEvents() *rpEvents { return &rpEvents{sub: make(chan actors.Event, 1024)} }

func (e *rpEvents) listen(ev actors.Event) {
	e.mu.Lock()
	e.all = append(e.all, ev)
	e.mu.Unlock()
	select {
	case e.sub <- ev:
	default:
	}
}

func (e *rpEvents) of(k actors.EventKind) []actors.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []actors.Event
	for _, ev := range e.all {
		if ev.Kind == k {
			out = append(out, ev)
		}
	}
	return out
}

// await waits for an event of kind k among those not yet awaited.
func (e *rpEvents) await(t *testing.T, k actors.EventKind) actors.Event {
	t.Helper()
	timer := time.NewTimer(2 * time.Minute)
	defer timer.Stop()
	for {
		select {
		case ev := <-e.sub:
			if ev.Kind == k {
				return ev
			}
		case <-timer.C:
			t.Fatalf("timed out waiting for event %v", k)
		}
	}
}

// rpCommitted reads topic with a read_committed consumer and returns how
// many times each value appears. It writes a sentinel keyed tag to every
// partition, outside any transaction, and reads until it has seen those:
// every record committed before lies before them. A test may call it
// more than once, with another tag each time.
func rpCommitted(t *testing.T, brokers []string, topic, tag string) map[int64]int {
	t.Helper()
	ctx := context.Background()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	for p := range int32(partitions) {
		if err := prod.ProduceSync(ctx, &kgo.Record{Partition: p, Key: []byte("sentinel " + tag)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cons, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	seen := map[int64]int{}
	sentinels := map[int32]bool{}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(sentinels) < partitions {
		fs := cons.PollFetches(pctx)
		if err := pctx.Err(); err != nil {
			t.Fatalf("read %d values and %d sentinels: %v", len(seen), len(sentinels), err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			switch {
			case string(r.Key) == "sentinel "+tag:
				sentinels[r.Partition] = true
			case strings.HasPrefix(string(r.Key), "sentinel "):
			case !sentinels[r.Partition]:
				seen[int64(binary.BigEndian.Uint64(r.Value))]++
			}
		})
	}
	return seen
}

// TestReplayKafkaRefusedOutputNoDuplicate: a job with the Kafka sink
// completes checkpoints after 0..999 and 0..1999 and stops; then one
// object of the newest checkpoint is replaced by garbage: the count's
// state, a sink task's state (its pending transactions) or the manifest.
// A plain start must fail with an error wrapping ErrFallbackRefused that
// names the object, and right then the read_committed output holds what
// the two checkpoints committed (0..1999) once, nothing twice and nothing
// more; once the object is back, the job resumes from the newest
// checkpoint and the output holds every record exactly once.
func TestReplayKafkaRefusedOutputNoDuplicate(t *testing.T) {
	for _, task := range []string{"count#1", "out#0", ""} {
		name := task
		if name == "" {
			name = "manifest"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			const n = 5000
			const job = "kafka-replay"
			brokers := startKafka(t, "out")
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			opts := func(ev *rpEvents) []actors.Option {
				return []actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithCheckpointInterval(0),
					actors.WithListener(ev.listen),
					actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 3, Window: time.Hour})}
			}
			gate := testsrc.NewGate(1000)
			j, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, gate, 0), opts(newRPEvents())...)
			if err != nil {
				t.Fatal(err)
			}
			var newer uint64
			for _, limit := range []int64{1000, 2000} {
				gate.SetLimit(limit)
				gate.WaitReached(t, limit)
				if newer, err = j.Checkpoint(ctx); err != nil {
					t.Fatalf("checkpoint after %d: %v", limit, err)
				}
			}
			// The sinks commit at a checkpoint's completion, after
			// Checkpoint returns; a Stop before they did would leave the
			// newest checkpoint's transactions open, for the next start to
			// commit, and the read_committed reads below would wait for
			// the broker to abort them (at the transaction timeout), which
			// would lose them.
			waitCommitted(t, brokers, "out", 2000)
			if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
				t.Fatalf("Stop: %v", err)
			}
			key := snapshots.ManifestKey(job, newer)
			if task != "" {
				key = snapshotstest.StateHandle(t, store, key, task).GetKey()
			}
			original, err := store.Get(ctx, key)
			if err != nil {
				t.Fatal(err)
			}
			if err := store.Put(ctx, key, []byte("garbage, not an object")); err != nil {
				t.Fatal(err)
			}

			ev := newRPEvents()
			j2, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, testsrc.NewGate(n), 0), opts(ev)...)
			if err == nil {
				err = waitKafkaJob(t, j2)
				if err == nil {
					t.Fatal("the restart with a damaged newest checkpoint ended nil")
				}
			}
			t.Logf("refusal: %v", err)
			if !errors.Is(err, snapshots.ErrFallbackRefused) || !strings.Contains(err.Error(), key) {
				t.Fatalf("error %v, want one wrapping snapshots.ErrFallbackRefused naming %s", err, key)
			}
			for _, r := range ev.of(actors.EventRestoring) {
				if r.Checkpoint != newer {
					t.Fatalf("the refused restart restored checkpoint %d, want none but %d", r.Checkpoint, newer)
				}
			}
			wantOnce(t, rpCommitted(t, brokers, "out", "refused"), 2000) // what the two checkpoints committed, once

			if err := store.Put(ctx, key, original); err != nil {
				t.Fatal(err)
			}
			ev3 := newRPEvents()
			j3, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, testsrc.NewGate(n), 0), opts(ev3)...)
			if err != nil {
				t.Fatalf("Start once the object is back: %v", err)
			}
			if err := waitKafkaJob(t, j3); err != nil {
				t.Fatal(err)
			}
			if r := ev3.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != newer {
				t.Fatalf("the repaired job ran from %+v, want checkpoint %d", r, newer)
			}
			wantOnce(t, rpCommitted(t, brokers, "out", "final"), n)
		})
	}
}

// rpStore is a store whose next write of a key containing lose lands but
// reports an error, as when the answer is lost.
type rpStore struct {
	snapshots.Store
	mu   sync.Mutex
	lose string
}

var errRPLost = errors.New("rpStore: the answer was lost")

func (s *rpStore) take(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lose != "" && strings.Contains(key, s.lose) {
		s.lose = ""
		return true
	}
	return false
}

func (s *rpStore) Put(ctx context.Context, key string, data []byte) error {
	if err := s.Store.Put(ctx, key, data); err != nil {
		return err
	}
	if s.take(key) {
		return fmt.Errorf("put %s: %w", key, errRPLost)
	}
	return nil
}

// Create passes the wrapped store's create-only writes on
// (snapshots.Creator).
func (s *rpStore) Create(ctx context.Context, key string, data []byte) error {
	c, ok := s.Store.(snapshots.Creator)
	if !ok {
		return fmt.Errorf("create %s: the wrapped store cannot", key)
	}
	if err := c.Create(ctx, key, data); err != nil {
		return err
	}
	if s.take(key) {
		return fmt.Errorf("create %s: %w", key, errRPLost)
	}
	return nil
}

// TestReplayKafkaStopOriginAnswerLost: the Kafka sink's counterpart of
// the file sink's TestReplayStopOriginAnswerLost. A stop-with-savepoint
// after 0..1999 whose origin write lands but reports an error: the stop
// fails and the job goes on; the count then fails on record 2500, and the
// failover restores the checkpoint before the savepoint (0..999), whose
// Recover fences the savepoint's pre-committed transactions; the job is
// stopped plainly. A plain restart must then start and end with every
// record exactly once in the read_committed output.
func TestReplayKafkaStopOriginAnswerLost(t *testing.T) {
	ctx := context.Background()
	const n = 5000
	const job = "kafka-origin-lost"
	brokers := startKafka(t, "out")
	store := &rpStore{Store: snapshots.NewMem()}
	opts := func(ev *rpEvents) []actors.Option {
		return []actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithCheckpointInterval(0),
			actors.WithListener(ev.listen),
			actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, MaxFailures: 5, Window: time.Hour})}
	}
	ev := newRPEvents()
	gate := testsrc.NewGate(1000)
	j, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, gate, 2500), opts(ev)...)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	gate.WaitReached(t, 1000)
	if _, err := j.Checkpoint(ctx); err != nil {
		t.Fatal(err)
	}
	gate.SetLimit(2000)
	gate.WaitReached(t, 2000)
	store.mu.Lock()
	store.lose = snapshots.OriginKey(job)
	store.mu.Unlock()
	_, err = j.StopWithSavepoint(ctx, "first")
	o, oerr := j.Checkpoints().ReadOrigin(ctx)
	t.Logf("StopWithSavepoint: %v; the origin in the store: %v (%v)", err, o, oerr)
	if err == nil {
		if werr := waitKafkaJob(t, j); !errors.Is(werr, actors.ErrStopped) {
			t.Fatalf("Wait after a successful StopWithSavepoint: %v", werr)
		}
	} else {
		for len(ev.sub) > 0 { // only the events after the failed stop
			<-ev.sub
		}
		gate.SetLimit(3000) // record 2500 fails the count
		ev.await(t, actors.EventRestoring)
		ev.await(t, actors.EventRunning)
		if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
			t.Fatalf("Stop: %v", err)
		}
	}
	ev2 := newRPEvents()
	j2, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, testsrc.NewGate(n), 0), opts(ev2)...)
	if err != nil {
		t.Fatalf("plain restart: %v", err)
	}
	defer j2.Stop()
	if err := waitKafkaJob(t, j2); err != nil {
		t.Fatalf("plain restart: %v", err)
	}
	wantOnce(t, rpCommitted(t, brokers, "out", "final"), n)
}
