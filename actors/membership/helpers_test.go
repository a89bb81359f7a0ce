package membership

import (
	"testing"
	"time"
)

// t0 is the origin of the tests' clocks.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// at returns t0 + d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// mustRegister registers a worker or fails the test.
func mustRegister(t *testing.T, m *Members, now time.Time, id, addr string, slots int) []Worker {
	t.Helper()
	w, replaced, err := m.Register(now, id, addr, slots)
	if err != nil {
		t.Fatalf("Register(%s, %s, %d): %v", id, addr, slots, err)
	}
	if w.ID != id || w.Addr != addr || w.Slots != slots || w.Lost {
		t.Fatalf("Register(%s, %s, %d) returned %+v", id, addr, slots, w)
	}
	return replaced
}

// ids returns the ids of ws.
func ids(ws []Worker) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.ID
	}
	return out
}
