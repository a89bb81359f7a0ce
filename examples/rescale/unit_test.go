package main

import (
	"errors"
	"io"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/topology"
)

// TestClosedForm checks want against a plain count over every order.
func TestClosedForm(t *testing.T) {
	for _, s := range []shape{{2, 1}, {3, 2}, {17, 5}, {100, 7}, {101, 100}, {10, 64}, {1000, 3}} {
		got := s.want()
		brute := map[int64]customerTotals{}
		add := func(o order) {
			c := brute[o.Customer]
			brute[o.Customer] = customerTotals{orders: c.orders + 1, amount: c.amount + o.Amount}
		}
		for i := range s.webCount() {
			add(s.webOrder(i))
		}
		for i := range s.shopCount() {
			add(s.shopOrder(i))
		}
		if d := diff(got, brute); d != nil {
			t.Errorf("shape %+v: the closed form differs from a count: %v", s, d)
		}
	}
}

// TestSplitsDivide: the splits of a source, divided as a rescale to more
// tasks divides them, still cover every index exactly once, and their
// produced counts still add up.
func TestSplitsDivide(t *testing.T) {
	const count = 1000
	sp := orderSplits(count)
	splits := sp.Initial(2)
	// Produce a few orders from the first split, as a task would.
	s0, err := decodeSplit(splits[0])
	if err != nil {
		t.Fatal(err)
	}
	s0.next, s0.emitted = s0.next+10*s0.step, 10
	splits[0] = s0.encode()
	for len(splits) < 7 {
		n := len(splits)
		for i := 0; i < n; i++ {
			a, b, ok := sp.Divide(splits[i])
			if !ok {
				t.Fatalf("split %d not divided", i)
			}
			splits[i] = a
			splits = append(splits, b)
		}
	}
	seen := map[int64]int{}
	var emitted int64
	for _, b := range splits {
		s, err := decodeSplit(b)
		if err != nil {
			t.Fatal(err)
		}
		emitted += s.emitted
		for i := s.next; i < count; i += s.step {
			seen[i]++
		}
	}
	if emitted != 10 {
		t.Errorf("the divided splits count %d produced orders, want 10", emitted)
	}
	for i := int64(0); i < count; i++ {
		want := 1
		if i%2 == 0 && i < 20 {
			want = 0 // produced before the division
		}
		if seen[i] != want {
			t.Fatalf("index %d is left in %d splits, want %d", i, seen[i], want)
		}
	}
	if _, _, ok := sp.Divide(split{next: count - 1, step: 1}.encode()); ok {
		t.Error("a split with one order left was divided")
	}
}

// TestSourceStopsAtTheGate: an order source produces nothing at or beyond
// the gate's limit, reports where it went idle, and ends once its splits
// are exhausted.
func TestSourceStopsAtTheGate(t *testing.T) {
	s := shape{records: 20, keys: 3}
	gt := newGate()
	woken := 0
	src := &orderSource{task: "web#0", count: s.webCount(), gen: s.webOrder, gate: gt}
	src.SetWake(func() { woken++ })
	if err := src.Open(t.Context(), orderSplits(s.webCount()).Initial(1)); err != nil {
		t.Fatal(err)
	}
	buf := make([]order, 4)
	var got []int64
	read := func() error {
		n, err := src.Read(buf)
		for _, o := range buf[:n] {
			got = append(got, o.Amount-1)
		}
		return err
	}
	if err := read(); !errors.Is(err, topology.ErrSourceIdle) {
		t.Fatalf("a closed gate: Read = %v, want idle", err)
	}
	gt.raise(6)
	if woken != 1 {
		t.Fatalf("raise woke the source %d times, want 1", woken)
	}
	for read() == nil {
	}
	if want := []int64{0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("below limit 6 the source produced %v, want %v", got, want)
	}
	if r := gt.tasks["web#0"]; r.idleAt != 6 || r.emitted != 6 {
		t.Fatalf("report %+v, want idle at 6 with 6 produced", r)
	}
	gt.raise(1 << 40)
	var err error
	for err = read(); err == nil; err = read() {
	}
	if err != io.EOF || len(got) != int(s.webCount()) {
		t.Fatalf("after the limit rose: %d orders and %v, want %d and EOF", len(got), err, s.webCount())
	}
}

// TestFlags checks the defaults and what the flags refuse.
func TestFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	if err != nil || !slices.Equal(o.phases, []int{2, 3, 1}) || o.store != "" || o.savepoint != "" {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	if _, err := parseFlags([]string{"-h"}, io.Discard); exitCode(err, io.Discard) != 0 {
		t.Errorf("-h: %v, want exit 0", err)
	}
	for _, args := range [][]string{
		{"-phases", ""}, {"-phases", "1,,2"}, {"-phases", "-1"}, {"-keys", "0"}, {"-interval", "-1s"},
		{"-hold-checkpoint"}, {"-savepoint", "x", "-stop-with", "x"}, {"-stop-with", ".tmp-x"}, {"extra"},
	} {
		if _, err := parseFlags(args, io.Discard); !errors.Is(err, errUsage) || exitCode(err, io.Discard) != 2 {
			t.Errorf("%q: %v, want a usage error (exit 2)", args, err)
		}
	}
}

// TestRunAgainOnOneStore runs the example twice in this process on one
// memory store: the second run is refused as finished unless -start-over,
// and then numbers its savepoints above the first run's.
func TestRunAgainOnOneStore(t *testing.T) {
	store := "mem://" + t.Name()
	args := []string{"-store", store, "-records", "2000", "-keys", "10", "-phases", "1,2"}
	var out strings.Builder
	if err := run(t.Context(), args, &out, io.Discard); err != nil {
		t.Fatalf("first run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), `stopped with savepoint "sp-1"`) {
		t.Fatalf("first run:\n%s", out.String())
	}
	out.Reset()
	if err := run(t.Context(), args, &out, io.Discard); err == nil || !strings.Contains(err.Error(), "-start-over") {
		t.Fatalf("second run without -start-over: %v, want a refusal naming -start-over", err)
	}
	out.Reset()
	if err := run(t.Context(), append(args, "-start-over"), &out, io.Discard); err != nil {
		t.Fatalf("second run: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`(?m)^phase 1: parallelism 1, from the beginning at 0 orders; stopped with savepoint "sp-2"`).MatchString(out.String()) ||
		!strings.Contains(out.String(), "exactly-once: OK") {
		t.Fatalf("second run:\n%s", out.String())
	}
}
