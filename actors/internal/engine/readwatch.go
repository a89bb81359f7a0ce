package engine

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// slowRead is how long a source read may take before a warning is logged:
// the task handles nothing else meanwhile (no barrier, no credit, no stop).
const slowRead = time.Second

// readWatch watches a source task's reads from a goroutine of its own, so
// that a Read that blocks is named while it blocks: at slowRead, and again
// each time it has blocked ten times as long. A read costs two atomic
// stores.
type readWatch struct {
	since atomic.Int64 // when the read in progress began (Unix nanoseconds), 0 between reads
	log   *slog.Logger
}

// watchReads starts a watch that ends with ctx (the task's incarnation).
func watchReads(ctx context.Context, log *slog.Logger) *readWatch {
	w := &readWatch{log: log}
	go w.run(ctx)
	return w
}

func (w *readWatch) begin() { w.since.Store(time.Now().UnixNano()) }

// blocked returns how long the read in progress has blocked, 0 when none
// is.
func (w *readWatch) blocked() time.Duration {
	if since := w.since.Load(); since != 0 {
		return time.Since(time.Unix(0, since))
	}
	return 0
}
func (w *readWatch) end() { w.since.Store(0) }

func (w *readWatch) run(ctx context.Context) {
	tick := time.NewTicker(slowRead / 4)
	defer tick.Stop()
	var read int64                 // the read warned about (0: none)
	var warned, next time.Duration // how long it had blocked at the last warning; when to warn again
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			since := w.since.Load()
			if read != 0 && since != read {
				w.log.Info("the blocked source read returned", "blocked_for_at_least", warned.Round(time.Millisecond))
				read = 0
			}
			if since == 0 {
				continue
			}
			blocked := now.Sub(time.Unix(0, since))
			if since != read {
				if blocked < slowRead {
					continue
				}
				read, next = since, slowRead
			}
			if blocked >= next {
				w.log.Warn("a source read is blocked; the task handles nothing else meanwhile (no checkpoint barrier, no stop). Read must return promptly: return topology.ErrSourceIdle and call the wake function when records arrive, or return when the context given to Open is done",
					"blocked_for", blocked.Round(time.Millisecond))
				warned, next = blocked, next*10
			}
		}
	}
}
