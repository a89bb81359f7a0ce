package membership

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRegisterRefuses(t *testing.T) {
	tests := []struct {
		name       string
		id, addr   string
		slots      int
		sentinel   error
		wantSubstr string
	}{
		{"empty id", "", "127.0.0.1:4001", 1, ErrInvalid, "membership: invalid registration: empty worker id"},
		{"empty addr", "w9", "", 1, ErrInvalid, `worker w9: address "" is not host:port`},
		{"no port", "w9", "127.0.0.1", 1, ErrInvalid, `address "127.0.0.1" is not host:port`},
		{"no host", "w9", ":4001", 1, ErrInvalid, `address ":4001" has no host`},
		{"port 0", "w9", "127.0.0.1:0", 1, ErrInvalid, `port "0", want 1..65535`},
		{"port too big", "w9", "127.0.0.1:70000", 1, ErrInvalid, `port "70000", want 1..65535`},
		{"port name", "w9", "localhost:http", 1, ErrInvalid, `port "http", want 1..65535`},
		{"zero slots", "w9", "127.0.0.1:4009", 0, ErrInvalid, "worker w9 at 127.0.0.1:4009: 0 slots, want at least 1"},
		{"negative slots", "w9", "127.0.0.1:4009", -2, ErrInvalid, "-2 slots"},
		{"lost id", "lost", "127.0.0.1:4002", 1, ErrLost,
			"membership: worker lost: register lost@127.0.0.1:4002: id lost was declared lost (process died); register again under a new id"},
		{"lost id on a new address", "lost", "127.0.0.1:4009", 1, ErrLost, "id lost was declared lost"},
		{"live id, other address", "w1", "127.0.0.1:4009", 2, ErrConflict,
			"membership: conflicting registration: register worker w1 at 127.0.0.1:4009 with 2 slots: already registered at 127.0.0.1:4001 with 2 slots"},
		{"live id, other slots", "w1", "127.0.0.1:4001", 3, ErrConflict, "with 3 slots: already registered at 127.0.0.1:4001 with 2 slots"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Config{})
			mustRegister(t, m, at(0), "w1", "127.0.0.1:4001", 2)
			mustRegister(t, m, at(0), "lost", "127.0.0.1:4002", 1)
			m.Lose("lost", "process died")
			before := m.Live()
			w, replaced, err := m.Register(at(time.Second), tt.id, tt.addr, tt.slots)
			if !errors.Is(err, tt.sentinel) || !strings.Contains(err.Error(), tt.wantSubstr) {
				t.Fatalf("error %v, want %q wrapping %v", err, tt.wantSubstr, tt.sentinel)
			}
			if w != (Worker{}) || replaced != nil {
				t.Fatalf("refused registration returned %+v, replaced %v", w, replaced)
			}
			if got := m.Live(); !slices.Equal(got, before) || m.Slots() != 2 {
				t.Fatalf("refused registration changed the table: live %+v, slots %d", got, m.Slots())
			}
		})
	}
}

func TestRegisterRetryIsIdempotent(t *testing.T) {
	m := New(Config{})
	mustRegister(t, m, at(0), "w1", "127.0.0.1:4001", 2)
	w, replaced, err := m.Register(at(3*time.Second), "w1", "127.0.0.1:4001", 2)
	if err != nil || replaced != nil {
		t.Fatalf("retried registration: replaced %v, err %v", replaced, err)
	}
	if !w.Registered.Equal(at(0)) || !w.LastSeen.Equal(at(3*time.Second)) {
		t.Fatalf("retried registration: %+v, want registered at 0s, last seen at 3s", w)
	}
	if m.Slots() != 2 || len(m.Live()) != 1 {
		t.Fatalf("retried registration counted twice: %d slots, live %v", m.Slots(), ids(m.Live()))
	}
	// A retry that arrives late does not move LastSeen back.
	if w, _, _ := m.Register(at(time.Second), "w1", "127.0.0.1:4001", 2); !w.LastSeen.Equal(at(3 * time.Second)) {
		t.Fatalf("late retry moved LastSeen back to %v", w.LastSeen.Sub(t0))
	}
}

func TestRegisterOnTheAddressOfALiveWorkerReplacesIt(t *testing.T) {
	m := New(Config{})
	mustRegister(t, m, at(0), "w1", "127.0.0.1:4001", 2)
	mustRegister(t, m, at(0), "w2", "127.0.0.1:4002", 3)
	replaced := mustRegister(t, m, at(time.Second), "w1b", "127.0.0.1:4001", 1)
	if len(replaced) != 1 {
		t.Fatalf("replaced %+v, want w1", replaced)
	}
	old := replaced[0]
	if old.ID != "w1" || !old.Lost || old.Reason != "replaced by worker w1b at the same address" {
		t.Fatalf("replaced %+v", old)
	}
	if err := old.Err(); !errors.Is(err, ErrLost) ||
		err.Error() != "membership: worker lost: w1@127.0.0.1:4001: replaced by worker w1b at the same address" {
		t.Fatalf("replaced.Err() = %v", err)
	}
	if got := ids(m.Live()); !slices.Equal(got, []string{"w2", "w1b"}) {
		t.Fatalf("live %v, want [w2 w1b]", got)
	}
	if m.Slots() != 4 {
		t.Fatalf("slots %d, want 4", m.Slots())
	}
	if m.Heartbeat(at(2*time.Second), "w1") {
		t.Fatal("the replaced worker's heartbeat was accepted")
	}
	// The replaced worker is never returned again.
	if exp := m.Expired(at(time.Hour)); !slices.Equal(ids(exp), []string{"w2", "w1b"}) {
		t.Fatalf("expired %v, want [w2 w1b]", ids(exp))
	}
	// An address freed by a lost worker is free: no one is replaced.
	if replaced := mustRegister(t, m, at(time.Hour), "w1c", "127.0.0.1:4001", 1); replaced != nil {
		t.Fatalf("registration on a lost worker's address replaced %+v", replaced)
	}
}

func TestHeartbeat(t *testing.T) {
	m := New(Config{})
	mustRegister(t, m, at(0), "w1", "127.0.0.1:4001", 1)
	if !m.Heartbeat(at(2*time.Second), "w1") {
		t.Fatal("heartbeat of a live worker refused")
	}
	if m.Heartbeat(at(2*time.Second), "nobody") {
		t.Fatal("heartbeat of an unknown worker accepted")
	}
	// An ack that arrives out of order does not move LastSeen back.
	if !m.Heartbeat(at(time.Second), "w1") {
		t.Fatal("late heartbeat of a live worker refused")
	}
	if w, _ := m.Get("w1"); !w.LastSeen.Equal(at(2 * time.Second)) {
		t.Fatalf("LastSeen %v, want 2s", w.LastSeen.Sub(t0))
	}
	m.Lose("w1", "connection closed")
	if m.Heartbeat(at(3*time.Second), "w1") {
		t.Fatal("heartbeat of a lost worker accepted")
	}
	if w, _ := m.Get("w1"); !w.LastSeen.Equal(at(2 * time.Second)) {
		t.Fatalf("a refused heartbeat changed LastSeen to %v", w.LastSeen.Sub(t0))
	}
}

func TestExpired(t *testing.T) {
	m := New(Config{HeartbeatInterval: time.Second, HeartbeatTimeout: 5 * time.Second})
	if _, ok := m.Deadline(); ok {
		t.Fatal("Deadline with no worker")
	}
	mustRegister(t, m, at(0), "w1", "127.0.0.1:4001", 1)
	mustRegister(t, m, at(time.Second), "w2", "127.0.0.1:4002", 1)
	mustRegister(t, m, at(2*time.Second), "w3", "127.0.0.1:4003", 1)
	m.Heartbeat(at(4*time.Second), "w1")
	if d, ok := m.Deadline(); !ok || !d.Equal(at(6*time.Second)) {
		t.Fatalf("Deadline %v %v, want 6s (w2 seen at 1s)", d.Sub(t0), ok)
	}
	if exp := m.Expired(at(6*time.Second - time.Nanosecond)); exp != nil {
		t.Fatalf("expired %v before the deadline", ids(exp))
	}
	exp := m.Expired(at(6 * time.Second)) // exactly the deadline
	if !slices.Equal(ids(exp), []string{"w2"}) {
		t.Fatalf("expired %v at the deadline, want [w2]", ids(exp))
	}
	if exp := m.Expired(at(6 * time.Second)); exp != nil {
		t.Fatalf("expired %v twice", ids(exp))
	}
	// Registration order, whatever the silence.
	exp = m.Expired(at(9*time.Second + 123456789))
	if !slices.Equal(ids(exp), []string{"w1", "w3"}) {
		t.Fatalf("expired %v, want [w1 w3]", ids(exp))
	}
	reasons := []string{"no heartbeat for 5.123s (timeout 5s)", "no heartbeat for 7.123s (timeout 5s)"}
	for i, w := range exp {
		if !w.Lost || w.Reason != reasons[i] {
			t.Errorf("expired %+v, want lost with reason %q", w, reasons[i])
		}
		if got, _ := m.Get(w.ID); got != w {
			t.Errorf("Get(%s) = %+v, want %+v", w.ID, got, w)
		}
	}
	if m.Slots() != 0 || len(m.Live()) != 0 {
		t.Fatalf("after expiry: %d slots, live %v", m.Slots(), ids(m.Live()))
	}
	if _, ok := m.Deadline(); ok {
		t.Fatal("Deadline with every worker lost")
	}
}

func TestLose(t *testing.T) {
	m := New(Config{})
	mustRegister(t, m, at(0), "w1", "127.0.0.1:4001", 2)
	mustRegister(t, m, at(0), "w2", "127.0.0.1:4002", 3)
	w, ok := m.Lose("w1", "endpoint terminated")
	if !ok || !w.Lost || w.Reason != "endpoint terminated" || w.ID != "w1" {
		t.Fatalf("Lose(w1) = %+v, %v", w, ok)
	}
	w, ok = m.Lose("w1", "connection closed")
	if ok || w.Reason != "endpoint terminated" {
		t.Fatalf("second Lose(w1) = %+v, %v: want not live, first reason kept", w, ok)
	}
	if w, ok := m.Lose("nobody", "x"); ok || w != (Worker{}) {
		t.Fatalf("Lose(nobody) = %+v, %v", w, ok)
	}
	if w, ok := m.Lose("w2", ""); !ok || w.Reason != "lost" {
		t.Fatalf("Lose(w2, \"\") = %+v, %v: want reason \"lost\"", w, ok)
	}
	if exp := m.Expired(at(time.Hour)); exp != nil {
		t.Fatalf("lost workers expired again: %v", ids(exp))
	}
	if m.Slots() != 0 {
		t.Fatalf("slots %d after losing every worker", m.Slots())
	}
	if _, ok := m.Get("nobody"); ok {
		t.Fatal("Get(nobody) found a worker")
	}
}

func TestLiveIsInRegistrationOrder(t *testing.T) {
	m := New(Config{})
	for _, id := range []string{"c", "a", "d", "b"} {
		mustRegister(t, m, at(0), id, "10.0.0.1:"+map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"}[id], 1)
	}
	m.Lose("a", "x")
	if got := ids(m.Live()); !slices.Equal(got, []string{"c", "d", "b"}) {
		t.Fatalf("live %v, want [c d b]", got)
	}
	live := m.Live()
	live[0].Slots = 99 // a copy
	if m.Slots() != 3 || m.Live()[0].Slots != 1 {
		t.Fatal("Live shares the table's workers")
	}
}

func TestWorkerErrOfALiveWorkerIsNil(t *testing.T) {
	w := Worker{ID: "w1", Addr: "127.0.0.1:4001", Slots: 1}
	if err := w.Err(); err != nil {
		t.Fatalf("live worker's Err() = %v", err)
	}
	if got := w.String(); got != "w1@127.0.0.1:4001" {
		t.Fatalf("String() = %q", got)
	}
}
