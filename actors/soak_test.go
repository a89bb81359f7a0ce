package actors_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/chaos"
	"github.com/snapflow/snapflow/internal/diskstate"
	"github.com/snapflow/snapflow/internal/miniotest"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// soakRates are the failure rates of the soak.
var soakRates = chaos.Rates{
	OperatorPanic: 0.0002, SnapshotPanic: 0.04, RestorePanic: 0.05,
	DropBatch: 0.001, DupBatch: 0.001,
	StoreError: 0.005, StoreLatency: 200 * time.Microsecond,
	Straggler: 0.001, StragglerTime: 2 * time.Millisecond,
}

// TestSoak runs every soak shape on the memory store and on MinIO, with
// checkpoints every 20ms and failures of every kind, until the target number
// of task failures is reached, then the rescaling shape (subtest rescale).
// SNAPFLOW_SOAK=full (make soak) runs the long version; the short one runs
// in make test. The seed is printed; replay with -seed.
func TestSoak(t *testing.T) {
	seed := testSeed(t)
	srv := miniotest.Start(t)
	srv.MakeBucket(t, "soak")
	t.Run("shapes", func(t *testing.T) { soakShapes(t, seed, srv, nil) })
	t.Run("incremental", func(t *testing.T) { soakIncremental(t, seed+1, srv) })
	t.Run("rescale", func(t *testing.T) { soakRescale(t, seed, srv, rescaleSoak{}) })
	t.Run("eventtime", func(t *testing.T) { soakEventTime(t, seed+2, srv) })
	t.Run("nexmark", func(t *testing.T) { soakNexmark(t, seed+3, srv) })
	t.Run("disk", func(t *testing.T) { soakDisk(t, seed+4, srv) })
	t.Run("disk-rescale", func(t *testing.T) {
		soakRescale(t, seed+5, srv, rescaleSoak{opts: []actors.Option{actors.WithDiskState(actors.DiskState{Dir: t.TempDir()})}})
	})
	t.Run("unaligned", func(t *testing.T) {
		soakUnaligned(t, seed+6, srv, actors.WithCheckpointMode(actors.CheckpointUnaligned))
	})
	t.Run("aligned-timeout", func(t *testing.T) { soakUnaligned(t, seed+7, srv, actors.WithAlignmentTimeout(time.Millisecond)) })
	// Phases that end at an unaligned checkpoint, the next started from it
	// at a new parallelism: records in flight are redistributed.
	t.Run("unaligned-rescale", func(t *testing.T) {
		soakRescale(t, seed+8, srv, rescaleSoak{fromCheckpoints: true, opts: []actors.Option{actors.WithCheckpointMode(actors.CheckpointUnaligned)}})
	})
}

// rescaleSoak is how soakRescale runs the rescaling shape: with options
// added to the job's, and with phases ended by a savepoint or (with
// fromCheckpoints: unpaced sources, 5ms checkpoints) at a checkpoint.
type rescaleSoak struct {
	opts            []actors.Option
	fromCheckpoints bool
}

// soakUnaligned runs the shapes with unaligned checkpoints (mode: the
// unaligned mode, or an alignment timeout), unpaced sources (so that
// queues fill and barriers overtake records), and failures at 20ms
// checkpoints; every run must end with the state of a failure-free run,
// and some checkpoints must have stored records in flight.
func soakUnaligned(t *testing.T, seed uint64, srv *miniotest.Server, mode actors.Option) {
	var inFlight, with atomic.Int64
	p := &soakParams{n: 40_000, opts: []actors.Option{mode,
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted && e.InFlight > 0 {
				with.Add(1)
				inFlight.Add(int64(e.InFlight))
			}
		})}}
	soakShapes(t, seed, srv, p)
	t.Logf("unaligned: %d of %d checkpoints stored %d bytes in flight", with.Load(), p.completed, inFlight.Load())
	if with.Load() == 0 {
		t.Errorf("no checkpoint of %d stored a record in flight: no barrier overtook anything", p.completed)
	}
}

// soakDisk runs the keyed shapes with their state on disk (see
// actors.WithDiskState) and incremental checkpoints, with failures at
// 20ms checkpoints; every run must end with the state of a failure-free
// run, and the state directories must be gone once the runs are over.
func soakDisk(t *testing.T, seed uint64, srv *miniotest.Server) {
	dir := t.TempDir()
	p := &soakParams{rate: 1_000, n: 4_000,
		opts: []actors.Option{actors.WithDiskState(actors.DiskState{Dir: dir}), actors.WithIncrementalCheckpoints(4), actors.WithRetainedCheckpoints(1)}}
	before := diskstate.Opened()
	soakShapes(t, seed, srv, p)
	if p.incremental == 0 {
		t.Errorf("no completed checkpoint of %d referenced an earlier one: incremental checkpoints were not exercised", p.completed)
	}
	if diskstate.Opened() == before {
		t.Error("no task database was opened: the state was not on disk")
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("%d task databases were left behind in %s, e.g. %s", len(left), dir, left[0].Name())
	}
}

// soakNexmark runs Nexmark q5 (sliding windows) and q11 (session windows)
// in phases of different parallelisms ended by savepoints, alternately on
// the memory store and on MinIO, with failures of every kind at 20ms
// checkpoints. Every run's rows, committed by the exactly-once file sink,
// must equal the query's plain Go reference.
func soakNexmark(t *testing.T, seed uint64, srv *miniotest.Server) {
	target, n, rate := 6, int64(24_000), 40_000.0
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		target, n = 100, 60_000
	}
	rng := rand.New(rand.NewPCG(seed, 4))
	for _, q := range []string{"q5", "q11"} {
		t.Run(q, func(t *testing.T) {
			var sum chaos.RunResult
			total := map[chaos.Kind]int{}
			runs := 0
			start := time.Now()
			for runs < 2 || sum.Failures < target {
				store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
				if runs%2 == 1 {
					store, storeName = srv.Store(t, "soak", fmt.Sprintf("nexmark-%s-%d", q, runs)), "minio"
				}
				shape, err := chaos.Nexmark(chaos.NexmarkConfig{Dir: t.TempDir(), Query: q})
				if err != nil {
					t.Fatal(err)
				}
				runSeed := rng.Uint64()
				res, err := chaos.Run(context.Background(), chaos.RunConfig{
					Shape: shape, N: n, Store: store, Seed: runSeed, Rates: soakRates, Budget: 1, Rate: rate, Logger: testLogger(t),
					SameSavepointName: true,
				})
				if err != nil {
					t.Fatalf("%s run %d on %s, seed %d, phases %v: %v\ninjected: %s", q, runs, storeName, runSeed, res.Phases, err, chaos.FormatCounts(res.Counts))
				}
				for k, c := range res.Counts {
					total[k] += c
				}
				sum.Failures += res.Failures
				sum.Restores += res.Restores
				sum.FromCkpt += res.FromCkpt
				sum.Savepoints += res.Savepoints
				sum.SavepointRestores += res.SavepointRestores
				sum.Rows += res.Rows
				sum.OpenWindows += res.OpenWindows
				runs++
				t.Logf("%s run %d on %-5s seed %d, phases %v: %d failures, %d restores (%d from a checkpoint, %d of a savepoint), %d savepoints (%d keys with open windows in them), %d rows equal to the reference, %v",
					q, runs, storeName, runSeed, res.Phases, res.Failures, res.Restores, res.FromCkpt, res.SavepointRestores, res.Savepoints, res.OpenWindows, res.Rows, res.Elapsed.Round(time.Millisecond))
				if runs > 50*target {
					t.Fatalf("only %d task failures after %d runs", sum.Failures, runs)
				}
			}
			t.Logf("nexmark %s soak: %d runs, %d task failures, %d restores (%d from a checkpoint, %d of a savepoint), %d savepoints (%d keys with open windows in them), %d rows checked, %v; injected %s",
				q, runs, sum.Failures, sum.Restores, sum.FromCkpt, sum.SavepointRestores, sum.Savepoints, sum.OpenWindows, sum.Rows, time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
			if sum.Savepoints == 0 || sum.OpenWindows == 0 || sum.Rows == 0 {
				t.Errorf("%d savepoints with %d keys with open windows, %d rows: the soak rescaled no window or checked nothing", sum.Savepoints, sum.OpenWindows, sum.Rows)
			}
		})
	}
}

// soakEventTime runs the event-time shape (chaos.EventTime) in phases of
// different parallelisms, each ended by a savepoint that holds pending
// timers, alternately on the memory store and on MinIO, with failures of
// every kind at 20ms checkpoints: out-of-order records from split sources
// with a watermark per split, idle splits, event-time and processing-time
// timers, a two-input join, and late records to side outputs. Every run's
// rows, committed by the exactly-once file sink, must equal the reference
// computed in plain Go. Runs go on until the target number of task
// failures.
func soakEventTime(t *testing.T, seed uint64, srv *miniotest.Server) {
	target, n, budget, rate := 8, int64(16_000), 1, 100_000.0
	full := os.Getenv("SNAPFLOW_SOAK") == "full"
	if full {
		target, n, budget = 200, 64_000, 3
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	total := map[chaos.Kind]int{}
	var sum chaos.RunResult
	runs := 0
	start := time.Now()
	for runs < 2 || sum.Failures < target {
		store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
		if runs%2 == 1 {
			store, storeName = srv.Store(t, "soak", fmt.Sprintf("eventtime-%d", runs)), "minio"
		}
		runSeed := rng.Uint64()
		res, err := chaos.Run(context.Background(), chaos.RunConfig{
			Shape: chaos.EventTime(chaos.EventTimeConfig{Dir: t.TempDir(), Quiet: true}),
			N:     n, Store: store, Seed: runSeed, Rates: soakRates, Budget: budget, Rate: rate, Logger: testLogger(t),
			SameSavepointName: true,
		})
		if err != nil {
			t.Fatalf("event-time run %d on %s, seed %d, phases %v: %v\ninjected: %s", runs, storeName, runSeed, res.Phases, err, chaos.FormatCounts(res.Counts))
		}
		for k, c := range res.Counts {
			total[k] += c
		}
		sum.Failures += res.Failures
		sum.Restores += res.Restores
		sum.FromCkpt += res.FromCkpt
		sum.Completed += res.Completed
		sum.Savepoints += res.Savepoints
		sum.SavepointRestores += res.SavepointRestores
		sum.TimersFired += res.TimersFired
		sum.ProcTimersFired += res.ProcTimersFired
		sum.Late += res.Late
		sum.PendingAtSavepoints += res.PendingAtSavepoints
		runs++
		t.Logf("event-time run %d on %-5s seed %d, phases %v: %d failures, %d restores (%d from a checkpoint, %d of a savepoint), %d checkpoints, %d savepoints (%d timers pending in them), %d event-time and %d processing-time timers fired, %d late records, %v; injected %s",
			runs, storeName, runSeed, res.Phases, res.Failures, res.Restores, res.FromCkpt, res.SavepointRestores, res.Completed,
			res.Savepoints, res.PendingAtSavepoints, res.TimersFired, res.ProcTimersFired, res.Late, res.Elapsed.Round(time.Millisecond), chaos.FormatCounts(res.Counts))
		if runs > 50*target {
			t.Fatalf("only %d task failures after %d runs", sum.Failures, runs)
		}
	}
	t.Logf("event-time soak: %d runs, %d task failures observed, %d restores (%d from a checkpoint, %d of a savepoint), %d checkpoints, %d savepoints (%d timers pending in them), %d event-time and %d processing-time timers fired, %d late records, %v; injected %s",
		runs, sum.Failures, sum.Restores, sum.FromCkpt, sum.SavepointRestores, sum.Completed, sum.Savepoints, sum.PendingAtSavepoints, sum.TimersFired, sum.ProcTimersFired, sum.Late,
		time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
	if sum.TimersFired == 0 || sum.ProcTimersFired == 0 {
		t.Errorf("%d event-time and %d processing-time timers fired: the soak must fire both", sum.TimersFired, sum.ProcTimersFired)
	}
	if sum.PendingAtSavepoints == 0 {
		t.Error("no savepoint held a pending timer: the rescales moved none")
	}
	if full && sum.FromCkpt == 0 {
		t.Error("no recovery restored a mid-stream checkpoint")
	}
}

// soakIncremental is soakShapes with incremental checkpoints, every key
// group stored again at least every 4 checkpoints, and retention keeping
// one checkpoint: objects of deleted checkpoints that the retained one
// references must survive retention and the clean-up after aborts. The
// sources are paced slower, so that a checkpoint interval does not touch
// every key and checkpoints do reference earlier objects; some must.
func soakIncremental(t *testing.T, seed uint64, srv *miniotest.Server) {
	p := &soakParams{rate: 1_000, n: 4_000,
		opts: []actors.Option{actors.WithIncrementalCheckpoints(4), actors.WithRetainedCheckpoints(1)}}
	soakShapes(t, seed, srv, p)
	if p.incremental == 0 {
		t.Errorf("no completed checkpoint of %d referenced an earlier one: incremental checkpoints were not exercised", p.completed)
	}
}

// soakParams changes soakShapes's runs, and collects its counts.
type soakParams struct {
	rate                   float64
	n                      int64
	opts                   []actors.Option
	completed, incremental int
}

// soakShapes runs the shapes of chaos.Shapes in turn (with p's changes
// when p is not nil).
func soakShapes(t *testing.T, seed uint64, srv *miniotest.Server, p *soakParams) {
	// Sources are paced (rate records/s per task), so that each run lasts
	// long enough for 20ms checkpoints to complete between failures and
	// recoveries restore real mid-stream state.
	target, n, budget, rate := 24, int64(40_000), 2, 100_000.0
	if os.Getenv("SNAPFLOW_SOAK") == "full" {
		target, n, budget = 240, 100_000, 4
	}
	var opts []actors.Option
	if p != nil {
		n, rate, opts = p.n, p.rate, p.opts
		if os.Getenv("SNAPFLOW_SOAK") == "full" {
			n *= 3
		}
	}
	rng := rand.New(rand.NewPCG(seed, 1))
	total := map[chaos.Kind]int{}
	taskFailures, runs, completed, fromCkpt := 0, 0, 0, 0
	start := time.Now()
	// Until a recovery has restored a mid-stream checkpoint, runs go on
	// past the target: how soon one does depends on the machine's speed.
	for taskFailures < target || fromCkpt == 0 || runs < 4 { // each store, with and without inline states
		sh := chaos.Shapes[runs%len(chaos.Shapes)]
		store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
		if runs%2 == 1 {
			store, storeName = srv.Store(t, "soak", fmt.Sprintf("%s/run-%d", strings.ReplaceAll(t.Name(), "/", "-"), runs)), "minio"
		}
		runSeed := rng.Uint64()
		// Half the runs store every state as an object; the others let
		// these small states travel inline in the manifests.
		inline := runs%4 < 2
		runOpts := opts
		if !inline {
			runOpts = append(slices.Clip(opts), actors.WithInlineStateLimit(0))
		}
		res, err := chaos.Run(context.Background(), chaos.RunConfig{
			Shape: sh, N: n, Store: store, Seed: runSeed, Rates: soakRates, Budget: budget, Rate: rate, Logger: testLogger(t),
			Options: runOpts,
		})
		if err != nil {
			t.Fatalf("run %d (%s on %s, seed %d): %v\ninjected: %s", runs, sh.Name, storeName, runSeed, err, chaos.FormatCounts(res.Counts))
		}
		for k, c := range res.Counts {
			total[k] += c
		}
		taskFailures += res.Failures // observed by the job, not merely injected
		completed += res.Completed
		if p != nil {
			p.completed += res.Completed
			p.incremental += res.Incremental
		}
		fromCkpt += res.FromCkpt
		runs++
		t.Logf("run %d: %-7s on %-5s inline %-5t seed %d: %d failures, %d restores (%d from a checkpoint), %d checkpoints (%d incremental), %d stale messages dropped, %v; injected %s",
			runs, sh.Name, storeName, inline, runSeed, res.Failures, res.Restores, res.FromCkpt, res.Completed, res.Incremental, res.Stale, res.Elapsed.Round(time.Millisecond), chaos.FormatCounts(res.Counts))
		if runs > 50*target {
			t.Fatalf("only %d task failures after %d runs", taskFailures, runs)
		}
	}
	t.Logf("soak: %d runs, %d task failures observed, %d restores from a checkpoint, %d checkpoints completed, %v; injected %s",
		runs, taskFailures, fromCkpt, completed, time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
	// The short soak is too short to promise every kind; the full one must.
	full := os.Getenv("SNAPFLOW_SOAK") == "full"
	if fromCkpt == 0 || (full && fromCkpt < taskFailures/4) {
		t.Errorf("only %d of %d recoveries restored a mid-stream checkpoint: the soak must exercise restores", fromCkpt, taskFailures)
	}
	for _, k := range []chaos.Kind{chaos.OperatorPanic, chaos.SnapshotPanic, chaos.RestorePanic, chaos.DropBatch, chaos.DupBatch, chaos.StoreError} {
		if total[k] == 0 && full {
			t.Errorf("no %s was injected", k)
		}
	}
}

// soakRescale runs the rescaling shape (chaos.Rescale), alternately on the
// memory store and on MinIO: four phases of parallelisms chosen from each
// run's seed, each ended by a stop-with-savepoint that the next starts
// from, with failures injected throughout. Every run is verified by
// chaos.Run: every savepoint holds the checkers exactly at the sources'
// positions, each phase's recovery restored its savepoint again after a
// failure while restoring it, and the final state is that of a
// failure-free run. Runs go on until the target number of task failures.
func soakRescale(t *testing.T, seed uint64, srv *miniotest.Server, how rescaleSoak) {
	target, n, budget, rate := 8, int64(16_000), 1, 100_000.0
	var interval time.Duration // the default, 20ms
	if how.fromCheckpoints {
		rate, interval = 0, 5*time.Millisecond // queues fill, and checkpoints come before the gates
	}
	full := os.Getenv("SNAPFLOW_SOAK") == "full"
	if full {
		target, n, budget = 400, 200_000, 3
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	total := map[chaos.Kind]int{}
	var sum chaos.RunResult
	runs := 0
	start := time.Now()
	for runs < 2 || sum.Failures < target {
		store, storeName := snapshots.Store(snapshots.NewMem()), "mem"
		if runs%2 == 1 {
			store, storeName = srv.Store(t, "soak", fmt.Sprintf("rescale-%d", runs)), "minio"
		}
		runSeed := rng.Uint64()
		res, err := chaos.Run(context.Background(), chaos.RunConfig{
			Shape: chaos.Rescale, N: n, Store: store, Seed: runSeed, Rates: soakRates, Budget: budget, Rate: rate, Logger: testLogger(t),
			SameSavepointName: true, // a failed attempt is retried under its name, as a user would
			Options:           how.opts, FromCheckpoints: how.fromCheckpoints, Interval: interval,
		})
		if err != nil {
			t.Fatalf("rescale run %d on %s, seed %d, phases %v: %v\ninjected: %s", runs, storeName, runSeed, res.Phases, err, chaos.FormatCounts(res.Counts))
		}
		for k, c := range res.Counts {
			total[k] += c
		}
		sum.Failures += res.Failures
		sum.Restores += res.Restores
		sum.FromCkpt += res.FromCkpt
		sum.Completed += res.Completed
		sum.Savepoints += res.Savepoints
		sum.SavepointsFailed += res.SavepointsFailed
		sum.SavepointRestores += res.SavepointRestores
		sum.StartRetries += res.StartRetries
		sum.CheckpointRescales += res.CheckpointRescales
		sum.InFlightRescales += res.InFlightRescales
		runs++
		t.Logf("rescale run %d on %-5s seed %d, phases %v: %d failures, %d restores (%d from a checkpoint, %d of a savepoint), %d checkpoints, %d savepoints (%d attempts failed), %d Start retries, %d stale messages dropped, %v; injected %s",
			runs, storeName, runSeed, res.Phases, res.Failures, res.Restores, res.FromCkpt, res.SavepointRestores, res.Completed,
			res.Savepoints, res.SavepointsFailed, res.StartRetries, res.Stale, res.Elapsed.Round(time.Millisecond), chaos.FormatCounts(res.Counts))
		if runs > 50*target {
			t.Fatalf("only %d task failures after %d runs", sum.Failures, runs)
		}
	}
	t.Logf("rescale soak: %d runs, %d task failures observed, %d restores (%d from a checkpoint, %d of a savepoint), %d checkpoints, %d savepoints taken, %d savepoint attempts failed, %d Start retries, %v; injected %s",
		runs, sum.Failures, sum.Restores, sum.FromCkpt, sum.SavepointRestores, sum.Completed, sum.Savepoints, sum.SavepointsFailed, sum.StartRetries,
		time.Since(start).Round(time.Millisecond), chaos.FormatCounts(total))
	if how.fromCheckpoints {
		t.Logf("rescale soak: %d phases started from a checkpoint, %d of them holding records in flight", sum.CheckpointRescales, sum.InFlightRescales)
		if sum.InFlightRescales == 0 {
			t.Error("no phase started from a checkpoint that held records in flight: nothing was redistributed")
		}
	}
	// Every run restored each savepoint again and failed a savepoint
	// attempt per phase (chaos.Run checks both); the full soak must also
	// have restored checkpoints that phases took of their own, and injected
	// every kind of failure.
	if full && sum.FromCkpt <= sum.SavepointRestores {
		t.Errorf("all %d restores from a checkpoint restored a phase's savepoint: the soak must exercise restores of a phase's own checkpoints", sum.FromCkpt)
	}
	for _, k := range []chaos.Kind{chaos.OperatorPanic, chaos.SnapshotPanic, chaos.RestorePanic, chaos.DropBatch, chaos.DupBatch, chaos.StoreError} {
		if total[k] == 0 && full {
			t.Errorf("no %s was injected", k)
		}
	}
}

// TestSavepointRetrySameName: a savepoint that failed is taken again under
// the same name, as a user (or the rescale soak with SameSavepointName)
// would, and the new one completes. It must stay intact, whatever the
// aborted attempt still does in the background: here its other tasks'
// uploads and the deletion of what it stored are held until the second
// attempt has completed, then let go. The chaos soak found this with
// StopWithSavepoint retried under one name: "load savepoint: ... not
// found" and "crc32c ..., want ...: corrupt object", when the aborted
// attempt's clean-up deleted the savepoint's whole prefix, the new manifest
// included, and its late uploads overwrote the new attempt's objects. Each
// attempt now keeps its objects under its own checkpoint id.
func TestSavepointRetrySameName(t *testing.T) {
	const job, name = "retry-same-name", "sp"
	mem := snapshots.NewMem()
	store := &heldSavepointStore{Store: mem, prefix: snapshots.SavepointPrefix(job, name), release: make(chan struct{})}
	g := topology.New(job)
	v := &chaos.Violations{}
	src := chaos.KeyedSplits(g, "source", 0, 8, 1<<40, 20_000, nil, topology.Parallelism(2))
	sink := chaos.NewSink(v)
	topology.Sink(chaos.Check(src, "check", 2, nil, v), "sink", sink.Write)
	completed := make(chan struct{}, 1)
	j, err := actors.Start(context.Background(), g, actors.WithInlineStateLimit(0), actors.WithStore(store), actors.WithLogger(testLogger(t)),
		actors.WithCheckpointInterval(10*time.Millisecond), actors.WithTolerableCheckpointFailures(-1),
		actors.WithListener(func(e actors.Event) {
			if e.Kind == actors.EventCheckpointCompleted {
				select {
				case completed <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	defer j.Stop()
	release := sync.OnceFunc(func() { close(store.release) })
	defer release() // before Stop, which waits for the held calls
	select {
	case <-completed:
	case <-time.After(testTimeout):
		t.Fatal("no checkpoint completed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	if _, err := j.Savepoint(ctx, name); err == nil {
		t.Fatal("the first attempt succeeded although the upload of one of its states failed")
	}
	id, err := j.Savepoint(ctx, name)
	if err != nil {
		t.Fatalf("the second attempt: %v", err)
	}
	release()
	if err := j.Stop(); !errors.Is(err, actors.ErrStopped) { // waits for the job's background work
		t.Fatalf("Stop: %v", err)
	}
	rp, err := snapshots.NewCheckpoints(mem, job, nil).LoadSavepoint(context.Background(), name)
	if err != nil {
		t.Fatalf("savepoint %q, completed as checkpoint %d, no longer loads (%d uploads of the aborted attempt and %d listings of the savepoint were held): %v",
			name, id, store.heldPuts.Load(), store.heldLists.Load(), err)
	}
	if rp.Manifest.GetCheckpointId() != id {
		t.Fatalf("savepoint %q is checkpoint %d, want %d", name, rp.Manifest.GetCheckpointId(), id)
	}
	if err := v.Err(); err != nil {
		t.Fatal(err)
	}
}

// heldSavepointStore fails the upload of the sink's state in the first
// attempt at a savepoint (the first checkpoint whose objects are put below
// prefix): the sink's barrier comes last, so every other task of the
// attempt has snapshotted and started its upload by then. It holds those
// uploads, and every List below prefix (the listing that deletes what an
// attempt stored), until release is closed; the held calls then go on,
// whatever their context says.
type heldSavepointStore struct {
	snapshots.Store
	prefix  string
	release chan struct{}

	mu                  sync.Mutex
	attempt             uint64 // the checkpoint id of the first attempt
	heldPuts, heldLists atomic.Int64
}

func (s *heldSavepointStore) Put(ctx context.Context, key string, data []byte) error {
	if !strings.HasPrefix(key, s.prefix) {
		return s.Store.Put(ctx, key, data)
	}
	var st messages.TaskState
	ckpt := uint64(0)
	if snapshots.DecodeObject(data, snapshots.KindTaskState, &st) == nil {
		ckpt = st.GetCheckpointId()
	}
	s.mu.Lock()
	if s.attempt == 0 {
		s.attempt = ckpt
	}
	first := ckpt != 0 && ckpt == s.attempt
	s.mu.Unlock()
	switch {
	case first && strings.HasSuffix(key, "/sink#0.state"):
		return fmt.Errorf("test: the upload of %s fails: %w", key, chaos.ErrInjected)
	case first:
		s.heldPuts.Add(1)
		<-s.release
		return s.Store.Put(context.WithoutCancel(ctx), key, data)
	}
	return s.Store.Put(ctx, key, data)
}

func (s *heldSavepointStore) List(ctx context.Context, prefix string) ([]string, error) {
	if strings.HasPrefix(prefix, s.prefix+"chk-") { // an attempt's objects, listed to delete them
		s.heldLists.Add(1)
		<-s.release
		ctx = context.WithoutCancel(ctx)
	}
	return s.Store.List(ctx, prefix)
}

func (s *heldSavepointStore) Delete(ctx context.Context, key string) error {
	return s.Store.Delete(context.WithoutCancel(ctx), key)
}
