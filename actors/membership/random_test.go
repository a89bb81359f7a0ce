package membership

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRandomMembers drives tables through seeded random sequences of
// registrations (new ids, retried ones, lost ones, conflicting ones, reused
// addresses), heartbeats, expiries and losses, and checks the invariants
// after every step:
//
//   - a lost worker never becomes live again: it is not in Live, its
//     heartbeats are refused and its id is refused by Register;
//   - every worker that leaves the live set is reported lost exactly once,
//     by Register's replaced, Expired or Lose, and Expired never returns a
//     worker twice;
//   - Slots equals the sum of Slots over Live;
//   - Live is in registration order and its addresses are distinct;
//   - after Expired(now), no live worker is silent for the timeout, and every
//     worker it returned was.
func TestRandomMembers(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomMembers(t, seed) })
	}
}

func randomMembers(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 9))
	cfg := Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second}
	m := New(cfg)
	now := t0
	r := newRecorder()
	nextID := 0
	for step := range 400 {
		now = now.Add(time.Duration(rng.IntN(1500)) * time.Millisecond)
		var what string
		switch op := rng.IntN(10); {
		case op < 3: // a new incarnation, on one of 6 addresses
			id := fmt.Sprintf("w%d", nextID)
			nextID++
			addr := fmt.Sprintf("127.0.0.1:%d", 4000+rng.IntN(6))
			what = fmt.Sprintf("register %s %s", id, addr)
			r.register(t, m, now, id, addr, 1+rng.IntN(4))
		case op < 4: // a known id again: a retry, a lost one, or a conflict
			if len(r.order) == 0 {
				continue
			}
			id := r.order[rng.IntN(len(r.order))]
			w, _ := m.Get(id)
			addr, slots := w.Addr, w.Slots
			if rng.IntN(2) == 0 {
				slots++
			}
			what = fmt.Sprintf("re-register %s", id)
			r.register(t, m, now, id, addr, slots)
		case op < 7:
			id := r.anyID(rng)
			what = "heartbeat " + id
			ok := m.Heartbeat(now, id)
			if ok != r.live[id] {
				t.Fatalf("seed %d step %d: Heartbeat(%s) = %v, live %v", seed, step, id, ok, r.live[id])
			}
		case op < 9:
			what = "expired"
			before := m.Live()
			exp := m.Expired(now)
			for _, w := range exp {
				prev := findWorker(before, w.ID)
				if prev == nil || now.Sub(prev.LastSeen) < cfg.HeartbeatTimeout {
					t.Fatalf("seed %d step %d: Expired returned %+v, not live and silent before", seed, step, w)
				}
			}
			r.lost(t, exp, "Expired")
			for _, w := range m.Live() {
				if now.Sub(w.LastSeen) >= cfg.HeartbeatTimeout {
					t.Fatalf("seed %d step %d: %s silent for %v, still live after Expired", seed, step, w, now.Sub(w.LastSeen))
				}
			}
		default:
			id := r.anyID(rng)
			what = "lose " + id
			w, ok := m.Lose(id, "connection closed")
			if ok != r.live[id] {
				t.Fatalf("seed %d step %d: Lose(%s) = %v, live %v", seed, step, id, ok, r.live[id])
			}
			if ok {
				r.lost(t, []Worker{w}, "Lose")
			}
		}
		r.check(t, m, fmt.Sprintf("seed %d step %d (%s)", seed, step, what))
	}
}

// recorder is what the random test knows of the table from its answers.
type recorder struct {
	order    []string        // ids in registration order
	live     map[string]bool // id -> live
	reported map[string]int  // id -> times reported lost
}

func newRecorder() *recorder {
	return &recorder{live: make(map[string]bool), reported: make(map[string]int)}
}

// anyID returns a random known id, or an unknown one now and then.
func (r *recorder) anyID(rng *rand.Rand) string {
	if len(r.order) == 0 || rng.IntN(10) == 0 {
		return "stranger"
	}
	return r.order[rng.IntN(len(r.order))]
}

func (r *recorder) register(t *testing.T, m *Members, now time.Time, id, addr string, slots int) {
	t.Helper()
	known, wasLive := r.reported[id] > 0 || r.live[id], r.live[id]
	before, _ := m.Get(id)
	w, replaced, err := m.Register(now, id, addr, slots)
	switch {
	case known && !wasLive:
		if !errors.Is(err, ErrLost) {
			t.Fatalf("Register of lost id %s: err %v, want ErrLost", id, err)
		}
		return
	case wasLive && (before.Addr != addr || before.Slots != slots):
		if !errors.Is(err, ErrConflict) {
			t.Fatalf("conflicting Register of %s: err %v, want ErrConflict", id, err)
		}
		return
	case err != nil:
		t.Fatalf("Register(%s, %s, %d): %v", id, addr, slots, err)
	case wasLive && (replaced != nil || w.Registered != before.Registered):
		t.Fatalf("retried Register of %s replaced %v, registered %v", id, replaced, w.Registered)
	}
	r.lost(t, replaced, "Register")
	if !wasLive {
		r.order = append(r.order, id)
		r.live[id] = true
	}
}

// lost records workers reported lost by source.
func (r *recorder) lost(t *testing.T, ws []Worker, source string) {
	t.Helper()
	for _, w := range ws {
		if !w.Lost || w.Reason == "" || w.Err() == nil {
			t.Fatalf("%s reported %+v without a loss", source, w)
		}
		if !r.live[w.ID] {
			t.Fatalf("%s reported %s lost, but it was not live", source, w.ID)
		}
		r.live[w.ID] = false
		r.reported[w.ID]++
	}
}

// check compares the table with what the recorder knows.
func (r *recorder) check(t *testing.T, m *Members, where string) {
	t.Helper()
	var want []string
	for _, id := range r.order {
		if r.live[id] {
			want = append(want, id)
		}
	}
	live := m.Live()
	if got := ids(live); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s: live %v, want %v in registration order", where, got, want)
	}
	slots, addrs := 0, make(map[string]bool)
	for _, w := range live {
		if w.Lost || w.Reason != "" {
			t.Fatalf("%s: live worker %+v marked lost", where, w)
		}
		if addrs[w.Addr] {
			t.Fatalf("%s: two live workers at %s", where, w.Addr)
		}
		addrs[w.Addr] = true
		slots += w.Slots
	}
	if m.Slots() != slots {
		t.Fatalf("%s: Slots() = %d, sum over Live = %d", where, m.Slots(), slots)
	}
	for id, n := range r.reported {
		w, ok := m.Get(id)
		if n != 1 || !ok || !w.Lost {
			t.Fatalf("%s: %s reported lost %d times, table has %+v", where, id, n, w)
		}
	}
}

func findWorker(ws []Worker, id string) *Worker {
	for i := range ws {
		if ws[i].ID == id {
			return &ws[i]
		}
	}
	return nil
}
