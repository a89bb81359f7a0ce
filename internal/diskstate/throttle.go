package diskstate

import (
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// logEvery is the interval in which a database logs a distinct error at
// most once.
const logEvery = 10 * time.Second

// maxDistinct bounds the distinct messages a throttle tells apart; the
// others share one count.
const maxDistinct = 32

// throttle decides which messages of a stream to log: a message is logged
// if none with the same key (its text, digits aside: file numbers change
// from one attempt to the next) was logged in the last interval, and
// counted as held back otherwise. A database that fails may report the
// same error thousands of times a second (pebble retries a failed flush
// at once); a throttle makes that a line per interval.
type throttle struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	seen  map[string]*throttled
}

// throttled is what a throttle knows of one key.
type throttled struct {
	at   time.Time // when a message was last logged
	held int       // messages held back since
	last string    // the newest message held back
}

func newThrottle(every time.Duration, now func() time.Time) *throttle {
	return &throttle{every: every, now: now, seen: map[string]*throttled{}}
}

// admit reports whether msg is logged now and, if so, how many messages
// with its key were held back since the last one logged.
func (t *throttle) admit(msg string) (log bool, held int) {
	key := throttleKey(msg)
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	s := t.seen[key]
	if s == nil {
		if len(t.seen) >= maxDistinct {
			key = "" // one count for the rest
			s = t.seen[key]
		}
		if s == nil {
			t.seen[key] = &throttled{at: now}
			return true, 0
		}
	}
	if now.Sub(s.at) < t.every {
		s.held++
		s.last = msg
		return false, 0
	}
	held, s.at, s.held, s.last = s.held, now, 0, ""
	return true, held
}

// heldBack is a message that a throttle held back, and how many like it.
type heldBack struct {
	msg string
	n   int
}

// drain returns the newest message held back of each key that has any,
// with their counts, and forgets them.
func (t *throttle) drain() []heldBack {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []heldBack
	for _, s := range t.seen {
		if s.held > 0 {
			out = append(out, heldBack{msg: s.last, n: s.held})
			s.held, s.last = 0, ""
		}
	}
	return out
}

// throttleKey is msg with every run of digits made one '#'.
func throttleKey(msg string) string {
	b := make([]byte, 0, len(msg))
	digits := false
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= '0' && c <= '9' {
			if !digits {
				b = append(b, '#')
			}
			digits = true
			continue
		}
		digits = false
		b = append(b, c)
	}
	return string(b)
}

// throttledLogger is a database's logger: pebble's errors go through its
// throttle, its other messages at debug level.
type throttledLogger struct {
	l   *slog.Logger // nil: discarded
	dir string
	t   *throttle
}

func (l *throttledLogger) Infof(format string, args ...any) {
	if l.l != nil {
		l.l.Debug("disk state: "+fmt.Sprintf(format, args...), "dir", l.dir)
	}
}

func (l *throttledLogger) Errorf(format string, args ...any) {
	l.error("disk state: " + fmt.Sprintf(format, args...))
}

func (l *throttledLogger) Fatalf(format string, args ...any) {
	msg := "disk state: " + fmt.Sprintf(format, args...)
	if l.l != nil {
		l.l.Error(msg, "dir", l.dir)
	}
	panic(msg)
}

// error logs msg at error level unless the throttle holds it back.
func (l *throttledLogger) error(msg string) {
	if l.l == nil {
		return
	}
	ok, held := l.t.admit(msg)
	switch {
	case !ok:
	case held > 0:
		l.l.Error(msg, "dir", l.dir, "held_back", held, "held_back_over", l.t.every)
	default:
		l.l.Error(msg, "dir", l.dir)
	}
}

// flush logs, for each key of which the throttle still holds messages
// back, the newest of them and their count.
func (l *throttledLogger) flush() {
	if l.l == nil {
		return
	}
	for _, h := range l.t.drain() {
		l.l.Error(h.msg, "dir", l.dir, "held_back", h.n)
	}
}
