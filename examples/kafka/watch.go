package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// watcher follows the output topic with a read_committed consumer and
// counts the orders whose effect is visible there: the job is stopped once
// every order has one, which is read, never guessed from the clock.
type watcher struct {
	records int64

	mu       sync.Mutex
	seen     []bool
	distinct int64
	changed  chan struct{} // closed and replaced when distinct grows
	lastErr  error         // the last fetch error, for a wait that runs out

	cancel context.CancelFunc
	done   chan struct{}
}

// watch starts following topic.
func watch(ctx context.Context, brokers []string, topic string, records int64) (*watcher, error) {
	cl, err := newClient(brokers, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{records: records, seen: make([]bool, records), changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		defer cl.Close()
		for wctx.Err() == nil {
			w.add(cl.PollFetches(wctx))
		}
	}()
	return w, nil
}

func (w *watcher) add(fs kgo.Fetches) {
	w.mu.Lock()
	defer w.mu.Unlock()
	grew := false
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.Canceled) {
			w.lastErr = err
		}
	})
	fs.EachRecord(func(r *kgo.Record) {
		e, err := decodeEffect(r.Value)
		if err != nil || e.ID < 0 || e.ID >= w.records || w.seen[e.ID] {
			return // sentinels and the like; the verification counts them
		}
		w.seen[e.ID] = true
		w.distinct++
		grew = true
	})
	if grew {
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// committed returns the number of orders with a visible effect.
func (w *watcher) committed() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.distinct
}

// errJobEnded is returned by wait when the job ended first.
var errJobEnded = errors.New("the job ended")

// wait waits until at least n orders have a visible effect. It returns
// errJobEnded when jobDone is closed first, and ctx's error (with what the
// output held) when ctx ends first.
func (w *watcher) wait(ctx context.Context, n int64, jobDone <-chan struct{}) error {
	for {
		w.mu.Lock()
		have, changed, lastErr := w.distinct, w.changed, w.lastErr
		w.mu.Unlock()
		if have >= n {
			return nil
		}
		select {
		case <-changed:
		case <-jobDone:
			return errJobEnded
		case <-ctx.Done():
			msg := ""
			if lastErr != nil {
				msg = fmt.Sprintf(" (the consumer's last error: %v)", lastErr)
			}
			return fmt.Errorf("the read_committed output held %d of the %d effects waited for%s: %w", have, n, msg, context.Cause(ctx))
		}
	}
}

// stop stops following the topic.
func (w *watcher) stop() {
	w.cancel()
	<-w.done
}
