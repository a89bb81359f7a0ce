// Command paritysum runs the lecture's job: the numbers 1..N are keyed by
// parity into a sum operator of parallelism 2 (sum_even, sum_odd). A
// checkpoint is taken right after the source has emitted 5, read back from
// the store and printed; the odd-sum task then fails once on record 7, the job
// rolls back to its newest complete checkpoint, and runs to the end. The final
// sums are checked against the closed form.
//
// With -n 0 the source never ends: the job runs until interrupted (Ctrl-C),
// then takes a last checkpoint, stops, and checks the sums that checkpoint
// holds against the closed form of the records its source had emitted.
//
// With -http ADDR it serves the dashboard, /metrics and the JSON API while
// the job runs:
//
//	go run ./examples/paritysum -n 0 -http 127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/dashboard"
	"github.com/snapflow/snapflow/messages"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout), os.Stderr))
}

// exitCode is 0 for success and for -h, 2 for bad flags, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "paritysum:", err)
		return 2
	}
	fmt.Fprintln(stderr, "paritysum:", err)
	return 1
}

// flagErrHelp is flag.ErrHelp (parseFlags shadows the package name).
var flagErrHelp = flag.ErrHelp

// errUsage is wrapped by errors about the command line.
var errUsage = errors.New("usage")

type options struct {
	n         int64
	store     string
	interval  time.Duration
	failAt    int64
	cutAt     int64
	verbose   bool
	batchSize int
	http      string
	// waiting, for tests, is called once an unbounded run waits for its
	// interrupt.
	waiting func()
}

func parseFlags(args []string) (options, error) {
	var o options
	flag := flag.NewFlagSet("paritysum", flag.ContinueOnError)
	errHelp := flagErrHelp
	flag.Int64Var(&o.n, "n", 1_000_000, "the source emits 1..N (0: without end, until interrupted)")
	flag.StringVar(&o.store, "store", snapshots.DefaultDir, "snapshot store URL: a directory, file://DIR, mem:// or s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false; every run discards the job's earlier checkpoints there and starts over")
	flag.DurationVar(&o.interval, "interval", 50*time.Millisecond, "periodic checkpoint interval (0: off)")
	flag.Int64Var(&o.failAt, "fail-at", 7, "the odd-sum task panics once on this record (0: no failure)")
	flag.Int64Var(&o.cutAt, "cut-at", 5, "take the lecture's checkpoint right after the source emits this record")
	flag.BoolVar(&o.verbose, "v", false, "log the runtime's debug messages to stderr")
	flag.IntVar(&o.batchSize, "batch", actors.DefaultBatchSize, "records per batch")
	flag.StringVar(&o.http, "http", "", "serve the dashboard, /metrics and the JSON API on `ADDR` (host:port; a host-less :8080 is loopback) while the job runs")
	if err := flag.Parse(args); err != nil {
		if errors.Is(err, errHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if flag.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, flag.Args())
	}
	return o, nil
}

func run(args []string, stdout io.Writer) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	if o.n < 0 || (o.n > 0 && o.n < o.cutAt) || o.cutAt < 1 {
		return fmt.Errorf("%w: -n %d must be 0 (no end) or at least -cut-at %d, which must be at least 1", errUsage, o.n, o.cutAt)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	return runJob(ctx, o, stdout)
}

// runJob runs the job; ctx ends on an interrupt.
func runJob(ctx context.Context, o options, stdout io.Writer) (err error) {
	// An unbounded run ends on ctx with a last checkpoint, so the job
	// itself must outlive ctx.
	jobCtx := ctx
	if o.n == 0 {
		jobCtx = context.WithoutCancel(ctx)
	}

	store, err := snapshots.Open(ctx, o.store)
	if err != nil {
		return err
	}
	defer store.Close()
	fmt.Fprintf(stdout, "store: %s\n", store)

	logLevel := slog.LevelWarn + 100
	if o.verbose {
		logLevel = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))
	srv, err := dashboard.Start(ctx, dashboard.Config{Addr: o.http, Token: os.Getenv(dashboard.TokenEnv), Logger: logger})
	if err != nil {
		return err
	}
	if b := srv.Banner(); b != "" {
		fmt.Fprintln(stdout, b)
	}
	defer func() { err = errors.Join(err, srv.Close()) }()

	gate := newGate(o.cutAt)
	var failed atomic.Bool
	results := newLatest()
	g := topology.New("paritysum", topology.MaxParallelism(2))
	nums := topology.FromSource(g, "source", func(int, int) topology.Source[int64] {
		return &gatedSequence{n: o.n, gate: gate}
	})
	// With two key groups and the identity hash, key 0 (even) is owned by
	// sum#0 and key 1 (odd) by sum#1.
	byParity := topology.KeyByHash(nums, func(v int64) int64 { return v % 2 }, func(k int64) uint64 { return uint64(k) })
	sums := topology.Process(byParity, "sum", func(s *topology.KeyedSetup[int64]) topology.ProcessFunc[int64, int64, partial] {
		total := topology.Value[int64](s, "total")
		return func(ctx *topology.Context[int64], v int64, out *topology.Collector[partial]) error {
			if v == o.failAt && ctx.Key() == 1 && failed.CompareAndSwap(false, true) {
				panic(fmt.Sprintf("injected failure on record %d", v))
			}
			t, _ := total.Get()
			t += v
			total.Set(t)
			out.Emit(partial{parity: ctx.Key(), sum: t})
			return nil
		}
	}, topology.Parallelism(2))
	topology.Sink(sums, "sink", results.put)

	story := &story{}
	// The lecture's story starts from the beginning on every run, so earlier
	// checkpoints of the job in the store are discarded.
	opts := append(srv.Options(), actors.WithStartOver(),
		actors.WithStore(store), actors.WithCheckpointInterval(o.interval), actors.WithLogger(logger),
		actors.WithListener(story.event), actors.WithBatchSize(o.batchSize))
	job, err := actors.Start(jobCtx, g, opts...)
	if err != nil {
		return err
	}
	srv.Attach(job)

	// The lecture's checkpoint: the source pauses after cutAt, a checkpoint
	// is triggered and completes, and only then does the source go on.
	select {
	case <-gate.reached:
	case <-ctx.Done():
		job.Stop()
		return fmt.Errorf("interrupted before the source reached %d", o.cutAt)
	case <-job.Done():
		if err := job.Wait(); err != nil {
			return fmt.Errorf("job ended before the source reached %d: %w", o.cutAt, err)
		}
		return fmt.Errorf("job finished before the source reached %d", o.cutAt)
	}
	id, err := job.Checkpoint(ctx)
	if err != nil {
		return fmt.Errorf("checkpoint after %d: %w", o.cutAt, err)
	}
	if err := printCut(ctx, stdout, job.Checkpoints(), id); err != nil {
		return err
	}
	gate.open()

	if o.n == 0 {
		return runUntilInterrupted(ctx, stdout, job, story, o.waiting)
	}
	if err := job.Wait(); err != nil {
		return err
	}
	story.print(stdout)
	if err := verify(stdout, o.n, results); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "the checkpoints stay in the store; list them with:\n  go run ./cmd/snapflow checkpoints list --store '%s'\n", o.store)
	return nil
}

// printCut reads checkpoint id back from the store and prints what each
// task's stored state holds.
func printCut(ctx context.Context, w io.Writer, cps *snapshots.Checkpoints, id uint64) error {
	m, err := cps.ReadManifest(ctx, id)
	if err != nil {
		return err
	}
	values := map[string]int64{}
	var lines []string
	for _, e := range m.Tasks {
		st, err := cps.ReadTaskState(ctx, e.State)
		if err != nil {
			return err
		}
		name, v, err := describe(st)
		if err != nil {
			return err
		}
		values[name] = v
		lines = append(lines, fmt.Sprintf("  %-8s -> %-10s = %-3d (object %s, %d bytes)", e.TaskId, name, v, e.State.Key, e.State.Size))
	}
	sort.Strings(lines)
	fmt.Fprintf(w, "checkpoint %d: source=%d sum_even=%d sum_odd=%d\n", id, values["source"], values["sum_even"], values["sum_odd"])
	fmt.Fprintf(w, "manifest of checkpoint %d (epoch %d, topology %s) maps each task to its state:\n%s\n",
		id, m.Epoch, m.TopologyFingerprint, strings.Join(lines, "\n"))
	return nil
}

// describe decodes a stored task state into the lecture's names.
func describe(st *messages.TaskState) (string, int64, error) {
	switch st.Operator {
	case "source":
		off, err := topology.GeneratedRecords(st)
		return "source", off, err
	case "sink":
		return "(no state)", 0, nil
	}
	totals, err := topology.DecodeValueState[int64, int64](st, "total")
	if err != nil {
		return "", 0, err
	}
	if len(totals) > 1 {
		return "", 0, fmt.Errorf("task %s holds both parities: %v", st.TaskId, totals)
	}
	for parity, v := range totals {
		if parity == 0 {
			return "sum_even", v, nil
		}
		return "sum_odd", v, nil
	}
	if st.Subtask == 0 {
		return "sum_even", 0, nil
	}
	return "sum_odd", 0, nil
}

// closedForm returns the sums of the even and the odd numbers of 1..n. Like
// the job's sums, it wraps around past the int64 range (an unbounded run
// gets there after some 4e9 records), and wraps the same way.
func closedForm(n int64) (even, odd int64) {
	return (n / 2) * (n/2 + 1), ((n + 1) / 2) * ((n + 1) / 2)
}

// runUntilInterrupted waits for ctx (an interrupt), then takes a last
// checkpoint, stops the job and checks the sums that checkpoint holds
// against the records its source had emitted.
func runUntilInterrupted(ctx context.Context, w io.Writer, job *actors.Job, story *story, waiting func()) error {
	fmt.Fprintln(w, "the source has no end (-n 0): interrupt (Ctrl-C) to take a last checkpoint, stop and check it")
	if waiting != nil {
		waiting()
	}
	select {
	case <-ctx.Done():
	case <-job.Done():
		return fmt.Errorf("the job ended without an interrupt: %w", job.Wait())
	}
	// A checkpoint that a failover aborts (the injected failure, say) is
	// tried again.
	var id uint64
	var err error
	for try := 1; ; try++ {
		if id, err = job.Checkpoint(context.Background()); err == nil {
			break
		}
		select {
		case <-job.Done():
			return fmt.Errorf("the last checkpoint: %w (job: %w)", err, job.Wait())
		default:
		}
		if try == 10 {
			job.Stop()
			return fmt.Errorf("the last checkpoint, %d tries: %w", try, err)
		}
	}
	if err := job.Stop(); !errors.Is(err, actors.ErrStopped) {
		return err
	}
	story.print(w)
	return verifyCheckpoint(context.Background(), w, job.Checkpoints(), id)
}

// verifyCheckpoint checks that checkpoint id's sums are those of the
// records its source had emitted.
func verifyCheckpoint(ctx context.Context, w io.Writer, cps *snapshots.Checkpoints, id uint64) error {
	m, err := cps.ReadManifest(ctx, id)
	if err != nil {
		return err
	}
	values := map[string]int64{}
	for _, e := range m.Tasks {
		st, err := cps.ReadTaskState(ctx, e.State)
		if err != nil {
			return err
		}
		name, v, err := describe(st)
		if err != nil {
			return err
		}
		values[name] = v
	}
	n := values["source"]
	wantEven, wantOdd := closedForm(n)
	fmt.Fprintf(w, "last checkpoint %d: the source had emitted 1..%d; sum_even=%d sum_odd=%d (closed form: %d and %d)\n",
		id, n, values["sum_even"], values["sum_odd"], wantEven, wantOdd)
	if values["sum_even"] != wantEven || values["sum_odd"] != wantOdd {
		return fmt.Errorf("exactly-once: FAILED: checkpoint %d holds sums even=%d odd=%d for 1..%d, closed form even=%d odd=%d",
			id, values["sum_even"], values["sum_odd"], n, wantEven, wantOdd)
	}
	fmt.Fprintln(w, "exactly-once: OK")
	return nil
}

func verify(w io.Writer, n int64, results *latest) error {
	even, odd := results.get(0), results.get(1)
	wantEven, wantOdd := closedForm(n)
	fmt.Fprintf(w, "final sums: sum_even=%d sum_odd=%d (closed form: %d and %d)\n", even, odd, wantEven, wantOdd)
	if even != wantEven || odd != wantOdd {
		return fmt.Errorf("exactly-once: FAILED: final sums even=%d odd=%d, closed form even=%d odd=%d", even, odd, wantEven, wantOdd)
	}
	fmt.Fprintln(w, "exactly-once: OK")
	return nil
}

type partial struct {
	parity int64
	sum    int64
}

// latest keeps the newest running sum per parity. Replayed records after a
// recovery rewrite the same values, so the result is exact.
type latest struct {
	mu sync.Mutex
	m  map[int64]int64
}

func newLatest() *latest { return &latest{m: map[int64]int64{}} }

func (l *latest) put(p partial) error {
	l.mu.Lock()
	l.m[p.parity] = p.sum
	l.mu.Unlock()
	return nil
}

func (l *latest) get(parity int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.m[parity]
}
