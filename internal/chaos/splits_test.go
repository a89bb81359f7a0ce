package chaos

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/snapflow/snapflow/topology"
)

// openKeyed opens a keyedSplits task over keys at the given next seqs.
func openKeyed(t *testing.T, perKey int64, rate float64, gate *Gate, next map[int64]int64) *keyedSplits {
	t.Helper()
	s := &keyedSplits{perKey: perKey, limit: gate.limit(perKey), rate: rate, gate: gate}
	var splits [][]byte
	for k := range int64(len(next)) {
		splits = append(splits, encodeKeySplit(k, next[k]))
	}
	if err := s.Open(context.Background(), splits); err != nil {
		t.Fatal(err)
	}
	return s
}

// drain reads s until it returns an error, and returns the events by key
// and that error.
func drain(t *testing.T, s *keyedSplits) (map[int64][]int64, error) {
	t.Helper()
	got := map[int64][]int64{}
	buf := make([]Event, 3)
	for range 1000 {
		n, err := s.Read(buf)
		for _, e := range buf[:n] {
			got[e.Key] = append(got[e.Key], e.Seq)
		}
		if err != nil {
			return got, err
		}
	}
	t.Fatal("the source never stopped")
	return nil, nil
}

func reached(g *Gate) bool {
	select {
	case <-g.Reached():
		return true
	default:
		return false
	}
}

// TestKeyedSplitsGate: a task emits each key's seqs in order up to the
// gate, then is idle; the gate is reached once every registered key got
// there, and the splits hold the next seqs.
func TestKeyedSplitsGate(t *testing.T) {
	gate := NewGate(1, 2)
	gate.register(0, 4, 10)
	s := openKeyed(t, 10, 0, gate, map[int64]int64{0: 1, 1: 1, 2: 4, 3: 6})
	got, err := drain(t, s)
	if !errors.Is(err, topology.ErrSourceIdle) {
		t.Fatalf("at the gate: %v, want ErrSourceIdle", err)
	}
	want := map[int64][]int64{0: {1, 2, 3, 4, 5}, 1: {1, 2, 3, 4, 5}, 2: {4, 5}}
	for k := range int64(4) {
		if len(got[k]) != len(want[k]) {
			t.Fatalf("key %d: %v, want %v", k, got[k], want[k])
		}
		for i := range got[k] {
			if got[k][i] != want[k][i] {
				t.Fatalf("key %d: %v, want %v", k, got[k], want[k])
			}
		}
	}
	if !reached(gate) {
		t.Fatal("the gate is not reached")
	}
	for i, b := range s.Splits() {
		key, next, err := DecodeKeySplit(b)
		if err != nil || key != int64(i) || next != 6 {
			t.Fatalf("split %d: key %d next %d (%v)", i, key, next, err)
		}
	}
}

// TestKeyedSplitsGateWaitsForEveryKey: a key still below the gate keeps
// the gate closed.
func TestKeyedSplitsGateWaitsForEveryKey(t *testing.T) {
	gate := NewGate(1, 2)
	gate.register(0, 2, 10)
	gate.register(100, 1, 10) // a key no task of this test reads
	s := openKeyed(t, 10, 0, gate, map[int64]int64{0: 1, 1: 6})
	if _, err := drain(t, s); !errors.Is(err, topology.ErrSourceIdle) {
		t.Fatal(err)
	}
	if reached(gate) {
		t.Fatal("the gate is reached, but key 100 was never produced")
	}
	gate.reach(100)
	if !reached(gate) {
		t.Fatal("the gate is not reached")
	}
}

// TestKeyedSplitsEnd: without a gate a task emits every record and ends;
// a task without splits ends at once.
func TestKeyedSplitsEnd(t *testing.T) {
	s := openKeyed(t, 3, 0, nil, map[int64]int64{0: 1, 1: 3})
	got, err := drain(t, s)
	if !errors.Is(err, io.EOF) || len(got[0]) != 3 || len(got[1]) != 1 || got[1][0] != 3 {
		t.Fatalf("got %v, %v; want key 0: 1..3, key 1: 3, then EOF", got, err)
	}
	empty := openKeyed(t, 3, 0, nil, nil)
	if n, err := empty.Read(make([]Event, 4)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("no splits: %d, %v; want 0, EOF", n, err)
	}
}

// TestKeyedSplitsRate: a rated task emits what its rate allows, goes idle
// and has itself woken.
func TestKeyedSplitsRate(t *testing.T) {
	s := openKeyed(t, 1000, 0.001, nil, map[int64]int64{0: 1, 1: 1})
	woken := make(chan struct{}, 1)
	s.SetWake(func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	defer s.Close()
	n, err := s.Read(make([]Event, 8))
	if n != 1 || !errors.Is(err, topology.ErrSourceIdle) {
		t.Fatalf("first read: %d, %v; want the 1 record the rate allows, then ErrSourceIdle", n, err)
	}
	select {
	case <-woken:
	case <-time.After(time.Minute):
		t.Fatal("the idle source was never woken")
	}
}

// TestDecodeKeySplit refuses splits that are not a key and a seq from 1.
func TestDecodeKeySplit(t *testing.T) {
	if _, _, err := DecodeKeySplit(make([]byte, 15)); err == nil {
		t.Error("a 15-byte split decoded")
	}
	if _, _, err := DecodeKeySplit(encodeKeySplit(3, 0)); err == nil {
		t.Error("a split at seq 0 decoded")
	}
	if k, n, err := DecodeKeySplit(encodeKeySplit(-7, 9)); err != nil || k != -7 || n != 9 {
		t.Errorf("decode(-7, 9) = %d, %d, %v", k, n, err)
	}
}

// TestPhasesFromSeed: four phases from 1 to MaxPhaseParallelism, each
// different from the one before, the same for the same seed.
func TestPhasesFromSeed(t *testing.T) {
	seen := map[int]bool{}
	for seed := range uint64(200) {
		ps := PhasesFromSeed(seed)
		if len(ps) != 4 {
			t.Fatalf("seed %d: %v", seed, ps)
		}
		for i, p := range ps {
			seen[p] = true
			if p < 1 || p > MaxPhaseParallelism || (i > 0 && p == ps[i-1]) {
				t.Fatalf("seed %d: %v", seed, ps)
			}
		}
		if again := PhasesFromSeed(seed); again[0] != ps[0] || again[3] != ps[3] {
			t.Fatalf("seed %d: %v, then %v", seed, ps, again)
		}
	}
	if len(seen) != MaxPhaseParallelism {
		t.Fatalf("parallelisms seen: %v", seen)
	}
}
