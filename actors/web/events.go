package web

import (
	"encoding/json"
	"net/http"
	"time"
)

// The event stream's keep-alive period, and how long one write to a
// client may take before the stream is dropped.
var (
	keepAlive         = 15 * time.Second
	eventWriteTimeout = 10 * time.Second
)

// events streams the monitor's updates as server-sent events: one
// "data: <monitor.Update as JSON>" per update, a comment every keepAlive.
// The stream stays open past the server's read and write timeouts, and
// ends when the client leaves, the monitor ends the subscription, or the
// server closes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no") // for a reverse proxy in front
	if r.Method == http.MethodHead {
		// No body: a client may reuse the connection at once, so the
		// handler must not go on streaming.
		w.WriteHeader(http.StatusOK)
		return
	}
	release, ok := s.slot(w, s.streams, "event streams")
	if !ok {
		return
	}
	defer release()
	rc := http.NewResponseController(w)
	updates, unsubscribe := s.mon.Subscribe()
	defer unsubscribe()
	w.WriteHeader(http.StatusOK)
	// No read deadline: a read timeout would end the request's context.
	// Errors mean the writer has no deadlines (a test recorder).
	_ = rc.SetReadDeadline(time.Time{})
	send := func(b []byte) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	// The first bytes tell the client that it is subscribed: updates from
	// now on reach it.
	if !send([]byte("retry: 3000\n: subscribed\n\n")) {
		return
	}
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	buf := make([]byte, 0, 1024)
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if !send([]byte(": keep-alive\n\n")) {
				return
			}
		case u, ok := <-updates:
			if !ok {
				return
			}
			b, err := json.Marshal(u)
			if err != nil {
				s.log.Error("web: encoding an update", "kind", u.Kind, "err", err)
				continue
			}
			buf = append(append(append(buf[:0], "data: "...), b...), "\n\n"...)
			if !send(buf) {
				return
			}
		}
	}
}
