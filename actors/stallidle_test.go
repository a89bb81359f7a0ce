package actors_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// The stall test's child process, its records and its idleness timeout.
const (
	stallEnv     = "SNAPFLOW_STALL_CHILD"
	stallRecords = 8000
	stallPace    = time.Millisecond // record i is due pace*i after the start, until "release"
	stallIdle    = 300 * time.Millisecond
	stallStalls  = 3
)

var stallBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func stallTime(i int64) time.Time { return stallBase.Add(time.Duration(i) * time.Millisecond) }

// pacedSplit is one split of the records 0..stallRecords-1, those of one
// parity, in timestamp order: record i is due stallPace*i after the start
// (or at once once released), and the split waits for it without spinning
// (topology.ErrSourceIdle, then a wake when it is due).
type pacedSplit struct {
	start    time.Time
	released *atomic.Bool
	next     int64
	wake     func()
	mu       sync.Mutex
	timer    *time.Timer
}

func (s *pacedSplit) SetWake(wake func()) { s.wake = wake }

func (s *pacedSplit) Open(_ context.Context, splits [][]byte) error {
	if len(splits) != 1 {
		return fmt.Errorf("%d splits, want 1", len(splits))
	}
	s.next = int64(binary.BigEndian.Uint64(splits[0]))
	return nil
}

func (s *pacedSplit) ReadSplit(buf []int64) (topology.SplitRead, error) {
	if s.next >= stallRecords {
		return topology.SplitRead{Done: true}, io.EOF
	}
	now, n := time.Now(), 0
	for n < len(buf) && s.next < stallRecords && (s.released.Load() || !s.start.Add(stallPace*time.Duration(s.next)).After(now)) {
		buf[n] = s.next
		s.next += 2
		n++
	}
	if n == 0 {
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
		}
		s.timer = time.AfterFunc(s.start.Add(stallPace*time.Duration(s.next)).Sub(now), s.wake)
		s.mu.Unlock()
		return topology.SplitRead{}, topology.ErrSourceIdle
	}
	return topology.SplitRead{N: n, Done: s.next >= stallRecords}, nil
}

func (s *pacedSplit) Read(buf []int64) (int, error) {
	r, err := s.ReadSplit(buf)
	return r.N, err
}

func (s *pacedSplit) Splits() [][]byte {
	return [][]byte{binary.BigEndian.AppendUint64(nil, uint64(s.next))}
}

func (s *pacedSplit) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	return nil
}

// TestStallHelperProcess is the child process of TestStallMakesNoRecordLate;
// without stallEnv it does nothing. It runs two source tasks, each reading
// one split of paced records in timestamp order (IdleTimeout stallIdle),
// into a keyed task that counts the records behind its watermark. It
// prints "running", "progress N" every 200 records, and at the end
// "late L of N". "release" on stdin makes every record due at once.
func TestStallHelperProcess(t *testing.T) {
	if os.Getenv(stallEnv) == "" {
		return
	}
	var released atomic.Bool
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "release" {
				released.Store(true)
			}
		}
	}()
	start := time.Now()
	var late, seen atomic.Int64
	g := topology.New("stall")
	src := topology.FromSplits(g, "paced", topology.Splits{Initial: func(int) [][]byte {
		return [][]byte{binary.BigEndian.AppendUint64(nil, 0), binary.BigEndian.AppendUint64(nil, 1)}
	}}, func(int, int) topology.SplitSource[int64] {
		return &pacedSplit{start: start, released: &released}
	}, topology.Parallelism(2), topology.WithWatermarks(topology.WatermarkStrategy[int64]{
		Timestamp:   stallTime,
		IdleTimeout: stallIdle,
	}))
	checked := topology.Process(topology.KeyBy(src, func(i int64) int64 { return i % 7 }), "check",
		func(*topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			return func(ctx *topology.Context[int64], i int64, out *topology.Collector[int64]) error {
				if wm, ok := ctx.Watermark(); ok && stallTime(i).Before(wm) {
					late.Add(1)
				}
				out.Emit(i)
				return nil
			}
		}, topology.Parallelism(2))
	topology.Sink(checked, "progress", func(int64) error {
		if n := seen.Add(1); n%200 == 0 {
			fmt.Printf("progress %d\n", n)
		}
		return nil
	})
	fmt.Println("running")
	if err := actors.Run(context.Background(), g, actors.WithStore(snapshots.NewMem())); err != nil {
		fmt.Printf("wait-error %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("late %d of %d\n", late.Load(), seen.Load())
	os.Exit(0)
}

// Two source tasks read splits in timestamp order, paced, with an
// idleness timeout; the whole process is stopped (SIGSTOP) for three times
// the timeout, three times. No record is late: a stall is not idleness,
// since a source is idle only after its read attempts have found nothing
// for the timeout.
func TestStallMakesNoRecordLate(t *testing.T) {
	p := startHelper(t, "stalled", "TestStallHelperProcess", []string{stallEnv + "=1"})
	at, _ := p.await(t, 0, "running", func(l string) bool { return l == "running" })
	for range stallStalls {
		at, _ = p.await(t, at+1, "progress", func(l string) bool { return strings.HasPrefix(l, "progress ") })
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		<-time.After(3 * stallIdle) // the stall itself, not a synchronisation
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	p.send(t, "release")
	_, end := p.await(t, at, "the end", func(l string) bool { return strings.HasPrefix(l, "late ") || strings.HasPrefix(l, "wait-error") })
	var lateN, n int64
	if _, err := fmt.Sscanf(end, "late %d of %d", &lateN, &n); err != nil {
		t.Fatalf("the child ended with %q", end)
	}
	if n != stallRecords {
		t.Fatalf("%d records reached the end, want %d", n, stallRecords)
	}
	if lateN != 0 {
		t.Fatalf("%d of %d records were late after %d stalls of %v (IdleTimeout %v)", lateN, n, stallStalls, 3*stallIdle, stallIdle)
	}
	if code := p.exit(t); code != 0 {
		t.Fatalf("the child exited with %d", code)
	}
}
