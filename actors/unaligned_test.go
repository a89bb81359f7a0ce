package actors_test

import (
	"context"
	"fmt"
	"hash/crc32"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/internal/testsrc"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// tallyJob is seenJob with a second keyed stage, "tally", that counts
// each value again and works hard per record: the stages before it are
// held back by credit, so that barriers have queued output and
// unprocessed input to overtake. Task seen#1 works hard too, so that the
// barriers from seen#0 reach relabel well before its own: an alignment
// there waits for seen#1's backlog.
func tallyJob(name string, n, keys int64, gate *testsrc.Gate, fail *armedFailures, tallyP int) *topology.Graph {
	return tallyJobWork(name, n, keys, gate, fail, tallyP, 40)
}

// tallyJobWork is tallyJob with tallyWork rounds of work per record in
// tally (tallyJob: 40).
func tallyJobWork(name string, n, keys int64, gate *testsrc.Gate, fail *armedFailures, tallyP, tallyWork int) *topology.Graph {
	g := topology.New(name)
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i + 1 }, gate, topology.Parallelism(3))
	count := func(stage string, work int) func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
		return func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			times := topology.MapOf[int64, int64](ks, "times")
			buf := make([]byte, 64)
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				if stage == "seen" && fail != nil && fail.armed.CompareAndSwap(true, false) {
					panic(fmt.Sprintf("injected failure in %s on record %d", ctx.TaskID(), v))
				}
				w := work
				if stage == "seen" && ctx.TaskID() == "seen#1" {
					w = 100 // a skewed input: relabel waits for this task's barriers
				}
				for range w { // a slow operator, whatever the machine's speed
					buf[0]++
					_ = crc32.ChecksumIEEE(buf)
				}
				c, _ := times.Get(v)
				times.Put(v, c+1)
				out.Emit(v)
				return nil
			}
		}
	}
	seen := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % keys }), "seen", count("seen", 0), topology.Parallelism(2))
	// A stateless stage between: its channel state is all it stores.
	relabel := topology.Filter(topology.Map(seen, "relabel", func(v int64) int64 { return v }), "keep", func(int64) bool { return true }, topology.Parallelism(1))
	tally := topology.Process(topology.KeyBy(relabel, func(v int64) int64 { return v % keys }), "tally", count("tally", tallyWork), topology.Parallelism(tallyP))
	// Rebalance, not forward: its channel state can be redistributed when
	// tally is rescaled.
	topology.Sink(topology.Rebalance(tally), "sink", func(int64) error { return nil })
	return g
}

// holdUntilBarrier returns faults that block task in its first batch
// until a barrier has been posted to it: the stages before it fill their
// credit and queue output, so that the first checkpoint's barriers have
// batches to overtake on every edge, however fast the machine. Only for
// modes where barriers overtake (unaligned, or a timeout): an aligned
// barrier would wait for the held task forever.
func holdUntilBarrier(task string) actors.Option {
	held := make(chan struct{})
	var once sync.Once
	return actorstest.WithFaults(&actorstest.Faults{
		Process: func(tk string) {
			if tk == task {
				<-held
			}
		},
		Priority: func(tk string, msg any) {
			if _, ok := msg.(*messages.Barrier); ok && tk == task {
				once.Do(func() { close(held) })
			}
		},
	})
}

// holdUntilFull blocks task in its first batch until every one of
// upstream queues output for lack of credit: the channels into task are
// then full, and the checkpoints pending meanwhile (stuck at task) or
// triggered then find records to overtake, however fast or busy the
// machine. Call the returned function with the started job; it returns at
// once, releases the task from a goroutine, and returns a channel closed
// then. Only for modes where barriers overtake (unaligned, or a timeout).
func holdUntilFull(task string, upstream ...string) (actors.Option, func(j *actors.Job) <-chan struct{}) {
	release := make(chan struct{})
	opt := actorstest.WithFaults(&actorstest.Faults{Process: func(tk string) {
		if tk == task {
			<-release
		}
	}})
	return opt, func(j *actors.Job) <-chan struct{} {
		go func() {
			defer close(release)
			deadline := time.Now().Add(time.Minute)
			for !queuing(j, upstream...) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // polls a condition; no push signal exists
			}
		}()
		return release
	}
}

// armedFailures fails the next record "seen" processes once armed.
type armedFailures struct{ armed atomic.Bool }

// TestUnalignedExactlyOnce runs tallyJob with a checkpoint every 2ms,
// unaligned, and fails a task just after each of the first three
// checkpoints that stored records in flight completes: the restores
// replay channel state, and at the end both keyed stages have counted
// each value exactly once. The same job aligned gives the same counts.
// "tally" holds its first batch until the channels into it are full, so
// that the checkpoints meanwhile store records in flight.
func TestUnalignedExactlyOnce(t *testing.T) {
	for _, mode := range []actors.CheckpointMode{actors.CheckpointUnaligned, actors.CheckpointAligned} {
		t.Run(mode.String(), func(t *testing.T) { testExactlyOnce(t, mode, 0) })
	}
	// Aligned, switched to unaligned where an alignment waits 1ms.
	t.Run("aligned-timeout", func(t *testing.T) { testExactlyOnce(t, actors.CheckpointAligned, time.Millisecond) })
}

func testExactlyOnce(t *testing.T, mode actors.CheckpointMode, timeout time.Duration) {
	const n, keys = 30_000, 64
	store := snapshots.NewMem()
	fail := &armedFailures{}
	var failed atomic.Int64
	var ev events
	var inFlight, unalignedCkpts, ckpts atomic.Uint64
	replays := &countLog{msg: "replaying the channel state of an unaligned checkpoint"}
	hold, release := actors.WithListener(func(actors.Event) {}), func(*actors.Job) <-chan struct{} { return nil } // no hold
	if mode == actors.CheckpointUnaligned || timeout > 0 {
		hold, release = holdUntilFull("tally#0", "keep#0", "relabel#0")
	}
	j, err := actors.Start(context.Background(), tallyJob("tally", n, keys, testsrc.NewGate(n), fail, 1), hold, actors.WithStore(store), actors.WithLogger(slog.New(teeHandler{replays, testLogger(t).Handler()})),
		actors.WithCheckpointInterval(2*time.Millisecond), actors.WithCheckpointMode(mode), actors.WithListener(ev.listen), alignmentTimeout(timeout),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted {
				ckpts.Add(1)
			}
			if e.Kind == actors.EventCheckpointCompleted && e.InFlight > 0 {
				inFlight.Add(e.InFlight)
				unalignedCkpts.Add(1)
				if failed.Add(1) <= 3 {
					fail.armed.Store(true)
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	release(j)
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d restores, %d of them replaying channel state (by task); %d of %d checkpoints stored %d bytes in flight",
		ev.count(actors.EventRestoring), replays.n.Load(), unalignedCkpts.Load(), ckpts.Load(), inFlight.Load())
	if (mode == actors.CheckpointUnaligned || timeout > 0) && (unalignedCkpts.Load() == 0 || replays.n.Load() == 0) {
		t.Fatal("no checkpoint stored a record in flight, or no restore replayed one")
	}
	if mode == actors.CheckpointAligned && timeout == 0 && unalignedCkpts.Load() != 0 {
		t.Fatal("an aligned checkpoint stored records in flight")
	}
	for _, op := range []string{"seen", "tally"} {
		got := countsOf(t, store, "tally", op)
		for v := int64(1); v <= n; v++ {
			if got[v] != 1 {
				t.Fatalf("%s counted value %d %d times, want exactly once (%d distinct values)", op, v, got[v], len(got))
			}
		}
		if int64(len(got)) != n {
			t.Fatalf("%s counted %d distinct values, want %d", op, len(got), n)
		}
	}
}

// countsOf reads, from the job's final checkpoint, how often operator op
// counted each value.
func countsOf(t *testing.T, store snapshots.Store, job, op string) map[int64]int64 {
	t.Helper()
	cps := snapshots.NewCheckpoints(store, job, nil)
	rp, err := cps.LoadLatest(context.Background())
	if err != nil || rp == nil || !rp.Manifest.Final {
		t.Fatalf("load the final checkpoint: %v (%v)", err, rp)
	}
	out := map[int64]int64{}
	for _, st := range rp.States {
		if st.Operator != op {
			continue
		}
		if len(st.InFlight) > 0 {
			t.Errorf("the final checkpoint holds %d items in flight for %s", len(st.InFlight), st.TaskId)
		}
		m, err := topology.DecodeMapState[int64, int64, int64](st, "times")
		if err != nil {
			t.Fatal(err)
		}
		for _, vs := range m {
			for v, c := range vs {
				out[v] += c
			}
		}
	}
	return out
}

// countLog is a slog handler that counts the records with message msg.
type countLog struct {
	msg string
	n   atomic.Int64
}

func (c *countLog) Enabled(context.Context, slog.Level) bool { return true }
func (c *countLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == c.msg {
		c.n.Add(1)
	}
	return nil
}
func (c *countLog) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *countLog) WithGroup(string) slog.Handler      { return c }

// teeHandler hands each record to both handlers.
type teeHandler struct{ a, b slog.Handler }

func (h teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.a.Enabled(ctx, l) || h.b.Enabled(ctx, l)
}
func (h teeHandler) Handle(ctx context.Context, r slog.Record) error {
	_ = h.a.Handle(ctx, r)
	if h.b.Enabled(ctx, r.Level) {
		return h.b.Handle(ctx, r)
	}
	return nil
}
func (h teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{h.a.WithAttrs(as), h.b.WithAttrs(as)}
}
func (h teeHandler) WithGroup(g string) slog.Handler {
	return teeHandler{h.a.WithGroup(g), h.b.WithGroup(g)}
}

// TestUnalignedRefusals: what unaligned checkpoints cannot do is refused
// before any record flows, saying why: an edge whose records have no wire
// codec. (What a rescale from an unaligned checkpoint cannot redistribute,
// the channel state of forward and broadcast edges, is refused by
// dataflow.PlanRestore; see TestRemapInFlightRefusals there.)
func TestUnalignedRefusals(t *testing.T) {
	ctx := context.Background()
	unaligned := actors.WithCheckpointMode(actors.CheckpointUnaligned)
	t.Run("no-codec", func(t *testing.T) {
		g := topology.New("nocodec")
		src := testsrc.GatedSplits(g, "source", 10, func(i int64) int64 { return i }, testsrc.NewGate(10), topology.Parallelism(1))
		ch := topology.Map(src, "wrap", func(v int64) chanRecord { return chanRecord{V: v} })
		topology.Sink(ch, "sink", func(chanRecord) error { return nil })
		_, err := actors.Start(ctx, g, actors.WithStore(snapshots.NewMem()), unaligned)
		if err == nil || !strings.Contains(err.Error(), "unaligned") || !strings.Contains(err.Error(), `"wrap"`) {
			t.Fatalf("unaligned with a record type no codec carries: %v", err)
		}
	})
}

// TestUnalignedRescale stops tallyJob (with a slow tally) at an unaligned
// checkpoint that stored records in flight into tally, and starts it from that checkpoint with
// tally over 2 tasks instead of 1: the records in flight into tally are
// redistributed by key group (those tally#0 had not processed, and those
// keep#0 still had queued for it), and both keyed stages count each value
// exactly once.
func TestUnalignedRescale(t *testing.T) {
	ctx := context.Background()
	unaligned := actors.WithCheckpointMode(actors.CheckpointUnaligned)
	const n, work = 30_000, 400 // tally is the slowest stage: the channels into it stay full
	store := snapshots.NewMem()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var mu sync.Mutex
	var with []uint64 // the checkpoints that stored records in flight since tally was released
	var released atomic.Bool
	hold, release := holdUntilFull("tally#0", "keep#0", "relabel#0")
	job, err := actors.Start(runCtx, tallyJobWork("rescale", n, 64, testsrc.NewGate(n), nil, 1, work), hold, actors.WithStore(store), actors.WithLogger(testLogger(t)), unaligned,
		actors.WithCheckpointInterval(2*time.Millisecond), actors.WithRetainedCheckpoints(1000),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && e.InFlight > 0 && released.Load() {
				mu.Lock()
				defer mu.Unlock()
				if with = append(with, e.Checkpoint); len(with) == 5 {
					cancel()
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		<-release(job)
		released.Store(true)
	}()
	_ = job.Wait() // canceled, or finished first
	mu.Lock()
	defer mu.Unlock()
	// The first of them that holds records in flight into tally (the
	// channel from keep#0 to tally#0, on either side).
	var id uint64
	var keyed int
	for _, c := range with {
		rp, err := snapshots.NewCheckpoints(store, "rescale", nil).LoadCheckpoint(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range rp.States {
			for _, it := range st.InFlight {
				if it.ToOperatorId == "tally" && !it.IsWatermark {
					keyed += len(it.Ends)
				}
			}
		}
		if id = c; keyed > 0 {
			break
		}
	}
	if keyed == 0 {
		t.Fatalf("none of checkpoints %v stored a record in flight into tally", with)
	}
	moved := &countLog{msg: "replaying the channel state of an unaligned checkpoint"}
	if err := actors.Run(ctx, tallyJobWork("rescale", n, 64, testsrc.NewGate(n), nil, 2, work), actors.WithStore(store),
		actors.WithLogger(slog.New(teeHandler{moved, testLogger(t).Handler()})), unaligned,
		actors.WithCheckpoint(id), actors.WithCheckpointInterval(2*time.Millisecond)); err != nil {
		t.Fatalf("rescale from unaligned checkpoint %d: %v", id, err)
	}
	t.Logf("checkpoint %d held %d records in flight into tally; %d tasks replayed channel state after the rescale", id, keyed, moved.n.Load())
	if moved.n.Load() == 0 {
		t.Fatal("no task replayed channel state")
	}
	for _, op := range []string{"seen", "tally"} {
		got := countsOf(t, store, "rescale", op)
		for v := int64(1); v <= n; v++ {
			if got[v] != 1 {
				t.Fatalf("%s counted value %d %d times after rescaling from checkpoint %d", op, v, got[v], id)
			}
		}
	}
}

// chanRecord holds a channel: no wire codec carries it.
type chanRecord struct {
	V int64
	C chan int
}

// alignmentTimeout is actors.WithAlignmentTimeout(d), or no option for 0.
func alignmentTimeout(d time.Duration) actors.Option {
	if d == 0 {
		return actors.WithListener(func(actors.Event) {}) // no option
	}
	return actors.WithAlignmentTimeout(d)
}

// TestBarrierOvertakesMailbox: a barrier posted behind the batches that
// wait in a slow task's mailbox overtakes them when checkpoints are
// unaligned: the task snapshots after the batch it was processing, and
// stores the rest as channel state. Aligned, the same task snapshots
// only after processing every batch ahead of the barrier.
//
// Aligned with a timeout, the barrier waits behind the source's queued
// output first: once it has waited the timeout there, the source sends it
// ahead of them and stores them as its channel state, and "count"
// snapshots before processing them.
//
// "count" blocks in its first batch until the barrier of checkpoint 1 has
// been posted to it (unaligned, timeout) or the source has begun that
// checkpoint (aligned), while the source has filled its credit and queued
// more.
func TestBarrierOvertakesMailbox(t *testing.T) {
	for _, mode := range []actors.CheckpointMode{actors.CheckpointUnaligned, actors.CheckpointAligned} {
		t.Run(mode.String(), func(t *testing.T) { testOvertakesMailbox(t, mode, 0) })
	}
	t.Run("aligned-timeout", func(t *testing.T) { testOvertakesMailbox(t, actors.CheckpointAligned, time.Millisecond) })
}

func testOvertakesMailbox(t *testing.T, mode actors.CheckpointMode, timeout time.Duration) {
	const n, batch, credits = 400, 4, 4
	var processed atomic.Int64
	g := countJob("overtake", n, testsrc.NewGate(n), &processed, nil)

	release, done := make(chan struct{}), make(chan struct{})
	defer close(done)
	var releaseOnce sync.Once
	entered := make(chan struct{})
	var first atomic.Bool
	var atSnapshot atomic.Int64
	atSnapshot.Store(-1)
	faults := &actorstest.Faults{
		Process: func(task string) {
			if task == "count#0" && first.CompareAndSwap(false, true) {
				close(entered)
				select {
				case <-release:
				case <-done:
				}
			}
		},
		Priority: func(task string, msg any) {
			if _, ok := msg.(*messages.Barrier); ok && task == "count#0" {
				releaseOnce.Do(func() { close(release) })
			}
		},
		Snapshot: func(task string, id uint64) {
			if task == "source#0" && id == 1 && mode == actors.CheckpointAligned && timeout == 0 {
				releaseOnce.Do(func() { close(release) })
			}
			if task == "count#0" && id == 1 {
				atSnapshot.Store(processed.Load())
			}
		},
	}
	var inFlight, srcInFlight atomic.Int64
	inFlight.Store(-1)
	store := snapshots.NewMem()
	j, err := actors.Start(context.Background(), g, actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointMode(mode), alignmentTimeout(timeout), actors.WithCheckpointInterval(0), actors.WithBatchSize(batch), actors.WithCredits(credits),
		actorstest.WithFaults(faults), actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && e.Checkpoint == 1 {
				for _, tc := range e.Tasks {
					switch tc.Task {
					case "count#0":
						inFlight.Store(int64(tc.InFlight))
					case "source#0":
						srcInFlight.Store(int64(tc.InFlight))
					}
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	// The source has spent its credit and queues batches: "count", blocked
	// in its first, has the others waiting in its mailbox. (Before count
	// has a batch, the source may queue for want of its first credit.)
	<-entered
	deadline := time.Now().Add(time.Minute)
	for !queuing(j, "source#0") {
		if time.Now().After(deadline) {
			t.Fatal("the source never ran out of credit")
		}
		time.Sleep(time.Millisecond) // polls a condition; no push signal exists
	}
	if _, err := j.Checkpoint(context.Background()); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if err := j.Wait(); err != nil {
		t.Fatal(err)
	}
	got, in := atSnapshot.Load(), inFlight.Load()
	t.Logf("%s (timeout %v): count processed %d records before its snapshot; %d bytes in flight; the source stored %d bytes in flight",
		mode, timeout, got, in, srcInFlight.Load())
	switch {
	case timeout > 0:
		if got < batch || got > credits*batch || srcInFlight.Load() <= 0 {
			t.Errorf("aligned with a timeout: count snapshotted after %d records, the source stored %d bytes in flight; want at most the %d records sent before the barrier, the rest in flight",
				got, srcInFlight.Load(), credits*batch)
		}
	case mode == actors.CheckpointUnaligned:
		if got != batch || in <= 0 {
			t.Errorf("unaligned: count snapshotted after %d records with %d bytes in flight, want after its first batch (%d records) with the batches behind it in flight",
				got, in, batch)
		}
	default:
		if got < 2*batch || in != 0 {
			t.Errorf("aligned: count snapshotted after %d records with %d bytes in flight, want after every batch ahead of the barrier (at least %d records), none in flight",
				got, in, 2*batch)
		}
	}
	counts := countsOf(t, store, "overtake", "count")
	for v := int64(1); v <= n; v++ {
		if counts[v] != 1 {
			t.Fatalf("count counted value %d %d times", v, counts[v])
		}
	}
}

// countJob is a source of 1..n (one task, held at gate) into "count", one
// keyed task that counts each value in its state and adds the records it
// has processed to processed, into a sink. each, when not nil, is called
// with the new count at every record, before it is counted.
func countJob(name string, n int64, gate *testsrc.Gate, processed *atomic.Int64, each func(processed int64)) *topology.Graph {
	g := topology.New(name)
	src := testsrc.GatedSplits(g, "source", n, func(i int64) int64 { return i + 1 }, gate, topology.Parallelism(1))
	counted := topology.Process(topology.KeyBy(src, func(v int64) int64 { return v % 8 }), "count",
		func(ks *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, int64] {
			times := topology.MapOf[int64, int64](ks, "times")
			return func(ctx *topology.Context[int64], v int64, out *topology.Collector[int64]) error {
				if p := processed.Add(1); each != nil {
					each(p)
				}
				c, _ := times.Get(v)
				times.Put(v, c+1)
				out.Emit(v)
				return nil
			}
		}, topology.Parallelism(1))
	topology.Sink(counted, "sink", func(int64) error { return nil })
	return g
}

// queuing reports whether each of tasks has batches waiting for credit.
func queuing(j *actors.Job, tasks ...string) bool {
	queued := map[string]bool{}
	for _, m := range j.TaskMetrics() {
		queued[m.Task] = m.QueuedBatches > 0
	}
	for _, task := range tasks {
		if !queued[task] {
			return false
		}
	}
	return true
}
