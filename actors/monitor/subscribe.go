package monitor

import "sync"

type subscriber struct {
	ch chan Update
}

// Subscribe returns a channel of live updates and a function that cancels
// the subscription and closes the channel (calling it again does nothing).
// The job never waits for the reader: an update that does not fit in the
// channel's buffer (SubscriberBuffer) is dropped for this subscriber, so a
// reader that falls behind should reload the state from Job, Checkpoints and
// Timeline.
func (m *Monitor) Subscribe() (<-chan Update, func()) {
	s := &subscriber{ch: make(chan Update, SubscriberBuffer)}
	m.mu.Lock()
	m.subs[s] = struct{}{}
	m.mu.Unlock()
	var once sync.Once
	return s.ch, func() {
		once.Do(func() {
			m.mu.Lock()
			delete(m.subs, s)
			close(s.ch)
			m.mu.Unlock()
		})
	}
}

// publish sends u to every subscriber that has room, under m.mu: the
// closing of a channel by a cancel cannot race with a send.
func (m *Monitor) publish(u Update) {
	if len(m.subs) == 0 {
		return
	}
	u.State, u.Epoch = m.state, m.epoch
	for s := range m.subs {
		select {
		case s.ch <- u:
		default: // dropped for this subscriber
		}
	}
}
