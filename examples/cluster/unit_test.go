package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/topology"
)

// TestExpected checks the closed form against the records counted one by
// one, for counts that do and do not divide evenly.
func TestExpected(t *testing.T) {
	for _, tc := range []struct{ records, keys int64 }{{1, 1}, {10, 3}, {7, 10}, {6000, 200}, {999, 7}} {
		counts, sums := map[int64]int64{}, map[int64]int64{}
		for i := range tc.records {
			counts[i%tc.keys]++
			sums[i%tc.keys] += i + 1
		}
		for k := range tc.keys {
			c, s := expected(tc.records, tc.keys, k)
			if c != counts[k] || s != sums[k] {
				t.Errorf("records %d keys %d key %d: closed form count %d sum %d, counted %d %d", tc.records, tc.keys, k, c, s, counts[k], sums[k])
			}
		}
		if problems := compare(jobParams{records: tc.records, keys: tc.keys}, counts, sums); len(problems) > 0 {
			t.Errorf("compare refuses the counted values: %v", problems)
		}
	}
}

// TestCompareReports: a lost, a duplicated and a foreign key are reported.
func TestCompareReports(t *testing.T) {
	p := jobParams{records: 100, keys: 10}
	counts, sums := map[int64]int64{}, map[int64]int64{}
	for k := range p.keys {
		counts[k], sums[k] = expected(p.records, p.keys, k)
	}
	counts[3]--    // a lost update
	sums[4] += 5   // a duplicated one
	counts[12] = 1 // a key that does not exist
	problems := compare(p, counts, sums)
	text := errors.Join(problems...).Error()
	for _, want := range []string{"key 3: count 9", "key 4: count 10 sum", "key 12 is not one of the 10 keys"} {
		if !strings.Contains(text, want) {
			t.Errorf("compare's report %q lacks %q", text, want)
		}
	}
}

// TestEventLines: every field of an event line survives formatting and
// parsing, quotes and spaces included.
func TestEventLines(t *testing.T) {
	e := actors.Event{Kind: actors.EventNodeLost, Epoch: 3, Node: "w-1@127.0.0.1:4000",
		Err: errors.New(`lost: "no heartbeat" for 1s = too long`)}
	ev, ok, err := parseEvent(formatEvent(e))
	if err != nil || !ok {
		t.Fatalf("parse %q: %v %v", formatEvent(e), ok, err)
	}
	want := eventLine{kind: "node-lost", fields: map[string]string{"epoch": "3", "node": e.Node, "err": e.Err.Error()}}
	if !reflect.DeepEqual(ev, want) {
		t.Errorf("parsed %+v, want %+v", ev, want)
	}
	line := formatEvent(actors.Event{Kind: actors.EventCheckpointCompleted, Epoch: 2, Checkpoint: 17, Final: true, Bytes: 99, Duration: 1500 * time.Microsecond})
	if line != "event checkpoint-completed epoch=2 checkpoint=17 final=true bytes=99 duration=1.5ms" {
		t.Errorf("line %q", line)
	}
	if _, ok, _ := parseEvent("listening 127.0.0.1:1"); ok {
		t.Error("a listening line parsed as an event")
	}
	if _, _, err := parseEvent(`event placed epoch=1 placement="unterminated`); err == nil {
		t.Error("an unterminated quote parsed")
	}
}

// TestParsePlacement reads the runtime's placement strings.
func TestParsePlacement(t *testing.T) {
	p, err := parsePlacement("source#0,sum#1 -> w-a@127.0.0.1:1; sum#0 -> w-b@127.0.0.1:2")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.tasksOn("127.0.0.1:1"); !reflect.DeepEqual(got, []string{"source#0", "sum#1"}) {
		t.Errorf("tasks on :1: %v", got)
	}
	if !crossesNodes(p) {
		t.Error("a source and a sum on different workers: the edge crosses nodes")
	}
	if one, _ := parsePlacement("source#0,sum#0 -> w-a@127.0.0.1:1"); crossesNodes(one) {
		t.Error("one worker: nothing crosses nodes")
	}
	if _, err := parsePlacement("source#0"); err == nil {
		t.Error("a placement without a worker parsed")
	}
}

// readAll reads s to its end, idle or not, and returns what it emitted.
func readAll(t *testing.T, s *pacedSource, stopAtIdle bool) []record {
	t.Helper()
	var out []record
	buf := make([]record, 7)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		switch {
		case errors.Is(err, io.EOF):
			return out
		case errors.Is(err, topology.ErrSourceIdle):
			if stopAtIdle {
				return out
			}
		case err != nil:
			t.Fatal(err)
		}
	}
}

// TestPacedSourceHold: a held source stops halfway and goes on once the
// hold file exists; what it emits, and from which offset, does not depend
// on the hold. Its wake function is called while it is held.
func TestPacedSourceHold(t *testing.T) {
	hold := filepath.Join(t.TempDir(), "release")
	p := jobParams{records: 101, keys: 7, hold: hold, holdPoll: time.Millisecond}
	woken := make(chan struct{}, 1)
	s := newPacedSource(p, "", 1, 2)
	s.SetWake(func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := readAll(t, s, true)
	if len(first) != 25 { // 50 records for subtask 1 of 2; half of them
		t.Fatalf("held source emitted %d records, want 25", len(first))
	}
	<-woken
	off := s.Offset()
	if err := os.WriteFile(hold, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	rest := readAll(t, s, false)
	all := append(first, rest...)
	if len(all) != 50 {
		t.Fatalf("emitted %d records, want 50", len(all))
	}
	for j, r := range all {
		i := int64(1 + 2*j)
		if r.Key != i%7 || r.Value != i+1 {
			t.Fatalf("record %d is %+v, want key %d value %d", j, r, i%7, i+1)
		}
	}
	replay := newPacedSource(p, "", 1, 2)
	if err := replay.Open(t.Context(), off); err != nil {
		t.Fatal(err)
	}
	defer replay.Close()
	if again := readAll(t, replay, false); !reflect.DeepEqual(again, rest) {
		t.Errorf("replayed from offset %x: %d records, differing from the first run's %d", off, len(again), len(rest))
	}
}

// TestPacedSourceRate: a paced source never emits more than its rate allows
// (one record at once, then perSec a second), returns idle meanwhile, and
// calls wake when the next record is due.
func TestPacedSourceRate(t *testing.T) {
	p := jobParams{records: 1000, keys: 3, rate: 40} // 20 records/s per task
	woken := make(chan struct{}, 1)
	s := newPacedSource(p, "", 0, 2)
	s.SetWake(func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	start := time.Now()
	if err := s.Open(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	buf := make([]record, 100)
	total, idle := 0, 0
	for total < 5 {
		n, err := s.Read(buf)
		total += n
		if allowed := 1 + time.Since(start).Seconds()*20; float64(total) > allowed {
			t.Fatalf("%d records emitted within %v at 20 records/s", total, time.Since(start))
		}
		switch {
		case errors.Is(err, topology.ErrSourceIdle):
			idle++
			<-woken
		case err != nil:
			t.Fatal(err)
		}
	}
	if idle == 0 {
		t.Error("the paced source never returned idle")
	}
}
