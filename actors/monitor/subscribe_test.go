package monitor_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
)

func TestSubscribe(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{})
	ch, cancel := m.Subscribe()
	feed(actors.Event{Kind: actors.EventRunning, Time: at(0), Epoch: 1})
	feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(1), Epoch: 1, Checkpoint: 1})
	feed(actors.Event{Kind: actors.EventCheckpointCompleted, Time: at(2), Epoch: 1, Checkpoint: 1, Duration: time.Millisecond})
	want := []string{"job running", "timeline running", "checkpoint 1 in_progress", "checkpoint 1 completed"}
	for i, w := range want {
		u := <-ch // buffered: already there
		got := u.Kind + " " + u.State
		switch u.Kind {
		case monitor.UpdateTimeline:
			got = u.Kind + " " + u.Timeline.Kind
		case monitor.UpdateCheckpoint:
			got = u.Kind + " " + strconv.FormatUint(u.Checkpoint.ID, 10) + " " + u.Checkpoint.Status
		}
		if got != w {
			t.Errorf("update %d: %s, want %s", i, got, w)
		}
		if u.Epoch != 1 || u.State != monitor.StateRunning {
			t.Errorf("update %d: epoch %d state %s", i, u.Epoch, u.State)
		}
	}
	cancel()
	cancel() // again: nothing
	if _, ok := <-ch; ok {
		t.Error("the channel is open after cancel")
	}
	feed(actors.Event{Kind: actors.EventFinished, Time: at(3), Epoch: 1}) // no subscriber left: nothing to send to
}

// A subscriber that does not read never blocks the listener: the updates
// that do not fit in its buffer are dropped, the oldest kept, while another
// subscriber that reads gets them all.
func TestSlowSubscriberDoesNotBlock(t *testing.T) {
	m, feed := newMonitor(t, monitor.Options{})
	slow, cancelSlow := m.Subscribe()
	defer cancelSlow()
	fast, cancelFast := m.Subscribe()
	const n = 3 * monitor.SubscriberBuffer
	got := make(chan int)
	go func() {
		count, last := 0, uint64(0)
		for u := range fast { // until cancelFast closes it
			if u.Checkpoint.ID <= last {
				t.Errorf("the reading subscriber got checkpoint %d after %d", u.Checkpoint.ID, last)
			}
			count, last = count+1, u.Checkpoint.ID
		}
		got <- count
	}()
	for id := uint64(1); id <= n; id++ {
		feed(actors.Event{Kind: actors.EventCheckpointTriggered, Time: at(int(id)), Epoch: 1, Checkpoint: id})
	}
	// The listener returned although slow never read. fast got at least
	// a buffer's worth, in order, more if it kept up.
	cancelFast()
	if c := <-got; c < monitor.SubscriberBuffer || c > n {
		t.Errorf("the reading subscriber got %d updates", c)
	}
	if len(slow) != monitor.SubscriberBuffer {
		t.Fatalf("the slow subscriber holds %d updates, want %d", len(slow), monitor.SubscriberBuffer)
	}
	for id := uint64(1); id <= monitor.SubscriberBuffer; id++ {
		if u := <-slow; u.Checkpoint.ID != id {
			t.Fatalf("the slow subscriber's update %d is checkpoint %d: the oldest are kept", id, u.Checkpoint.ID)
		}
	}
}
