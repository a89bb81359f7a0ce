package dataflow

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// ttlCmd is a record of the TTL tests: set the key's value and its map
// entry "x", or read them.
type ttlCmd struct {
	Key string
	Set bool
	N   int64
}

// ttlRead is what a read saw.
type ttlRead struct {
	Key      string
	V        int64
	HasV     bool
	X        int64
	HasX     bool
	Len, All int
}

// ttlJob keeps, per key, a value and a map with a time-to-live of 10s
// (none when ttl is 0), on the clock *now.
type ttlJob struct {
	now   int64
	ttl   time.Duration
	reads []ttlRead
	v     []*ValueState[string, int64]
	m     []*MapState[string, string, int64]
}

func (j *ttlJob) plan(t *testing.T) *Plan {
	g := New("ttl")
	k := KeyBy(FromSlice(g, "src", []ttlCmd{}), func(c ttlCmd) string { return c.Key })
	Sink(Process(k, "p", func(s *KeyedSetup[string]) ProcessFunc[string, ttlCmd, string] {
		s.clock = func() int64 { return j.now }
		v, m := Value[int64](s, "v"), MapOf[string, int64](s, "m")
		if j.ttl > 0 {
			v, m = v.WithTTL(j.ttl), m.WithTTL(j.ttl)
		}
		j.v, j.m = append(j.v, v), append(j.m, m)
		return func(ctx *Context[string], c ttlCmd, _ *Collector[string]) error {
			if c.Set {
				v.Set(c.N)
				m.Put("x", c.N)
				return nil
			}
			r := ttlRead{Key: c.Key, Len: m.Len()}
			r.V, r.HasV = v.Get()
			r.X, r.HasX = m.Get("x")
			for range m.All {
				r.All++
			}
			j.reads = append(j.reads, r)
			return nil
		}
	}), "sink", discard[string])
	return mustPlan(t, g)
}

// at runs cmds at time sec (seconds) and returns what the reads saw.
func (j *ttlJob) at(t *testing.T, inst Instance, sec float64, cmds ...ttlCmd) []ttlRead {
	t.Helper()
	j.now, j.reads = int64(sec*float64(time.Second)), nil
	if err := inst.ProcessBatch(0, cmds, nil); err != nil {
		t.Fatal(err)
	}
	return j.reads
}

func set(key string, n int64) ttlCmd { return ttlCmd{Key: key, Set: true, N: n} }
func get(key string) ttlCmd          { return ttlCmd{Key: key} }

// live is a read that found n in both states.
func live(key string, n int64) ttlRead {
	return ttlRead{Key: key, V: n, HasV: true, X: n, HasX: true, Len: 1, All: 1}
}

func gone(key string) ttlRead { return ttlRead{Key: key} }

// TestStateTTL: on both backends, an entry expires ttl after its last
// write and is never returned after; a rewrite renews it; a snapshot
// leaves expired entries out and keeps the write times, so that restored
// entries expire when they would have; a restore drops entries expired
// by then; entries from a checkpoint without a time-to-live count as
// written at the restore, and a state without one keeps the entries live
// at the restore.
func TestStateTTL(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "heap", true: "disk"}[disk], func(t *testing.T) {
			if disk {
				onDisk(t)
			}
			j := &ttlJob{ttl: 10 * time.Second}
			p := j.plan(t)
			inst := mustInstance(t, p, "p#0", 8, noopSender{})
			check := func(got []ttlRead, want ...ttlRead) {
				t.Helper()
				if !slices.Equal(got, want) {
					t.Fatalf("reads %+v, want %+v", got, want)
				}
			}
			j.at(t, inst, 0, set("a", 1), set("b", 2), set("c", 3))
			check(j.at(t, inst, 5, set("b", 20), get("a")), live("a", 1)) // b is renewed at 5s
			check(j.at(t, inst, 9.999, get("a"), get("b")), live("a", 1), live("b", 20))
			check(j.at(t, inst, 10, get("a"), get("b")), gone("a"), live("b", 20))
			// c expired unread: a snapshot at 12s leaves it out.
			j.now = 12 * int64(time.Second)
			st := snapshot(t, inst)
			for _, g := range st.GetKeyGroups() {
				for _, ns := range g.GetStates() {
					for _, e := range ns.GetEntries() {
						if string(e.GetKey()) != "b" || e.GetWrittenAt() != 5*int64(time.Second) {
							t.Fatalf("state %s holds key %q written at %d; want only b, written at 5s", ns.GetName(), e.GetKey(), e.GetWrittenAt())
						}
					}
				}
			}
			// Restored at 14s, b lives until 15s.
			j.now = 14 * int64(time.Second)
			restored := mustInstance(t, p, "p#0", 8, noopSender{})
			if err := restored.Restore(st); err != nil {
				t.Fatal(err)
			}
			check(j.at(t, restored, 14.5, get("b")), live("b", 20))
			check(j.at(t, restored, 15, get("b")), gone("b"))
			// Restored at 15s, nothing is left.
			j.now = 15 * int64(time.Second)
			late := mustInstance(t, p, "p#0", 8, noopSender{})
			if err := late.Restore(st); err != nil {
				t.Fatal(err)
			}
			if n := len(valuesOf(j.v[len(j.v)-1])) + len(mapsOf(j.m[len(j.m)-1])); n != 0 {
				t.Fatalf("a restore at 15s loaded %d expired entries", n)
			}
			// A checkpoint without a time-to-live: its entries count as
			// written at the restore, at 100s.
			plain := &ttlJob{}
			pp := plain.plan(t)
			pinst := mustInstance(t, pp, "p#0", 8, noopSender{})
			plain.at(t, pinst, 0, set("a", 1))
			pst := snapshot(t, pinst)
			j.now = 100 * int64(time.Second)
			again := mustInstance(t, p, "p#0", 8, noopSender{})
			if err := again.Restore(pst); err != nil {
				t.Fatal(err)
			}
			check(j.at(t, again, 109, get("a")), live("a", 1))
			check(j.at(t, again, 110, get("a")), gone("a"))
			// And the other way: a state without one keeps every entry
			// that had not expired by the restore (b, restored at 14s,
			// for good), and loads none that had (b, restored at 15s).
			plain.now = 14 * int64(time.Second)
			kept := mustInstance(t, pp, "p#0", 8, noopSender{})
			if err := kept.Restore(st); err != nil {
				t.Fatal(err)
			}
			check(plain.at(t, kept, 1000, get("b")), live("b", 20))
			plain.now = 15 * int64(time.Second)
			dropped := mustInstance(t, pp, "p#0", 8, noopSender{})
			if err := dropped.Restore(st); err != nil {
				t.Fatal(err)
			}
			check(plain.at(t, dropped, 15, get("b")), gone("b"))
		})
	}
}

// TestStateTTLIncrementalCleanup: expired entries that are never read
// again are removed by the clean-up after input batches, on both
// backends.
func TestStateTTLIncrementalCleanup(t *testing.T) {
	for _, disk := range []bool{false, true} {
		t.Run(map[bool]string{false: "heap", true: "disk"}[disk], func(t *testing.T) {
			if disk {
				onDisk(t)
			}
			j := &ttlJob{ttl: 10 * time.Second}
			inst := mustInstance(t, j.plan(t), "p#0", 8, noopSender{})
			var cmds []ttlCmd
			for i := range 1000 {
				cmds = append(cmds, set(fmt.Sprint("k", i), 1))
			}
			j.at(t, inst, 0, cmds...)
			v, m := j.v[len(j.v)-1], j.m[len(j.m)-1]
			stored := func() int {
				if !disk {
					return v.m.len() + len(m.m)
				}
				n := 0
				if err := v.setup.disk.db.Scan(nil, nil, func(_, _ []byte) error { n++; return nil }); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if n := stored(); n != 2000 {
				t.Fatalf("%d entries stored, want 2000", n)
			}
			// 200 batches of one other key, 20s later: the 2000 expired
			// entries are looked at, 16 (heap) or 64 (disk) per state and
			// batch, and removed.
			for range 200 {
				j.at(t, inst, 20, set("other", 1))
			}
			if n := stored(); n != 2 {
				t.Fatalf("%d entries stored after the clean-up, want the 2 of key other", n)
			}
			if got := slices.Collect(maps.Keys(valuesOf(v))); len(got) != 1 || got[0] != "other" {
				t.Fatalf("live keys %v", got)
			}
		})
	}
}

// TestWithTTLRefusals: a time-to-live that is not positive fails the
// setup, naming the state; WithTTL after setup panics.
func TestWithTTLRefusals(t *testing.T) {
	g := New("ttl")
	k := KeyBy(FromSlice(g, "src", []string{}), func(s string) string { return s })
	var late *ValueState[string, int64]
	Sink(Process(k, "p", func(s *KeyedSetup[string]) ProcessFunc[string, string, string] {
		Value[int64](s, "zero").WithTTL(0)
		late = Value[int64](s, "late")
		return echo
	}), "sink", discard[string])
	p := mustPlan(t, g)
	if _, err := p.NewInstance(mustTask(t, p, "p#0").Index, InstanceContext{Sender: noopSender{}}); err == nil ||
		!strings.HasSuffix(err.Error(), `state "zero": WithTTL(0s): the time-to-live must be positive`) || !errors.Is(err, ErrInvalidState) {
		t.Fatalf("NewInstance = %v", err)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("WithTTL after setup did not panic")
		}
	}()
	late.setup.sealed = true // as after the instance's setup
	late.WithTTL(time.Second)
}
