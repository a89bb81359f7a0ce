package coordinator

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// checker follows the actions of one Coordinator and fails on any broken
// invariant.
type checker struct {
	t       *testing.T
	tasks   []string
	cfg     Config
	lastID  uint64
	pending uint64 // triggered without an outcome yet, 0 for none
	writing bool
	final   bool // the pending checkpoint is final
	done    bool // a final checkpoint completed since the last Reset
	failed  bool // FailJob since the last Reset
	open    map[uint64]bool
	stats   Stats
	log     strings.Builder
}

func (k *checker) fatalf(format string, args ...any) {
	k.t.Helper()
	k.t.Fatalf("%s\nlog:\n%s", fmt.Sprintf(format, args...), k.log.String())
}

func (k *checker) check(c *Coordinator, step string, acts []Action) {
	k.t.Helper()
	fmt.Fprintf(&k.log, "%s\n", step)
	for _, a := range acts {
		fmt.Fprintf(&k.log, "  %s\n", a)
		k.action(a)
	}
	if id, ok := c.Pending(); ok != (k.pending != 0) || id != k.pending {
		k.fatalf("Pending() = %d, %v; checker has %d", id, ok, k.pending)
	}
	s := c.Stats()
	if s.Completed != k.stats.Completed || s.Aborted != k.stats.Aborted || s.Triggered != k.stats.Triggered {
		k.fatalf("Stats() = %+v, actions counted %+v", s, k.stats)
	}
	if tol := k.cfg.TolerableFailures; tol >= 0 && s.ConsecutiveFailures > uint64(tol)+1 {
		k.fatalf("ConsecutiveFailures %d with %d tolerated", s.ConsecutiveFailures, tol)
	}
}

func (k *checker) action(a Action) {
	k.t.Helper()
	switch a.Kind {
	case Trigger:
		switch {
		case k.pending != 0:
			k.fatalf("Trigger %d while %d is pending", a.Checkpoint, k.pending)
		case a.Checkpoint <= k.lastID:
			k.fatalf("Trigger %d after %d", a.Checkpoint, k.lastID)
		case k.done || k.failed:
			k.fatalf("Trigger after the final checkpoint or FailJob")
		}
		k.pending, k.lastID, k.final, k.writing = a.Checkpoint, a.Checkpoint, a.Final, false
		k.stats.Triggered++
	case WriteManifest:
		if a.Checkpoint != k.pending || k.writing || a.Final != k.final || len(a.Acks) != len(k.tasks) {
			k.fatalf("unexpected %v", a)
		}
		for i, ack := range a.Acks {
			if ack.GetTaskId() != k.tasks[i] || ack.GetCheckpointId() != a.Checkpoint {
				k.fatalf("WriteManifest ack %d is %v", i, ack)
			}
		}
		k.writing = true
	case Completed:
		if a.Checkpoint != k.pending || !k.writing || a.Final != k.final {
			k.fatalf("Completed %d: pending %d, writing %v", a.Checkpoint, k.pending, k.writing)
		}
		k.pending, k.done = 0, a.Final
		k.stats.Completed++
	case Aborted:
		if a.Checkpoint != k.pending || a.Reason == "" {
			k.fatalf("Aborted %d: pending %d", a.Checkpoint, k.pending)
		}
		k.pending = 0
		k.stats.Aborted++
	case RequestDone:
		if !k.open[a.Request] {
			k.fatalf("RequestDone for request %d, not open", a.Request)
		}
		delete(k.open, a.Request)
		if a.Err != nil && !errors.Is(a.Err, ErrAborted) && !errors.Is(a.Err, ErrFailover) {
			k.fatalf("RequestDone error %v", a.Err)
		}
	case InDoubt:
		if a.Checkpoint != k.pending || !k.writing || a.Final != k.final {
			k.fatalf("InDoubt %d: pending %d, writing %v", a.Checkpoint, k.pending, k.writing)
		}
		for _, r := range a.Requests {
			if !k.open[r] {
				k.fatalf("InDoubt hands over request %d, not open", r)
			}
			delete(k.open, r)
		}
		k.pending = 0
	case FailJob:
		if k.failed || k.cfg.TolerableFailures < 0 || !errors.Is(a.Err, ErrTooManyFailures) {
			k.fatalf("unexpected %v", a)
		}
		k.failed = true
	default:
		k.fatalf("unknown action %v", a)
	}
}

func randomConfig(r *rand.Rand) Config {
	return Config{
		Interval:          time.Duration(r.IntN(4)) * time.Second,
		Timeout:           time.Duration(r.IntN(8)) * time.Second,
		MinPause:          time.Duration(r.IntN(3)) * time.Second,
		TolerableFailures: r.IntN(5) - 1,
	}
}

// runRandom drives one coordinator with random events and returns the log.
func runRandom(t *testing.T, seed uint64, steps int) string {
	r := rand.New(rand.NewPCG(seed, 0))
	tasks := []string{"a", "b", "c"}[:r.IntN(4)]
	cfg := randomConfig(r)
	c := New(cfg, tasks, 1+r.Uint64N(100))
	k := &checker{t: t, tasks: tasks, cfg: cfg, lastID: c.NextID() - 1, open: map[uint64]bool{}}
	fmt.Fprintf(&k.log, "seed %d: %+v tasks %v\n", seed, cfg, tasks)
	now := t0
	var req uint64
	pickID := func() uint64 {
		id, _ := c.Pending()
		return id + uint64(r.IntN(3)) - 1
	}
	pickTask := func() string {
		if len(tasks) == 0 || r.IntN(10) == 0 {
			return "z"
		}
		return tasks[r.IntN(len(tasks))]
	}
	for range steps {
		now = now.Add(time.Duration(r.IntN(1500)) * time.Millisecond)
		var step string
		var acts []Action
		switch n := r.IntN(100); {
		case n < 25:
			next, ok := c.NextTrigger()
			if ok && now.Before(next) && r.IntN(2) == 0 {
				now = next // fire the shell's timer
			}
			step, acts = "tick", c.Tick(now)
			if ok && now.Before(next) && len(acts) != 0 {
				k.fatalf("Tick before NextTrigger %v did %v", next, acts)
			}
		case n < 35:
			req++
			k.open[req] = true
			step, acts = fmt.Sprintf("request %d", req), c.RequestCheckpoint(now, req)
		case n < 38:
			step, acts = "finish", c.Finish(now)
		case n < 70:
			id, task := pickID(), pickTask()
			step, acts = fmt.Sprintf("ack %d %s", id, task), c.Ack(now, ack(id, task))
		case n < 77:
			id, task := pickID(), pickTask()
			step, acts = fmt.Sprintf("decline %d %s", id, task), c.Decline(now, decline(id, task, "no"))
		case n < 95:
			var err error
			if r.IntN(4) == 0 {
				err = errors.New("store down")
			}
			id := pickID()
			step, acts = fmt.Sprintf("manifest %d %v", id, err), c.ManifestWritten(now, id, err)
		default:
			step, acts = "reset", c.Reset(now)
			k.failed, k.done = false, false
		}
		k.check(c, step, acts)
	}
	k.check(c, "reset", c.Reset(now))
	if len(k.open) != 0 || k.pending != 0 {
		k.fatalf("after Reset: open requests %v, pending %d", k.open, k.pending)
	}
	return k.log.String()
}

func TestRandomInvariants(t *testing.T) {
	for seed := range uint64(300) {
		runRandom(t, seed, 400)
	}
}

func TestRandomDeterministic(t *testing.T) {
	for seed := range uint64(20) {
		if a, b := runRandom(t, seed, 300), runRandom(t, seed, 300); a != b {
			t.Fatalf("seed %d: two runs differ", seed)
		}
	}
}
