package actors_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// keyRepeats is a slog handler that records every line on which a key
// occurs twice: the keys of the logger (With) and of the call together,
// groups spelled out as a text handler prints them.
type keyRepeats struct {
	mu     *sync.Mutex
	lines  *int
	repeat *[]string
	keys   []string // of With, qualified by group
	group  string
}

func newKeyRepeats() keyRepeats {
	return keyRepeats{mu: &sync.Mutex{}, lines: new(int), repeat: new([]string)}
}

func (h keyRepeats) Enabled(context.Context, slog.Level) bool { return true }

func (h keyRepeats) Handle(_ context.Context, r slog.Record) error {
	keys := slices.Clone(h.keys)
	r.Attrs(func(a slog.Attr) bool { keys = appendKeys(keys, h.group, a); return true })
	seen := map[string]bool{}
	var twice []string
	for _, k := range keys {
		if seen[k] {
			twice = append(twice, k)
		}
		seen[k] = true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	*h.lines++
	if len(twice) > 0 {
		*h.repeat = append(*h.repeat, fmt.Sprintf("%s %q: %v twice (keys %v)", r.Level, r.Message, twice, keys))
	}
	return nil
}

func (h keyRepeats) WithAttrs(as []slog.Attr) slog.Handler {
	h.keys = slices.Clone(h.keys)
	for _, a := range as {
		h.keys = appendKeys(h.keys, h.group, a)
	}
	return h
}

func (h keyRepeats) WithGroup(name string) slog.Handler {
	h.group += name + "."
	return h
}

func appendKeys(keys []string, group string, a slog.Attr) []string {
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			keys = appendKeys(keys, group+a.Key+".", g)
		}
		return keys
	}
	if a.Key == "" {
		return keys
	}
	return append(keys, group+a.Key)
}

// report returns the lines logged and those that repeated a key.
func (h keyRepeats) report() (int, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return *h.lines, slices.Clone(*h.repeat)
}

// TestLogAttributesOnce: no line a job logs carries an attribute twice (on
// main, every line of the snapshots package said job= twice: "snapshots:
// lease acquired" job=… job=…) through a run with a lease, checkpoints, a
// failure and its restore, a savepoint and a stop.
func TestLogAttributesOnce(t *testing.T) {
	h := newKeyRepeats()
	gp := testsrcGate(1_000_000)
	g := topology.New("logkeys")
	fail := newFailures(300)
	topology.Sink(keyedSum(topology.KeyBy(gp.source(g), func(v int64) int64 { return v % 4 }), "sum", 2, fail), "sink", func(kv) error { return nil })
	var ev events
	sub := ev.subscribe()
	j, err := actors.Start(context.Background(), g, actors.WithStore(snapshots.NewMem()), actors.WithLogger(slog.New(h)),
		actors.WithCheckpointInterval(0), actors.WithListener(ev.listen),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond, MaxFailures: 5, Window: time.Minute}))
	if err != nil {
		t.Fatal(err)
	}
	gp.g.SetLimit(200)
	gp.g.WaitReached(t, 200)
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	gp.g.SetLimit(1000) // past the failure at 300
	waitFor(t, sub, "the failure", func(e actors.Event) bool { return e.Kind == actors.EventTaskFailed })
	waitFor(t, sub, "the job running again", func(e actors.Event) bool { return e.Kind == actors.EventRunning })
	gp.g.WaitReached(t, 1000)
	if _, err := j.Savepoint(context.Background(), "sp"); err != nil {
		t.Fatal(err)
	}
	stopJob(t, j)
	lines, repeats := h.report()
	if lines == 0 {
		t.Fatal("the job logged nothing")
	}
	for _, r := range repeats {
		t.Error(r)
	}
}

// TestClusterLogAttributesOnce: the same for a coordinator and two workers
// running a job to its end (on main, the worker logged job= twice).
func TestClusterLogAttributesOnce(t *testing.T) {
	inProcessCluster(t)
	h := newKeyRepeats()
	job := clusterJob(20_000, 16)
	j, err := actors.Start(context.Background(), job(), cluster.WithCoordinator(cluster.Coordinator{Workers: 2, Store: t.TempDir(), Secret: testSecret}),
		actors.WithCheckpointInterval(20e6), actors.WithLogger(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			err := cluster.ServeWorker(ctx, cluster.Worker{Join: j.Address(), Slots: 6, Jobs: []func() *topology.Graph{job}, Logger: slog.New(h), Secret: testSecret})
			if err != nil && ctx.Err() == nil {
				t.Errorf("worker: %v", err)
			}
		})
	}
	if err := waitJob(t, j); err != nil {
		t.Fatalf("job: %v", err)
	}
	cancel()
	wg.Wait()
	lines, repeats := h.report()
	if lines == 0 {
		t.Fatal("the nodes logged nothing")
	}
	for _, r := range repeats {
		t.Error(r)
	}
}
