package membership

import (
	"fmt"
	"net"
	"strconv"
	"time"
)

// Members is the coordinator's table of workers: who registered, who is live,
// and who was lost. It is a pure state machine, not safe for concurrent use:
// one actor owns it and passes the time of every event.
//
// Lost workers stay in the table as tombstones, so that their ids are refused
// and their heartbeats ignored for the table's lifetime.
type Members struct {
	cfg    Config
	byID   map[string]*Worker // live and lost workers
	byAddr map[string]*Worker // live workers only
	live   []*Worker          // in registration order
	slots  int                // sum of Slots over live
}

// New returns an empty table for cfg with its defaults applied. New panics if
// cfg is invalid: call cfg.Validate first.
func New(cfg Config) *Members {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	return &Members{
		cfg:    cfg.WithDefaults(),
		byID:   make(map[string]*Worker),
		byAddr: make(map[string]*Worker),
	}
}

// Config returns the table's configuration, defaults applied.
func (m *Members) Config() Config { return m.cfg }

// Register records that worker id, listening on addr, offers slots task
// slots, at time now. It returns the registered worker and the workers it
// replaced, which are now lost: the shell fails their tasks.
//
// Register refuses (ErrInvalid) an empty id, an addr that is not host:port
// with a host and a port in 1..65535, and slots < 1. It refuses (ErrLost) an
// id that was declared lost: that worker must drop its tasks and register
// again under a new id. It refuses (ErrConflict) the id of a live worker with
// another address or number of slots.
//
// Registering a live worker again with the same address and slots (a retried
// registration) changes nothing but LastSeen, and replaces no one.
//
// A new id on the address of a live worker replaces that worker: only one
// process listens on a host:port at a time, so the old process is gone (it
// crashed and was restarted faster than it was detected). The old worker is
// declared lost and returned in replaced.
func (m *Members) Register(now time.Time, id, addr string, slots int) (w Worker, replaced []Worker, err error) {
	if err := checkRegistration(id, addr, slots); err != nil {
		return Worker{}, nil, err
	}
	if old, ok := m.byID[id]; ok {
		return m.reregister(now, old, addr, slots)
	}
	if old, ok := m.byAddr[addr]; ok {
		m.lose(old, fmt.Sprintf("replaced by worker %s at the same address", id))
		replaced = append(replaced, *old)
	}
	nw := &Worker{ID: id, Addr: addr, Slots: slots, Registered: now, LastSeen: now}
	m.byID[id] = nw
	m.byAddr[addr] = nw
	m.live = append(m.live, nw)
	m.slots += slots
	return *nw, replaced, nil
}

// reregister answers a registration under a known id.
func (m *Members) reregister(now time.Time, old *Worker, addr string, slots int) (Worker, []Worker, error) {
	switch {
	case old.Lost:
		return Worker{}, nil, fmt.Errorf("%w: register %s: id %s was declared lost (%s); register again under a new id",
			ErrLost, old, old.ID, old.Reason)
	case old.Addr != addr || old.Slots != slots:
		return Worker{}, nil, fmt.Errorf("%w: register worker %s at %s with %d slots: already registered at %s with %d slots",
			ErrConflict, old.ID, addr, slots, old.Addr, old.Slots)
	}
	m.seen(old, now)
	return *old, nil, nil
}

// checkRegistration validates the arguments of Register.
func checkRegistration(id, addr string, slots int) error {
	if id == "" {
		return fmt.Errorf("%w registration: empty worker id (address %q)", ErrInvalid, addr)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w registration of worker %s: address %q is not host:port: %v", ErrInvalid, id, addr, err)
	}
	if host == "" {
		return fmt.Errorf("%w registration of worker %s: address %q has no host", ErrInvalid, id, addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%w registration of worker %s: address %q: port %q, want 1..65535", ErrInvalid, id, addr, port)
	}
	if slots < 1 {
		return fmt.Errorf("%w registration of worker %s at %s: %d slots, want at least 1", ErrInvalid, id, addr, slots)
	}
	return nil
}

// Heartbeat records a heartbeat ack from worker id at now (the shell may
// count any message from the worker as one). It returns false, and changes
// nothing, for an unknown or lost id: the shell fences that worker out.
func (m *Members) Heartbeat(now time.Time, id string) bool {
	w, ok := m.byID[id]
	if !ok || w.Lost {
		return false
	}
	m.seen(w, now)
	return true
}

// seen moves w's LastSeen forward to now; it never moves back.
func (m *Members) seen(w *Worker, now time.Time) {
	if now.After(w.LastSeen) {
		w.LastSeen = now
	}
}

// Expired declares lost, and returns in registration order, the live workers
// silent for HeartbeatTimeout or longer at now: now >= LastSeen +
// HeartbeatTimeout. Each lost worker is returned once; its Reason reads
// "no heartbeat for 5.2s (timeout 5s)".
func (m *Members) Expired(now time.Time) []Worker {
	var out []Worker
	for _, w := range m.live {
		if silent := now.Sub(w.LastSeen); silent >= m.cfg.HeartbeatTimeout {
			out = append(out, *w)
			out[len(out)-1].Lost = true
			out[len(out)-1].Reason = fmt.Sprintf("no heartbeat for %v (timeout %v)",
				silent.Round(time.Millisecond), m.cfg.HeartbeatTimeout)
		}
	}
	for _, w := range out {
		m.lose(m.byID[w.ID], w.Reason)
	}
	return out
}

// Deadline returns the earliest time at which a live worker expires, for the
// shell's timer, and false when no worker is live.
func (m *Members) Deadline() (time.Time, bool) {
	var first time.Time
	for i, w := range m.live {
		if i == 0 || w.LastSeen.Before(first) {
			first = w.LastSeen
		}
	}
	if len(m.live) == 0 {
		return time.Time{}, false
	}
	return first.Add(m.cfg.HeartbeatTimeout), true
}

// Lose declares worker id lost for reason (its connection broke, its process
// died). It returns the worker and whether it was live; for a worker already
// lost it changes nothing and returns it with its first reason.
func (m *Members) Lose(id, reason string) (Worker, bool) {
	w, ok := m.byID[id]
	if !ok {
		return Worker{}, false
	}
	if w.Lost {
		return *w, false
	}
	if reason == "" {
		reason = "lost"
	}
	m.lose(w, reason)
	return *w, true
}

// lose moves the live worker w to the tombstones.
func (m *Members) lose(w *Worker, reason string) {
	w.Lost, w.Reason = true, reason
	delete(m.byAddr, w.Addr)
	for i, l := range m.live {
		if l == w {
			m.live = append(m.live[:i], m.live[i+1:]...)
			break
		}
	}
	m.slots -= w.Slots
}

// Get returns the worker registered under id, live or lost.
func (m *Members) Get(id string) (Worker, bool) {
	w, ok := m.byID[id]
	if !ok {
		return Worker{}, false
	}
	return *w, true
}

// Live returns the live workers in registration order.
func (m *Members) Live() []Worker {
	out := make([]Worker, len(m.live))
	for i, w := range m.live {
		out[i] = *w
	}
	return out
}

// Slots returns the number of task slots offered by the live workers.
func (m *Members) Slots() int { return m.slots }
