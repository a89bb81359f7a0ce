package monitor_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/monitor"
	"github.com/snapflow/snapflow/snapshots"
)

// Readers (status, history, timeline, scrapes, subscriptions) run while a
// real job and a second goroutine feed events; run with -race.
func TestConcurrentReadersAndEvents(t *testing.T) {
	reg := prometheus.NewRegistry()
	mon, err := monitor.New(monitor.Options{Registry: reg, History: 8, Timeline: 8})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The job's listener also takes the second goroutine's events: a second
	// Listener would be a newer job's, whose events alone move the state.
	feed := mon.Listener()
	j, err := actors.Start(ctx, testGraph("racy", records), actors.WithStore(snapshots.NewMem()),
		actors.WithCheckpointInterval(time.Millisecond), actors.WithListener(feed))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var reads atomic.Int64
	loop := func(f func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				f()
				reads.Add(1)
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	loop(func() { mon.Attach(j) })
	loop(func() { _ = mon.Job() })
	loop(func() { _ = mon.Checkpoints(3); _, _ = mon.Checkpoint(2) })
	loop(func() { _ = mon.Timeline(0) })
	loop(func() {
		if _, err := reg.Gather(); err != nil {
			t.Error(err)
		}
	})
	loop(func() {
		ch, cancel := mon.Subscribe()
		select {
		case <-ch:
		default:
		}
		cancel()
	})
	loop(func() {
		feed(actors.Event{Kind: actors.EventNodeJoined, Epoch: 1, Node: "w@h:1"})
		feed(actors.Event{Kind: actors.EventNodeLost, Epoch: 1, Node: "w@h:1"})
	})
	werr := j.Wait()
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatal(werr)
	}
	if reads.Load() < 7 {
		t.Errorf("%d reads", reads.Load())
	}
	if st := mon.Job(); st.State != monitor.StateFinished || st.Counts.Completed == 0 {
		t.Errorf("status after the run: %s, %+v", st.State, st.Counts)
	}
}
