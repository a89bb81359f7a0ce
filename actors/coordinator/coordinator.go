package coordinator

import (
	"fmt"
	"time"

	"github.com/snapflow/snapflow/messages"
)

// Coordinator is the checkpoint coordinator's state machine. It is not safe
// for concurrent use; the actor shell steps it from its own mailbox.
type Coordinator struct {
	cfg    Config
	tasks  []string
	index  map[string]int
	nextID uint64

	// started is set by the first step that carries a time; lastTrigger and
	// lastEnd are meaningful only then.
	started     bool
	lastTrigger time.Time
	lastEnd     time.Time

	pending *pending
	// queued are manual requests waiting for the next checkpoint.
	queued []uint64
	// savepoints are savepoint requests waiting, each for a checkpoint of
	// its own.
	savepoints []uint64

	finishing bool   // Finish was called: periodic checkpoints stop
	finalDone bool   // the final checkpoint completed
	finalID   uint64 // its id
	failed    bool   // FailJob was emitted; no trigger until Reset

	stats Stats
}

// pending is the checkpoint in flight.
type pending struct {
	id        uint64
	final     bool
	triggered time.Time
	acks      []*messages.AckCheckpoint // by task index
	acked     int
	writing   bool     // WriteManifest was emitted
	requests  []uint64 // manual requests this checkpoint answers
	savepoint uint64   // the savepoint request this checkpoint is for (0: none)
}

// Stats counts the coordinator's outcomes.
type Stats struct {
	Triggered uint64
	Completed uint64
	// Aborted counts every abort, including those of Reset.
	Aborted uint64
	// ConsecutiveFailures counts failed checkpoints since the last completed
	// one (aborts by Reset are not failures).
	ConsecutiveFailures uint64
	// LastCompleted is the id of the newest completed checkpoint, 0 for none.
	LastCompleted uint64
}

// New returns a Coordinator for a job whose tasks (every task that must ack,
// each once) are given in manifest order. Checkpoint ids start at nextID;
// 0 is taken as 1. New panics if cfg is invalid or a task id repeats: call
// cfg.Validate first.
func New(cfg Config, tasks []string, nextID uint64) *Coordinator {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		if _, dup := index[t]; dup {
			panic(fmt.Sprintf("coordinator: task %q listed twice", t))
		}
		index[t] = i
	}
	if nextID == 0 {
		nextID = 1
	}
	return &Coordinator{
		cfg:    cfg.withDefaults(),
		tasks:  append([]string(nil), tasks...),
		index:  index,
		nextID: nextID,
	}
}

// Pending returns the id of the checkpoint in flight.
func (c *Coordinator) Pending() (id uint64, ok bool) {
	if c.pending == nil {
		return 0, false
	}
	return c.pending.id, true
}

// NextID returns the id the next checkpoint will get.
func (c *Coordinator) NextID() uint64 { return c.nextID }

// Stats returns the coordinator's counters.
func (c *Coordinator) Stats() Stats { return c.stats }

// NextTrigger returns when Tick next has something to do: trigger a
// checkpoint or time out the pending one. Tick before that time does
// nothing. Before the first step that carries a time it returns the zero
// time when checkpoints are periodic: Tick at once to start the clock.
func (c *Coordinator) NextTrigger() (time.Time, bool) {
	if !c.started {
		return time.Time{}, c.cfg.Interval > 0
	}
	if p := c.pending; p != nil {
		if p.writing {
			return time.Time{}, false
		}
		return p.triggered.Add(c.cfg.Timeout), true
	}
	if c.failed {
		return time.Time{}, false
	}
	return c.due()
}

// observe starts the clock at the first step.
func (c *Coordinator) observe(now time.Time) {
	if !c.started {
		c.started = true
		c.lastTrigger, c.lastEnd = now, now
	}
}

// due returns when the next checkpoint should be triggered, with none
// pending and no manual request queued.
// FinalRetryPause is the least time between a failed final checkpoint and
// its retry.
const FinalRetryPause = 50 * time.Millisecond

func (c *Coordinator) due() (time.Time, bool) {
	switch {
	case c.finishing && c.finalDone:
		return time.Time{}, false
	case c.finishing && c.stats.ConsecutiveFailures > 0:
		// A failed final checkpoint is retried after a pause, so that a
		// store that keeps failing is not hammered in a tight loop.
		return c.lastEnd.Add(max(c.cfg.MinPause, FinalRetryPause)), true
	case c.finishing:
		return c.lastEnd, true
	case c.cfg.Interval <= 0:
		return time.Time{}, false
	}
	t := c.lastTrigger.Add(c.cfg.Interval)
	if p := c.lastEnd.Add(c.cfg.MinPause); p.After(t) {
		t = p
	}
	return t, true
}
