package actors_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
	"github.com/snapflow/snapflow/topology/window"
)

const (
	hopEvents = 60_000
	hopKeys   = 7
	hopWindow = 100 * time.Millisecond
)

// hopTime is value v's event time: v ms. A source task reads its split in
// order, so with no out-of-orderness no record is late without a failure.
func hopTime(v int64) time.Time { return time.Unix(0, v*int64(time.Millisecond)).UTC() }

type hopKey struct {
	Key int64
	End time.Time
}

// hopSink collects the windows a hopJob emits and its late records.
type hopSink struct {
	mu   sync.Mutex
	got  map[hopKey]int64
	late int
}

func newHopSink() *hopSink { return &hopSink{got: map[hopKey]int64{}} }

func (s *hopSink) window(r window.Result[int64, int64]) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := hopKey{r.Key, r.Window.End.UTC()}
	s.got[k] = max(s.got[k], r.Value)
	return nil
}

func (s *hopSink) lateRecord(int64) error {
	s.mu.Lock()
	s.late++
	s.mu.Unlock()
	return nil
}

// hopReference is what a failure-free run emits: each key's count per
// window.
func hopReference() map[hopKey]int64 {
	ref := map[hopKey]int64{}
	for v := range int64(hopEvents) {
		ref[hopKey{v % hopKeys, hopTime(v).Truncate(hopWindow).Add(hopWindow)}]++
	}
	return ref
}

// hopJob is source -> rebalance -> map -> keyBy -> window (event-time
// tumbling counts), every operator at parallelism p, with the window's
// late records in a side output.
func hopJob(p int, sink *hopSink) *topology.Graph {
	g := topology.New("hop")
	src := testsrc.GatedSplits(g, "source", hopEvents, func(i int64) int64 { return i }, testsrc.NewGate(hopEvents), topology.Parallelism(p),
		topology.WithWatermarks(topology.WatermarkStrategy[int64]{Timestamp: hopTime}))
	mapped := topology.Map(topology.Rebalance(src), "map", func(v int64) int64 { return v }, topology.Parallelism(p))
	late := topology.NewSideOutput[int64]("late")
	counts := window.Count(window.Of(topology.KeyBy(mapped, func(v int64) int64 { return v % hopKeys }), window.Tumbling(hopWindow)).LateTo(late),
		"window", topology.Parallelism(p))
	topology.Sink(counts, "sink", sink.window)
	topology.Sink(topology.SideOutputOf(counts, late), "late", sink.lateRecord)
	return g
}

// TestRescaleInFlightUpstreamOnTime runs hopJob at parallelism 2 without a
// failure, with unaligned checkpoints while map#0 holds its first batch
// until both sources queue output for it, so that the checkpoints store
// records in flight on source -> map; its output is the reference, with no
// late record. Then it starts the job from such a checkpoint at
// parallelism 3: either the restore is refused naming that edge (or the
// edge into the window, when records in flight there could be late), or no
// record is late and every window it emits has the count of the
// failure-free run.
func TestRescaleInFlightUpstreamOnTime(t *testing.T) {
	ctx := context.Background()
	ref := hopReference()
	store := snapshots.NewMem()
	var mu sync.Mutex
	var with []uint64
	hold, release := holdUntilFull("map#0", "source#0", "source#1")
	first := newHopSink()
	job, err := actors.Start(ctx, hopJob(2, first), hold, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointMode(actors.CheckpointUnaligned), actors.WithCheckpointInterval(2*time.Millisecond), actors.WithRetainedCheckpoints(1000),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && e.InFlight > 0 {
				mu.Lock()
				with = append(with, e.Checkpoint)
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	release(job)
	if err := job.Wait(); err != nil {
		t.Fatal(err)
	}
	checkHop(t, "the failure-free run", first, ref, true, false)
	mu.Lock()
	id, upstream := firstInFlightTo(t, store, with, "map")
	mu.Unlock()
	if upstream == 0 {
		t.Fatalf("none of checkpoints %v stored a record in flight into map", with)
	}
	second := newHopSink()
	err = actors.Run(ctx, hopJob(3, second), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointMode(actors.CheckpointUnaligned), actors.WithCheckpoint(id), actors.WithCheckpointInterval(2*time.Millisecond))
	switch {
	case errors.Is(err, topology.ErrRestoreRefused) && (strings.Contains(err.Error(), `the channels from operator "source" to operator "map"`) ||
		strings.Contains(err.Error(), `operator "window": the checkpoint holds records in flight`)):
		// Refused before any record flowed, naming the edge whose records
		// could become late: upstream (source -> map) or straight into the
		// rescaled window, whichever the checkpoint's in-flight records hit.
		t.Logf("checkpoint %d (%d records in flight into map) refused, naming the edge: %v", id, upstream, err)
	case err != nil:
		t.Fatalf("rescale from unaligned checkpoint %d: %v", id, err)
	default:
		t.Logf("checkpoint %d held %d records in flight into map; rescaled 2 -> 3, %d windows emitted after it", id, upstream, len(second.got))
		checkHop(t, "the rescaled run", second, ref, false, false)
	}
}

// firstInFlightTo returns the first of checkpoints ids that holds records
// in flight into operator to, and how many.
func firstInFlightTo(t *testing.T, store snapshots.Store, ids []uint64, to string) (uint64, int) {
	t.Helper()
	for _, c := range ids {
		rp, err := snapshots.NewCheckpoints(store, "hop", nil).LoadCheckpoint(context.Background(), c)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, st := range rp.States {
			for _, it := range st.InFlight {
				if it.ToOperatorId == to && !it.IsWatermark {
					n += len(it.Ends)
				}
			}
		}
		if n > 0 {
			return c, n
		}
	}
	return 0, 0
}

// checkHop fails t when the sink saw a late record, or a window whose
// count differs from ref's, or (complete) not every window of ref. With
// atLeast, a window may count more (the highest count of a window emitted
// more than once counts), and records may be late: a record the sources
// read again whose window had fired before the checkpoint is a duplicate,
// late where it was counted; one that was not counted makes its window's
// count fall short.
func checkHop(t *testing.T, run string, s *hopSink, ref map[hopKey]int64, complete, atLeast bool) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.late > 0 && !atLeast {
		t.Fatalf("%s: %d records late", run, s.late)
	}
	wrong := 0
	for k, n := range s.got {
		if n != ref[k] && (!atLeast || n < ref[k]) {
			wrong++
		}
	}
	if wrong > 0 {
		t.Fatalf("%s: %d of %d windows emitted with another count than without the failure", run, wrong, len(s.got))
	}
	if complete && len(s.got) != len(ref) {
		t.Fatalf("%s: %d windows emitted, want %d", run, len(s.got), len(ref))
	}
}

// TestRescaleAtLeastOnceOnTime runs hopJob at parallelism 2 without a
// failure, with at-least-once checkpoints, and starts it from one taken
// half-way at parallelism 3 and 4. At 3, either the restore is refused
// naming the window operator (a rescaled task would resume above the
// watermark of a stored task whose key groups it takes, and the records
// the sources read again are not in the checkpoint), or no window counts
// fewer records than without the failure (at least once: more is allowed,
// and a duplicate may be late). At 4, each new task takes the key groups
// of one stored task: it is restored, and no window counts fewer.
func TestRescaleAtLeastOnceOnTime(t *testing.T) {
	ctx := context.Background()
	ref := hopReference()
	store := snapshots.NewMem()
	var mu sync.Mutex
	var ids []uint64
	first := newHopSink()
	err := actors.Run(ctx, hopJob(2, first), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointMode(actors.CheckpointAtLeastOnce), actors.WithCheckpointInterval(2*time.Millisecond), actors.WithRetainedCheckpoints(1000),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && !e.Final {
				mu.Lock()
				ids = append(ids, e.Checkpoint)
				mu.Unlock()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	checkHop(t, "the failure-free run", first, ref, true, false)
	mu.Lock()
	defer mu.Unlock()
	if len(ids) == 0 {
		t.Fatal("no checkpoint completed before the end")
	}
	id := ids[len(ids)/2]
	for _, p := range []int{3, 4} {
		second := newHopSink()
		err = actors.Run(ctx, hopJob(p, second), actors.WithStore(store), actors.WithLogger(testLogger(t)),
			actors.WithCheckpointMode(actors.CheckpointAtLeastOnce), actors.WithCheckpoint(id), actors.WithCheckpointInterval(2*time.Millisecond),
			actors.WithRetainedCheckpoints(1000)) // keeps checkpoint id for the next p
		switch {
		case p == 3 && errors.Is(err, topology.ErrRestoreRefused) && strings.Contains(err.Error(), `operator "window": the checkpoint was taken at least once`):
			t.Logf("checkpoint %d refused at parallelism 3, naming the operator: %v", id, err)
		case err != nil:
			// 2 -> 4: each new task takes the key groups of one stored
			// task, and resumes from its watermark.
			t.Fatalf("rescale 2 -> %d from at-least-once checkpoint %d: %v", p, id, err)
		default:
			t.Logf("rescaled 2 -> %d from checkpoint %d (of %d), %d windows emitted after it", p, id, len(ids), len(second.got))
			checkHop(t, "the rescaled run", second, ref, false, true)
		}
	}
}
