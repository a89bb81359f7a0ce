package monitor

import (
	"strings"
	"time"

	"github.com/snapflow/snapflow/actors"
)

// handle applies one event of the job of listener generation gen; it runs
// on the job actor.
func (m *Monitor) handle(e actors.Event, gen uint64) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started.IsZero() {
		m.started = e.Time
	}
	setState := func(s string) { m.setState(s, gen) }
	if e.Epoch > m.epoch {
		m.epoch = e.Epoch
	}
	switch e.Kind {
	case actors.EventCheckpointTriggered:
		m.triggered(e)
	case actors.EventCheckpointCompleted:
		m.completed(e)
	case actors.EventCheckpointAborted:
		m.aborted(e)
	case actors.EventTaskFailed:
		m.counts.TaskFailures++
		m.failures[cause(e.Cause)]++
		setState(StateRestoring)
		m.addTimeline(e)
	case actors.EventRestoring:
		m.counts.Restores++
		setState(StateRestoring)
		m.addTimeline(e)
	case actors.EventRunning:
		setState(StateRunning)
		m.addTimeline(e)
	case actors.EventFinished:
		setState(StateFinished)
		m.endInProgress(e.Time, "the job finished before the checkpoint's outcome was reported")
		m.addTimeline(e)
	case actors.EventFailed:
		if e.Err != nil {
			m.failure = e.Err.Error()
		}
		setState(StateFailed)
		m.endInProgress(e.Time, "the job failed before the checkpoint's outcome was reported")
		m.addTimeline(e)
	case actors.EventNodeJoined:
		m.setNode(e.Node, "up")
		m.addTimeline(e)
	case actors.EventNodeLost:
		m.setNode(e.Node, "lost")
		m.addTimeline(e)
	case actors.EventPlaced:
		m.setPlacement(e.Placement)
		m.publish(Update{Kind: UpdateJob})
	}
}

// cause is the label of a failure cause; the runtime's own are kept as
// they are, an empty one is "other".
func cause(c actors.FailureCause) string {
	if c == "" {
		return string(actors.CauseOther)
	}
	return string(c)
}

// terminal says that a job in state s has ended.
func terminal(s string) bool { return s == StateFinished || s == StateFailed || s == StateStopped }

// setState moves the job to s, by an event of listener generation gen, and
// publishes the change. A job that ended stays ended, and an older
// generation's job (a program that stopped its job and started another)
// no longer moves the state.
func (m *Monitor) setState(s string, gen uint64) {
	if gen < m.gen || m.state == s && m.stateGen == gen || terminal(m.state) && m.stateGen == gen {
		return
	}
	m.state, m.stateGen = s, gen
	m.publish(Update{Kind: UpdateJob})
}

func (m *Monitor) addTimeline(e actors.Event) {
	t := TimelineEntry{Time: e.Time, Kind: e.Kind.String(), Epoch: e.Epoch, Task: e.Task, Node: e.Node}
	switch e.Kind {
	case actors.EventRestoring, actors.EventRunning:
		t.Checkpoint, t.Savepoint = e.Checkpoint, e.Savepoint
	case actors.EventTaskFailed:
		t.Cause = cause(e.Cause)
	}
	if e.Err != nil {
		t.Error = e.Err.Error()
	}
	p := m.timeline.push(t)
	cp := *p
	m.publish(Update{Kind: UpdateTimeline, Timeline: &cp})
}

// checkpointFor returns the newest kept entry of checkpoint e.Checkpoint
// that is still in progress, or a new one, whose trigger was not seen: took
// before e (zero: unknown).
func (m *Monitor) checkpointFor(e actors.Event, took time.Duration) *Checkpoint {
	if c := m.findCheckpoint(e.Checkpoint); c != nil && c.Status == StatusInProgress {
		return c
	}
	c := Checkpoint{ID: e.Checkpoint, Savepoint: e.Savepoint, Status: StatusInProgress}
	if took > 0 {
		c.Triggered = e.Time.Add(-took)
	}
	return m.history.push(c)
}

func (m *Monitor) triggered(e actors.Event) {
	c := m.history.push(Checkpoint{ID: e.Checkpoint, Savepoint: e.Savepoint, Status: StatusInProgress,
		Final: e.Final, Epoch: e.Epoch, Triggered: e.Time})
	m.publishCheckpoint(c)
}

func (m *Monitor) completed(e actors.Event) {
	c := m.checkpointFor(e, e.Duration)
	c.Status, c.Final, c.Epoch, c.Ended = StatusCompleted, e.Final, e.Epoch, e.Time
	if e.Savepoint != "" {
		c.Savepoint = e.Savepoint
	}
	c.DurationSeconds, c.Bytes, c.UploadedBytes, c.InFlightBytes, c.Settled = e.Duration.Seconds(), e.Bytes, e.Uploaded, e.InFlight, e.Settled
	c.AlignmentSeconds, c.UploadSeconds = e.Alignment.Seconds(), e.Upload.Seconds()
	c.Tasks = make([]TaskCheckpoint, len(e.Tasks))
	for i, t := range e.Tasks {
		c.Tasks[i] = TaskCheckpoint{Task: t.Task, Bytes: t.Bytes, UploadedBytes: t.Uploaded, InFlightBytes: t.InFlight, AlignmentSeconds: t.Alignment.Seconds(),
			SyncSeconds: t.Sync.Seconds(), AsyncSeconds: t.Async.Seconds()}
	}
	m.counts.Completed++
	m.last = &LastCheckpoint{ID: e.Checkpoint, Time: e.Time, Savepoint: c.Savepoint}
	m.hist.observe(e, m.aligns)
	m.publishCheckpoint(c)
}

func (m *Monitor) aborted(e actors.Event) {
	c := m.checkpointFor(e, 0)
	c.Status, c.Final, c.Epoch, c.Ended = StatusAborted, e.Final, e.Epoch, e.Time
	if e.Savepoint != "" {
		c.Savepoint = e.Savepoint
	}
	c.DurationSeconds = since(c.Triggered, e.Time)
	if e.Err != nil {
		c.Error = e.Err.Error()
	}
	if e.Declined {
		c.Status, c.Task = StatusDeclined, e.Task
		m.counts.Declined++
	} else {
		m.counts.Aborted++
	}
	m.publishCheckpoint(c)
}

// endInProgress aborts the kept checkpoints still in progress when the job
// ends: no outcome will be reported for them. They are not counted.
func (m *Monitor) endInProgress(at time.Time, why string) {
	for i := range m.history.len() {
		if c := m.history.at(i); c.Status == StatusInProgress {
			c.Status, c.Ended, c.Error = StatusAborted, at, why
			c.DurationSeconds = since(c.Triggered, at)
			m.publishCheckpoint(c)
		}
	}
}

func (m *Monitor) publishCheckpoint(c *Checkpoint) {
	if len(m.subs) == 0 {
		return
	}
	cp := c.clone()
	m.publish(Update{Kind: UpdateCheckpoint, Checkpoint: &cp})
}

// setNode records worker ("id@host:port") in state. Lost workers beyond
// Options.Timeline are forgotten, oldest first.
func (m *Monitor) setNode(worker, state string) {
	id, addr, _ := strings.Cut(worker, "@")
	found := false
	for i := range m.nodes {
		if m.nodes[i].ID == id {
			m.nodes[i].Address, m.nodes[i].State = addr, state
			found = true
		}
	}
	if !found {
		m.nodes = append(m.nodes, Node{ID: id, Address: addr, State: state})
	}
	lost := 0
	for _, n := range m.nodes {
		if n.State == "lost" {
			lost++
		}
	}
	for i := 0; lost > m.opts.Timeline && i < len(m.nodes); {
		if m.nodes[i].State == "lost" {
			m.nodes = append(m.nodes[:i], m.nodes[i+1:]...)
			lost--
			continue
		}
		i++
	}
}

// setPlacement reads "map#0,sum#1 -> w1@host:port; ..." (see
// actors.Event.Placement).
func (m *Monitor) setPlacement(p string) {
	clear(m.placed)
	for part := range strings.SplitSeq(p, ";") {
		tasks, worker, ok := strings.Cut(part, "->")
		if !ok {
			continue
		}
		id, _, _ := strings.Cut(strings.TrimSpace(worker), "@")
		for t := range strings.SplitSeq(tasks, ",") {
			if t = strings.TrimSpace(t); t != "" {
				m.placed[t] = id
			}
		}
	}
}

// since is the seconds from t to now, 0 when t is unknown.
func since(t, now time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return now.Sub(t).Seconds()
}

// aligns reports whether task has several input channels, under m.mu;
// before Attach every task is taken to.
func (m *Monitor) aligns(task string) bool {
	if m.topo == nil {
		return true
	}
	i, ok := m.topo.byTask[task]
	return !ok || m.topo.inputs[i] > 1
}
