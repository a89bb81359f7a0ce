package kafka_test

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/snapshots/snapshotstest"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/kafka"
)

// gatedKafkaJob is a gated source of 0..n-1 (one task: the gate says
// exactly which records precede a barrier), a keyed count per v%11 (two
// tasks, whose state the test damages) and the Kafka sink "out" (two
// tasks). The count panics once on record failAt (0: never).
func gatedKafkaJob(name string, n int64, brokers []string, gate *testsrc.Gate, failAt int64) *topology.Graph {
	g := topology.New(name)
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i }, gate, topology.Parallelism(1))
	var failed atomic.Bool
	keyed := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 11 }), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			c := topology.Value[int64](ks, "n")
			return func(_ *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				if failAt != 0 && v == failAt && failed.CompareAndSwap(false, true) {
					panic("injected: the count fails once on record " + strconv.FormatInt(v, 10))
				}
				x, _ := c.Get()
				c.Set(x + 1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(2))
	kafka.Sink(keyed, "out", kafka.SinkConfig{Brokers: brokers, Topic: "out", TransactionalIDPrefix: name},
		func(v int64) ([]byte, []byte) { return nil, binary.BigEndian.AppendUint64(nil, uint64(v)) },
		topology.Parallelism(2))
	return g
}

// damageState damages the state object of task in checkpoint id: the
// whole object replaced by garbage, or (keyGroup) one byte of one key
// group, which leaves the heads intact. It returns the key and the bytes
// before.
func damageState(t *testing.T, store snapshots.Store, job string, id uint64, task string, keyGroup bool) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	h := snapshotstest.StateHandle(t, store, snapshots.ManifestKey(job, id), task)
	original, err := store.Get(ctx, h.GetKey())
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("garbage, not a state")
	if keyGroup {
		if len(h.GetKeyGroups()) == 0 {
			t.Fatalf("checkpoint %d holds no key groups for %s", id, task)
		}
		data = append([]byte(nil), original...)
		sec := h.GetKeyGroups()[len(h.GetKeyGroups())/2]
		data[sec.GetOffset()+sec.GetLength()-1] ^= 0xff
	}
	if err := store.Put(ctx, h.GetKey(), data); err != nil {
		t.Fatal(err)
	}
	return h.GetKey(), original
}

// kafkaEvents records a job's events.
type kafkaEvents struct {
	mu  sync.Mutex
	all []actors.Event
}

func (e *kafkaEvents) listen(ev actors.Event) { e.mu.Lock(); e.all = append(e.all, ev); e.mu.Unlock() }

func (e *kafkaEvents) of(k actors.EventKind) []actors.Event {
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

func waitKafkaJob(t *testing.T, j *actors.Job) error {
	t.Helper()
	select {
	case <-j.Done():
		return j.Wait()
	case <-time.After(2 * time.Minute):
		t.Fatal("job did not end in time")
		return nil
	}
}

// TestKafkaSinkDamagedNewestCheckpointRefused: a job with the Kafka sink
// takes two checkpoints (after records 0..999 and 0..1999), whose
// completions commit their transactions. Then a state object of the newest
// checkpoint is damaged: after a stop (Start must refuse), or while the
// job runs (the failover must refuse, and the job fail). Falling back to
// the older checkpoint would commit 1000..1999 again: the error must wrap
// ErrFallbackRefused and name the damaged object and the sink, and no
// older checkpoint may be restored. Once the object is put back, the job
// resumes from the newest checkpoint, and a read_committed consumer sees
// every record exactly once.
func TestKafkaSinkDamagedNewestCheckpointRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		keyGroup bool // the heads intact: the damage shows at the tasks' restore
		failover bool // damaged while the job runs, then a task fails
	}{
		{name: "start, garbage object"},
		{name: "start, one key group", keyGroup: true},
		{name: "failover, garbage object", failover: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const n = 5000
			const job = "kafka-refused"
			ctx := context.Background()
			brokers := startKafka(t, "out")
			store, err := snapshots.NewDir(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			opts := func(ev *kafkaEvents) []actors.Option {
				return []actors.Option{actors.WithStore(store), actors.WithInlineStateLimit(0), actors.WithCheckpointInterval(0),
					actors.WithListener(ev.listen)}
			}
			var failAt int64
			if tc.failover {
				failAt = 2500
			}
			gate := testsrc.NewGate(1000)
			var ev kafkaEvents
			j, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, gate, failAt), opts(&ev)...)
			if err != nil {
				t.Fatal(err)
			}
			var older, newer uint64
			for i, limit := range []int64{1000, 2000} {
				gate.SetLimit(limit)
				gate.WaitReached(t, limit)
				id, err := j.Checkpoint(ctx)
				if err != nil {
					t.Fatalf("checkpoint after %d: %v", limit, err)
				}
				if i == 0 {
					older = id
				} else {
					newer = id
				}
			}

			var key string
			var original []byte
			evRefused := &ev
			if tc.failover {
				key, original = damageState(t, store, job, newer, "count#1", tc.keyGroup)
				gate.SetLimit(n) // record 2500 fails the count once
				err = waitKafkaJob(t, j)
			} else {
				if err := j.Stop(); !errors.Is(err, actors.ErrStopped) {
					t.Fatalf("Stop: %v", err)
				}
				key, original = damageState(t, store, job, newer, "count#1", tc.keyGroup)
				evRefused = &kafkaEvents{}
				var j2 *actors.Job
				j2, err = actors.Start(ctx, gatedKafkaJob(job, n, brokers, testsrc.NewGate(n), 0), opts(evRefused)...)
				switch {
				case err == nil && !tc.keyGroup:
					_ = j2.Stop()
					t.Fatal("Start succeeded with the newest checkpoint's state object replaced by garbage")
				case err == nil:
					err = waitKafkaJob(t, j2)
				}
			}
			t.Logf("refusal: %v", err)
			if err == nil || !errors.Is(err, snapshots.ErrFallbackRefused) {
				t.Fatalf("error %v, want one wrapping snapshots.ErrFallbackRefused", err)
			}
			for _, want := range []string{key, `"out"`, "WithStartOver"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not name %s: %v", want, err)
				}
			}
			for _, r := range evRefused.of(actors.EventRestoring) {
				if r.Checkpoint != newer {
					t.Fatalf("the job restored checkpoint %d (the older is %d); it must restore none but the newest, %d", r.Checkpoint, older, newer)
				}
			}
			want := 0 // after the refusal, no checkpoint completes
			if tc.failover {
				want = 2 // the two the test took
			}
			if c := len(evRefused.of(actors.EventCheckpointCompleted)); c != want {
				t.Fatalf("%d checkpoints completed, want %d", c, want)
			}

			// Put the object back, as the error advises: the job resumes
			// from the newest checkpoint and ends exactly once.
			if err := store.Put(ctx, key, original); err != nil {
				t.Fatal(err)
			}
			var ev3 kafkaEvents
			j3, err := actors.Start(ctx, gatedKafkaJob(job, n, brokers, testsrc.NewGate(n), 0), opts(&ev3)...)
			if err != nil {
				t.Fatalf("Start once the damaged object is back: %v", err)
			}
			if err := waitKafkaJob(t, j3); err != nil {
				t.Fatal(err)
			}
			if r := ev3.of(actors.EventRunning); len(r) == 0 || r[0].Checkpoint != newer {
				t.Fatalf("the repaired job ran from %+v, want checkpoint %d", r, newer)
			}
			wantOnce(t, committed(t, brokers, "out"), n)
		})
	}
}
