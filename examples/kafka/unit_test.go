package main

import (
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestOrderAndEffectRoundTrip(t *testing.T) {
	for id := range int64(100) {
		o := orderOf(id, 7)
		key, value := encodeOrder(o)
		got, err := decodeOrder(value)
		if err != nil || got != o || string(key) != strconv.FormatInt(o.Customer, 10) {
			t.Fatalf("order %+v: key %q value %q decoded to %+v, %v", o, key, value, got, err)
		}
		e := effect{ID: id, Customer: o.Customer, Count: id + 1, Total: 1_000_000 * id}
		_, value = encodeEffect(e)
		if got, err := decodeEffect(value); err != nil || got != e {
			t.Fatalf("effect %+v: %q decoded to %+v, %v", e, value, got, err)
		}
	}
}

func TestDecodeRefusesMalformed(t *testing.T) {
	for _, v := range []string{"", "1,2", "1,2,3,4", "1,,3", "a,2,3", "1,2,-3", "1,2,3,", ",1,2", "99999999999999999999,1,1"} {
		if _, err := decodeOrder([]byte(v)); !errors.Is(err, errMalformed) {
			t.Errorf("decodeOrder(%q): %v, want errMalformed", v, err)
		}
	}
}

// output returns the values the job must emit for records orders.
func output(records, customers int64) [][]byte {
	var out [][]byte
	for _, e := range expected(records, customers) {
		_, v := encodeEffect(e)
		out = append(out, v)
	}
	return out
}

func TestCheck(t *testing.T) {
	const records, customers = 500, 9
	good := output(records, customers)
	if r := check(good, records, customers); !r.ok() {
		t.Fatalf("the expected output fails: %s %v", r.summary(), r.details())
	}
	// Any order of the records is fine.
	rev := append([][]byte(nil), good...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if r := check(rev, records, customers); !r.ok() {
		t.Fatalf("the expected output, reversed, fails: %s", r.summary())
	}
	wrongTotal := func() [][]byte {
		out := append([][]byte(nil), good...)
		e, _ := decodeEffect(out[17])
		e.Total++
		_, out[17] = encodeEffect(e)
		return out
	}
	lastOf := func(c int64) int {
		for i := records - 1; i >= 0; i-- {
			if customerOf(int64(i), customers) == c {
				return int(i)
			}
		}
		return -1
	}
	for _, c := range []struct {
		name   string
		values [][]byte
		want   string
	}{
		{"a duplicate", append(append([][]byte(nil), good...), good[3]), "orders with more than one effect: 1, e.g. orders 3"},
		{"a loss", append(append([][]byte(nil), good[:5]...), good[6:]...), "orders without an effect: 1, e.g. orders 5"},
		{"a wrong running total", wrongTotal(), "effects with a wrong count or running total: 1, e.g. order 17"},
		{"a lost final effect", append(append([][]byte(nil), good[:lastOf(4)]...), good[lastOf(4)+1:]...), "customer 4: final total"},
		{"a malformed record", append(append([][]byte(nil), good...), []byte("x")), "malformed records: 1"},
		{"an order that does not exist", append(append([][]byte(nil), good...), []byte("500,1,1,1")), "effects of orders that do not exist: 1, e.g. orders 500"},
	} {
		r := check(c.values, records, customers)
		if r.ok() {
			t.Errorf("%s: check passed", c.name)
			continue
		}
		if d := strings.Join(r.details(), "\n"); !strings.Contains(d, c.want) {
			t.Errorf("%s: details\n%s\ndo not say %q", c.name, d, c.want)
		}
	}
}

func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-phase", "run"}, "-phase run needs -brokers"},
		{[]string{"-phase", "soon"}, `-phase "soon"`},
		{[]string{"-restart", "maybe"}, `-restart "maybe"`},
		{[]string{"-in", "x", "-out", "x"}, "two distinct topics"},
		{[]string{"-records", "0"}, "-records 0"},
		{[]string{"-records", "10", "-chunks", "11"}, "-chunks 11"},
		{[]string{"-interval", "0s"}, "-interval 0s"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseFlags(c.args, io.Discard)
		if !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want a usage error saying %s", c.args, err, c.want)
		}
	}
	o, err := parseFlags([]string{"-brokers", " a:1, b:2 ,", "-phase", "verify", "-seed", "9"}, io.Discard)
	if err != nil || strings.Join(o.brokers, "|") != "a:1|b:2" || o.seed != 9 {
		t.Errorf("parsed %+v, %v", o, err)
	}
}

func TestFaultPlan(t *testing.T) {
	var out int64
	f := planFaults(5, 4, 1000, func() int64 { return out }, func(string, ...any) {})
	if f.planned() != 4 || len(f.panics) != 3 || f.window == "" {
		t.Fatalf("plan %s: %d planned, want 4: 3 panics and a commit-window failure", f, f.planned())
	}
	g := planFaults(5, 4, 1000, func() int64 { return out }, func(string, ...any) {})
	if f.String() != g.String() {
		t.Errorf("the same seed planned %s and %s", f, g)
	}
	hooks := f.faults()
	panics := func(fn func()) (p bool) {
		defer func() { p = recover() != nil }()
		fn()
		return false
	}
	out = 1000 // past every threshold
	fired := 0
	for range 3 {
		for _, task := range faultTasks() {
			if panics(func() { hooks.Process(task) }) {
				fired++
			}
		}
	}
	if fired != 3 {
		t.Errorf("%d Process panics, want 3, each once", fired)
	}
	if !panics(func() { hooks.Complete(f.window, 9) }) {
		t.Errorf("no failure of %s in the commit window after it processed a batch", f.window)
	}
	if panics(func() { hooks.Complete("out#0", 10) }) || panics(func() { hooks.Complete("out#1", 10) }) {
		t.Error("a second commit-window failure")
	}
	if f.injected() != 4 || f.String() != "none" {
		t.Errorf("%d injected, %s left; want 4 and none", f.injected(), f)
	}
	if n := planFaults(5, 0, 1000, func() int64 { return 0 }, nil); n.planned() != 0 {
		t.Errorf("-faults 0 planned %d", n.planned())
	}
}
