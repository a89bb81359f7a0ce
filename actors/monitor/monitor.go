package monitor

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/internal/engine"
)

// ErrOption is wrapped by New's errors about Options.
var ErrOption = errors.New("monitor: invalid option")

// The defaults of Options.
const (
	DefaultHistory  = 200
	DefaultTimeline = 200
)

// SubscriberBuffer is how many updates a subscriber's channel holds; an
// update that does not fit is dropped for that subscriber.
const SubscriberBuffer = 256

// Options configure a Monitor.
type Options struct {
	// Registry receives the monitor's Prometheus collector. Nil: no
	// metrics. The global registry is used only when it is passed here.
	Registry prometheus.Registerer
	// History is how many checkpoints are kept, newest first (0: 200).
	History int
	// Timeline is how many failure, restore and node entries are kept
	// (0: 200).
	Timeline int
	// Job is the value of the metrics' job_name label and of JobStatus.Name;
	// "" takes the job's name from its plan at Attach.
	Job string
}

// Monitor keeps what a job reports: its state, checkpoint history, timeline
// and metrics. It is safe for concurrent use: the listener runs on the job
// actor, readers on any goroutine.
type Monitor struct {
	opts Options

	mu      sync.Mutex
	job     *actors.Job
	watched *actors.Job // the job whose end a goroutine waits for
	// Each Listener is a generation, numbered when it delivers its first
	// event: the listener of the job started last is the newest, and only
	// the newest moves the state. jobGen is the attached job's generation
	// (pendingGen: the next to start, when it was attached before its first
	// event), stateGen the one that set the state; started says that a
	// generation started since the last Attach.
	gen, jobGen, stateGen  uint64
	pendingGen, genStarted bool
	// carried are, by task id, what the jobs attached before counted, so
	// that the counters keep growing across a program's jobs.
	carried  map[string]actors.TaskMetrics
	topo     *topo
	name     string
	state    string
	epoch    uint64
	started  time.Time
	failure  string
	history  ring[Checkpoint]
	timeline ring[TimelineEntry]
	counts   Counts
	last     *LastCheckpoint
	failures map[string]uint64 // task failures by cause
	hist     histograms
	nodes    []Node
	placed   map[string]string // task id -> worker id (cluster)
	subs     map[*subscriber]struct{}
}

// New creates a Monitor and registers its collector on opts.Registry, if
// set. A registration error (for example a second Monitor on the same
// registry: a prometheus.AlreadyRegisteredError) is returned, wrapped.
func New(opts Options) (*Monitor, error) {
	if opts.History < 0 {
		return nil, fmt.Errorf("%w: History is %d, must not be negative", ErrOption, opts.History)
	}
	if opts.Timeline < 0 {
		return nil, fmt.Errorf("%w: Timeline is %d, must not be negative", ErrOption, opts.Timeline)
	}
	if opts.History == 0 {
		opts.History = DefaultHistory
	}
	if opts.Timeline == 0 {
		opts.Timeline = DefaultTimeline
	}
	m := &Monitor{
		opts:     opts,
		name:     opts.Job,
		state:    StateStarting,
		history:  newRing[Checkpoint](opts.History),
		timeline: newRing[TimelineEntry](opts.Timeline),
		failures: make(map[string]uint64),
		hist:     newHistograms(),
		placed:   make(map[string]string),
		subs:     make(map[*subscriber]struct{}),
	}
	if opts.Registry != nil {
		if err := opts.Registry.Register(&collector{m: m}); err != nil {
			return nil, fmt.Errorf("monitor: register the metrics on Options.Registry: %w", err)
		}
	}
	return m, nil
}

// Listener returns the function to pass to actors.WithListener. It returns
// quickly and never waits for a reader. Take a new one for every job
// started (a program that stops its job and starts it again, or at another
// parallelism): the job started with the newest listener moves the job's
// state, and an older job's late events no longer do.
func (m *Monitor) Listener() func(actors.Event) {
	var g uint64 // under m.mu
	return func(e actors.Event) {
		m.mu.Lock()
		if g == 0 {
			m.gen++
			g = m.gen
			if m.pendingGen {
				m.jobGen, m.pendingGen = g, false
				m.failure = ""
			} else {
				m.genStarted = true
			}
		}
		gen := g
		m.mu.Unlock()
		m.handle(e, gen)
	}
}

// Attach gives the monitor the job, once actors.Start has returned: its
// plan gives the operators, tasks and edges, and its counters are read when
// the metrics are scraped and the status is asked for. A job that ends
// without an event (it was stopped) moves to StateStopped when it is done;
// for that, Attach starts a goroutine that ends with the job. A nil job is
// ignored; a second Attach replaces the first.
func (m *Monitor) Attach(j *actors.Job) {
	if j == nil {
		return
	}
	t := newTopo(engine.PlanOf(j))
	m.mu.Lock()
	prev := m.job
	m.mu.Unlock()
	var final []actors.TaskMetrics
	if prev != nil && prev != j {
		final = prev.TaskMetrics()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.job != j {
		// The job started with the newest listener: it has delivered its
		// first event, or is yet to.
		if m.genStarted {
			m.jobGen, m.pendingGen = m.gen, false
			if m.job != nil {
				m.failure = ""
			}
		} else {
			m.pendingGen = true
		}
		m.genStarted = false
		m.carry(final)
	}
	m.job, m.topo = j, t
	if m.opts.Job == "" {
		m.name = engine.PlanOf(j).Job
	}
	if m.started.IsZero() {
		m.started = time.Now()
	}
	m.publish(Update{Kind: UpdateJob})
	if m.watched != j {
		m.watched = j
		go func() {
			<-j.Done()
			m.mu.Lock()
			defer m.mu.Unlock()
			m.ended(j)
		}()
	}
}

// ended records the end of job j, done, unless an event already did, under
// m.mu.
func (m *Monitor) ended(j *actors.Job) {
	if j != m.job {
		return
	}
	if m.pendingGen { // its listener never delivered an event: it is still the newest job
		m.gen++
		m.jobGen, m.pendingGen = m.gen, false
	}
	if m.jobGen < m.gen || terminal(m.state) && m.stateGen == m.jobGen {
		return
	}
	now := time.Now()
	err := j.Wait()
	e := TimelineEntry{Time: now, Kind: StateStopped, Epoch: m.epoch}
	switch {
	case err == nil: // finished without the event: not expected
		e.Kind = StateFinished
	case errors.Is(err, actors.ErrStopped):
	default:
		e.Kind, m.failure = StateFailed, err.Error()
	}
	if err != nil {
		e.Error = err.Error()
	}
	m.state, m.stateGen = e.Kind, m.jobGen
	m.endInProgress(now, "the job "+e.Kind+" before the checkpoint's outcome was reported")
	m.publish(Update{Kind: UpdateJob})
	m.timeline.push(e)
	m.publish(Update{Kind: UpdateTimeline, Timeline: &e})
}

// Checkpoints returns up to limit kept checkpoints, newest first; limit <= 0
// returns every kept one. The slice is never nil.
func (m *Monitor) Checkpoints(limit int) []Checkpoint {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.history.len()
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]Checkpoint, n)
	for i := range out {
		out[i] = m.history.at(i).clone()
	}
	return out
}

// Checkpoint returns the kept checkpoint id (the newest, if the id was
// used twice), and whether it is kept.
func (m *Monitor) Checkpoint(id uint64) (Checkpoint, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.findCheckpoint(id); c != nil {
		return c.clone(), true
	}
	return Checkpoint{}, false
}

// Timeline returns up to limit kept timeline entries, newest first; limit
// <= 0 returns every kept one. The slice is never nil.
func (m *Monitor) Timeline(limit int) []TimelineEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.timeline.len()
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]TimelineEntry, n)
	for i := range out {
		out[i] = *m.timeline.at(i)
	}
	return out
}

func (m *Monitor) findCheckpoint(id uint64) *Checkpoint {
	for i := range m.history.len() {
		if c := m.history.at(i); c.ID == id {
			return c
		}
	}
	return nil
}

func (c *Checkpoint) clone() Checkpoint {
	out := *c
	out.Tasks = append([]TaskCheckpoint{}, c.Tasks...)
	return out
}
