package actors_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// busyAndEmpty is a split source of two splits: split 0 holds the
// event-time test's clicks 0..n-1, click i due 100µs*i after start (the
// pace of its event time), and split 1 never has a record. The task waits
// for the next click without spinning (ErrSourceIdle, then a wake).
type busyAndEmpty struct {
	start time.Time
	n     int64
	next  int64
	wake  func()
	mu    sync.Mutex
	timer *time.Timer
}

func (s *busyAndEmpty) SetWake(wake func()) { s.wake = wake }

func (s *busyAndEmpty) Open(_ context.Context, splits [][]byte) error {
	if len(splits) != 2 {
		return fmt.Errorf("%d splits, want 2", len(splits))
	}
	s.next = int64(binary.BigEndian.Uint64(splits[0]))
	return nil
}

func (s *busyAndEmpty) due(i int64) time.Time {
	return s.start.Add(time.Duration(i) * 100 * time.Microsecond)
}

func (s *busyAndEmpty) ReadSplit(buf []click) (topology.SplitRead, error) {
	now, k := time.Now(), 0
	for k < len(buf) && s.next < s.n && !s.due(s.next).After(now) {
		buf[k] = click{User: s.next % etUsers, I: s.next}
		s.next++
		k++
	}
	if k > 0 {
		return topology.SplitRead{N: k, Split: 0}, nil
	}
	if s.next < s.n {
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
		}
		s.timer = time.AfterFunc(s.due(s.next).Sub(now), s.wake)
		s.mu.Unlock()
	}
	return topology.SplitRead{}, topology.ErrSourceIdle
}

func (s *busyAndEmpty) Read(buf []click) (int, error) {
	r, err := s.ReadSplit(buf)
	return r.N, err
}

func (s *busyAndEmpty) Splits() [][]byte {
	return [][]byte{binary.BigEndian.AppendUint64(nil, uint64(s.next)), {}}
}

func (s *busyAndEmpty) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}

// A source with an empty split, whose job fails every half IdleTimeout:
// the split's idleness outlives the restores (a checkpoint keeps how long
// it has been quiet), so event time moves and windows fire while the
// failures go on, long before the end of input. Without it, every restore
// held event time back for IdleTimeout again, and no window ever fired.
func TestIdleSplitSurvivesRestores(t *testing.T) {
	const (
		idle        = 400 * time.Millisecond
		maxFailures = 30
		n           = 1_000_000 // 100 s of clicks: the input never ends in the test
	)
	ref := map[windowKey]int64{}
	for i := range int64(200_000) {
		ref[windowKey{i % etUsers, etWindowEnd(etTime(i)).UnixNano()}]++
	}
	fired := make(chan struct{})
	var once sync.Once
	sink := newWindowSink(ref)
	sink.onWindow = func(windowCount) { once.Do(func() { close(fired) }) }
	start := time.Now()
	g := etJobFrom("idle-restores", func(g *topology.Graph) topology.Stream[click] {
		return topology.FromSplits(g, "clicks", topology.Splits{Initial: func(int) [][]byte {
			return [][]byte{binary.BigEndian.AppendUint64(nil, 0), {}}
		}}, func(int, int) topology.SplitSource[click] {
			return &busyAndEmpty{start: start, n: n}
		}, topology.WithWatermarks(topology.WatermarkStrategy[click]{
			Timestamp:      func(c click) time.Time { return etTime(c.I) },
			OutOfOrderness: 10 * time.Millisecond,
			IdleTimeout:    idle,
		}))
	}, sink.bad, sink.out)

	var failures atomic.Int64
	var mu sync.Mutex
	var began time.Time // the first batch of count#0's incarnation
	faults := &actorstest.Faults{Process: func(task string) {
		if task != "count#0" || failures.Load() >= maxFailures {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if began.IsZero() {
			began = time.Now()
			return
		}
		if time.Since(began) >= idle/2 {
			began = time.Time{}
			failures.Add(1)
			panic("injected failure")
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	job, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), actors.WithCheckpointInterval(20*time.Millisecond),
		actors.WithLogger(testLogger(t)), actorstest.WithFaults(faults),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 10 * maxFailures, Window: time.Hour}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-fired:
	case <-ctx.Done():
		t.Fatal("no window fired")
	}
	f := failures.Load()
	stopJob(t, job)
	if f >= maxFailures {
		t.Fatalf("the first window fired only after the %d failures, when they stopped", f)
	}
	if f < 1 { // a window before any failure: the test says nothing of restores
		t.Fatal("the first window fired before the first failure")
	}
	sink.check(t, false)
	t.Logf("the first window fired after %d failures, %v after the start", f, time.Since(start).Round(time.Millisecond))
}
