// Command rescale runs a keyed job through savepoints at changing
// parallelism, and checks that its state stays exactly once.
//
// The job merges the orders of two sources (web and shop) and keeps, per
// customer, the number of orders and the sum of their amounts. With no
// flags it runs at parallelism 2, stops with a savepoint, resumes from it
// at parallelism 3, stops with another savepoint, and finishes at
// parallelism 1. Every resume redistributes the keyed state by key group
// and the sources' splits over the new tasks. It then reads the final
// checkpoint back from the store, compares every customer's totals with
// the closed form, and prints "exactly-once: OK" (exit 0) or what differs
// (exit 1).
//
//	go run ./examples/rescale
//	go run ./examples/rescale -store /tmp/shop -phases 2 -stop-with before-upgrade
//	go run ./examples/rescale -store /tmp/shop -savepoint before-upgrade -phases 4,1
//
// The sources are gated: each phase raises a limit below which they
// produce, waits until every source task has reached it, and stops the job
// with a savepoint there.
//
// With -http ADDR the dashboard, /metrics and the JSON API are served for
// the whole run, each phase's job in turn:
//
//	go run ./examples/rescale -records 100000000 -http 127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/dashboard"
	"github.com/snapflow/snapflow/snapshots"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage is wrapped by errors about the command line (exit 2).
var errUsage = errors.New("usage")

// errNotExact is wrapped by the error of a run whose final state differs
// from the closed form.
var errNotExact = errors.New("the final state differs from the closed form")

// exitCode is 0 for success and -h, 2 for bad flags, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "rescale:", err)
		return 2
	}
	fmt.Fprintln(stderr, "rescale:", err)
	return 1
}

// Bounds of the flags.
const (
	maxRecords = 1_000_000_000
	maxKeys    = 1_000_000
	maxPhases  = 64
)

type options struct {
	store          string
	savepoint      string
	stopWith       string
	phases         []int
	records        int64
	keys           int64
	interval       time.Duration
	hold           bool
	holdCheckpoint bool
	startOver      bool
	verbose        bool
	http           string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var phases string
	fs := flag.NewFlagSet("rescale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.store, "store", "", "snapshot store URL: a directory, file://DIR, mem:// or s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false (default: a fresh temporary directory)")
	fs.StringVar(&o.savepoint, "savepoint", "", "start the first phase from the savepoint called `NAME` (default: resume the job's newest checkpoint, or start from the beginning)")
	fs.StringVar(&phases, "phases", "2,3,1", "the parallelism of each phase, comma-separated; every phase but the last stops with a savepoint that the next starts from")
	fs.Int64Var(&o.records, "records", 600_000, "orders in all, half from each source; keep it when resuming a savepoint of an earlier run")
	fs.Int64Var(&o.keys, "keys", 1000, "customers; keep it when resuming a savepoint of an earlier run")
	fs.StringVar(&o.stopWith, "stop-with", "", "end the last phase with a savepoint called `NAME` instead of running to the end")
	fs.BoolVar(&o.hold, "hold", false, "stop producing at the last phase's stop point and wait to be killed, instead of running to the end (for tests)")
	fs.BoolVar(&o.holdCheckpoint, "hold-checkpoint", false, "with -hold, take a checkpoint at the stop point before waiting")
	fs.BoolVar(&o.startOver, "start-over", false, "discard the job's checkpoints in the store and start from the beginning (its savepoints stay)")
	fs.DurationVar(&o.interval, "interval", 50*time.Millisecond, "periodic checkpoint interval (0: off)")
	fs.BoolVar(&o.verbose, "v", false, "log the runtime's debug messages and the job's events to stderr")
	fs.StringVar(&o.http, "http", "", "serve the dashboard, /metrics and the JSON API on `ADDR` (host:port; a host-less :8080 is loopback) for the whole run")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	var err error
	if o.phases, err = parsePhases(phases); err != nil {
		return o, fmt.Errorf("%w: -phases %q: %w", errUsage, phases, err)
	}
	bad := func(format string, args ...any) (options, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	switch {
	case o.records < 2 || o.records > maxRecords:
		return bad("-records %d: must be between 2 and %d", o.records, maxRecords)
	case o.keys < 1 || o.keys > maxKeys:
		return bad("-keys %d: must be between 1 and %d", o.keys, maxKeys)
	case o.interval < 0:
		return bad("-interval %v: must not be negative", o.interval)
	case o.hold && o.stopWith != "":
		return bad("-hold and -stop-with both say how the last phase ends: give one")
	case o.holdCheckpoint && !o.hold:
		return bad("-hold-checkpoint needs -hold")
	case o.startOver && o.savepoint != "":
		return bad("-start-over and -savepoint both say where the job starts: give one")
	case o.savepoint != "" && o.savepoint == o.stopWith:
		return bad("-stop-with %q: the job starts from that savepoint; a savepoint is never overwritten", o.stopWith)
	}
	for _, f := range []struct{ flag, name string }{{"-savepoint", o.savepoint}, {"-stop-with", o.stopWith}} {
		if f.name == "" {
			continue
		}
		if err := snapshots.ValidateSavepointName(f.name); err != nil {
			return bad("%s: %v", f.flag, err)
		}
	}
	return o, nil
}

// parsePhases parses "2,3,1".
func parsePhases(s string) ([]int, error) {
	parts := strings.Split(s, ",")
	if len(parts) > maxPhases {
		return nil, fmt.Errorf("%d phases, at most %d", len(parts), maxPhases)
	}
	out := make([]int, len(parts))
	for i, p := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return nil, fmt.Errorf("phase %d: %q is not a number", i+1, p)
		}
		if n < 1 || n > maxParallelism {
			return nil, fmt.Errorf("phase %d: parallelism %d must be between 1 and the job's max parallelism, %d", i+1, n, maxParallelism)
		}
		out[i] = n
	}
	return out, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	url, fresh := o.store, false
	if url == "" {
		dir, err := os.MkdirTemp("", "snapflow-rescale-")
		if err != nil {
			return fmt.Errorf("a temporary directory for the store: %w", err)
		}
		url, fresh = dir, true
	}
	store, err := snapshots.Open(ctx, url)
	if err != nil {
		return err
	}
	defer store.Close()
	note := ""
	if fresh {
		note = " (a fresh directory; -store chooses another)"
	}
	fmt.Fprintf(stdout, "store: %s%s\n", store, note)

	level := slog.LevelWarn
	if o.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	srv, err := dashboard.Start(ctx, dashboard.Config{Addr: o.http, Token: os.Getenv(dashboard.TokenEnv), Logger: log})
	if err != nil {
		return err
	}
	if b := srv.Banner(); b != "" {
		fmt.Fprintln(stdout, b)
	}
	defer func() { err = errors.Join(err, srv.Close()) }()
	r := &runner{o: o, srv: srv, shape: shape{records: o.records, keys: o.keys}, store: store, url: url,
		cps: snapshots.NewCheckpoints(store, jobName, log), log: log, stdout: stdout}
	fmt.Fprintf(stdout, "job %q: %d orders from web and shop, keyed by customer (%d) into totals; phases at parallelism %s\n",
		jobName, o.records, o.keys, joinInts(o.phases))
	if r.plan, err = planPhases(ctx, r.cps, o, url); err != nil {
		return err
	}
	for i := range r.plan {
		if err := r.phase(ctx, i); err != nil {
			return err
		}
	}
	if r.plan[len(r.plan)-1].end == endFinish && !strings.HasPrefix(url, "mem://") {
		fmt.Fprintf(stdout, "the savepoints stay in the store; inspect them with:\n  go run ./cmd/snapflow savepoints list --store %s\n", quote(url))
	}
	return nil
}

// endKind is how a phase ends.
type endKind int

const (
	endFinish    endKind = iota // the sources run to their end
	endSavepoint                // stop with a savepoint at the phase's stop point
	endHold                     // wait at the stop point to be killed
)

// phase is one phase of a run.
type phase struct {
	par       int
	end       endKind
	savepoint string // endSavepoint: its name
}

// planPhases names the savepoints of the run: the last one -stop-with,
// the others sp-N, numbered above every sp-N the store holds.
func planPhases(ctx context.Context, cps *snapshots.Checkpoints, o options, url string) ([]phase, error) {
	infos, err := cps.Savepoints(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the savepoints of job %q: %w", jobName, err)
	}
	taken, next := map[string]bool{}, 1
	for _, in := range infos {
		taken[in.Name] = true
		if n, err := strconv.Atoi(strings.TrimPrefix(in.Name, "sp-")); err == nil && strings.HasPrefix(in.Name, "sp-") {
			next = max(next, n+1)
		}
	}
	if o.stopWith != "" && taken[o.stopWith] {
		return nil, fmt.Errorf("savepoint %q of job %q is already in %s: a savepoint is never overwritten; choose another name, or delete it with\n  go run ./cmd/snapflow savepoints delete --store %s --job %s %s",
			o.stopWith, jobName, url, quote(url), jobName, o.stopWith)
	}
	plan := make([]phase, len(o.phases))
	for i, par := range o.phases {
		ph := phase{par: par}
		switch {
		case i < len(o.phases)-1:
			ph.end = endSavepoint
			for ph.savepoint == "" || ph.savepoint == o.stopWith {
				ph.savepoint = fmt.Sprintf("sp-%d", next)
				next++
			}
		case o.stopWith != "":
			ph.end, ph.savepoint = endSavepoint, o.stopWith
		case o.hold:
			ph.end = endHold
		}
		plan[i] = ph
	}
	return plan, nil
}

// runner runs the phases of one run.
type runner struct {
	o      options
	shape  shape
	store  snapshots.Store
	url    string
	cps    *snapshots.Checkpoints
	log    *slog.Logger
	stdout io.Writer
	srv    *dashboard.Server // nil without -http
	plan   []phase
	// stops are the indices the phases that do not run to the end stop
	// at, computed when the first phase has opened its sources.
	stops []int64
	// prev is the savepoint the previous phase stopped with.
	prev string
}

// phase runs phase i: it starts the job (from the previous phase's
// savepoint, or as the flags say for the first), and ends it as planned.
func (r *runner) phase(ctx context.Context, i int) error {
	ph := r.plan[i]
	gt := newGate()
	running := make(chan uint64, 1)
	var lastCheckpoint atomic.Uint64
	opts := append(r.srv.Options(),
		actors.WithStore(r.store), actors.WithCheckpointInterval(r.o.interval), actors.WithLogger(r.log),
		actors.WithListener(func(e actors.Event) {
			switch {
			case e.Kind == actors.EventRunning:
				select {
				case running <- e.Checkpoint: // the first is the phase's start
				default:
				}
			case e.Kind == actors.EventCheckpointCompleted && e.Savepoint == "":
				lastCheckpoint.Store(e.Checkpoint)
			}
			r.log.Debug("event", "kind", e.Kind.String(), "epoch", e.Epoch, "checkpoint", e.Checkpoint, "savepoint", e.Savepoint, "task", e.Task, "err", e.Err)
		}),
	)
	from := "" // the savepoint the phase starts from
	switch {
	case i > 0:
		from = r.prev
	case r.o.savepoint != "":
		from = r.o.savepoint
	case r.o.startOver:
		opts = append(opts, actors.WithStartOver())
	}
	if from != "" {
		opts = append(opts, actors.WithSavepoint(from))
	}
	job, err := actors.Start(ctx, r.shape.build(ph.par, gt), opts...)
	if errors.Is(err, actors.ErrAlreadyFinished) {
		err = fmt.Errorf("%w\n(this example's job already ran to its end in this store: run it with -start-over to run it again, or with -savepoint NAME to resume one of its savepoints)", err)
	}
	if from != "" && errors.Is(err, snapshots.ErrNotFound) {
		err = fmt.Errorf("%w\n(the job has no savepoint %q in this store; list its savepoints with: go run ./cmd/snapflow savepoints list --store %s --job %s)",
			err, from, quote(r.url), jobName)
	}
	if err != nil {
		return fmt.Errorf("phase %d (parallelism %d): %w", i+1, ph.par, err)
	}
	r.srv.Attach(job)
	d := &driver{runner: r, i: i, ph: ph, gt: gt, job: job, tasks: sourceTasks(ph.par), running: running, from: from, last: &lastCheckpoint}
	if err := d.drive(ctx); err != nil {
		if werr := job.Stop(); werr != nil && !errors.Is(werr, actors.ErrStopped) && !errors.Is(err, werr) {
			err = fmt.Errorf("%w (and the job: %v)", err, werr)
		}
		return fmt.Errorf("phase %d (parallelism %d): %w", i+1, ph.par, err)
	}
	return nil
}

// driver drives one phase's job.
type driver struct {
	*runner
	i       int
	ph      phase
	gt      *gate
	job     *actors.Job
	tasks   []string
	running chan uint64
	from    string
	last    *atomic.Uint64
}

func (d *driver) drive(ctx context.Context) error {
	reps, err := d.gt.wait(ctx, d.job.Done(), "the sources to open", allOpened(d.tasks))
	if err != nil {
		return d.ended(err)
	}
	var restored uint64
	select {
	case restored = <-d.running:
	case <-d.job.Done():
		return d.ended(errors.New("the job ended before it ran"))
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	start, produced := int64(math.MaxInt64), int64(0)
	for _, t := range d.tasks {
		start, produced = min(start, reps[t].start), produced+reps[t].emitted
	}
	if d.stops == nil {
		if d.stops, err = d.stopPoints(start); err != nil {
			return err
		}
	}
	from, err := d.describeStart(ctx, restored)
	if err != nil {
		return err
	}
	head := fmt.Sprintf("phase %d: parallelism %d, %s at %d orders", d.i+1, d.ph.par, from, produced)
	switch d.ph.end {
	case endFinish:
		return d.finish(ctx, head)
	case endSavepoint:
		return d.stopWithSavepoint(ctx, head)
	default:
		return d.hold(ctx, head)
	}
}

// ended returns the job's error when it has ended, else err.
func (d *driver) ended(err error) error {
	select {
	case <-d.job.Done():
		if jerr := d.job.Wait(); jerr != nil {
			return jerr
		}
	default:
	}
	return err
}

// stopPoints returns the indices the phases that do not run to the end
// stop at, evenly spaced between start, where the sources stand, and the
// end of the smaller source (so that neither ends before a stop).
func (r *runner) stopPoints(start int64) ([]int64, error) {
	n := 0
	for _, ph := range r.plan {
		if ph.end != endFinish {
			n++
		}
	}
	shares := int64(len(r.plan))
	if r.plan[len(r.plan)-1].end != endFinish {
		shares++ // the rest is for a later run
	}
	end := min(r.shape.webCount(), r.shape.shopCount())
	if n > 0 && start >= end {
		return nil, fmt.Errorf("the sources have produced every order up to index %d of %d already: there is nothing left to stop at; run the job to its end (one phase, without -stop-with or -hold)", min(start, end), end)
	}
	stops := make([]int64, len(r.plan))
	for i := range stops {
		stops[i] = start + (end-start)*int64(i+1)/shares
	}
	return stops, nil
}

// describeStart says where the phase started: the checkpoint restored (0:
// none), from a savepoint the flags named, the job's origin, or its newest
// checkpoint.
func (d *driver) describeStart(ctx context.Context, restored uint64) (string, error) {
	switch {
	case restored == 0:
		return "from the beginning", nil
	case d.from != "":
		return fmt.Sprintf("from savepoint %q (checkpoint %d)", d.from, restored), nil
	}
	origin, err := d.cps.ReadOrigin(ctx)
	if err != nil {
		return "", fmt.Errorf("read where the job started from: %w", err)
	}
	if origin != nil && origin.GetCheckpointId() == restored {
		what := fmt.Sprintf("checkpoint %d", restored)
		if origin.GetSavepoint() != "" {
			what = fmt.Sprintf("savepoint %q (checkpoint %d)", origin.GetSavepoint(), restored)
		}
		return fmt.Sprintf("from %s again (the job's origin: it has no checkpoint of its own yet)", what), nil
	}
	return fmt.Sprintf("from checkpoint %d (the job's newest)", restored), nil
}

// finish lets the sources run to their end, waits for the job, and
// checks the final state.
func (d *driver) finish(ctx context.Context, head string) error {
	d.gt.raise(math.MaxInt64)
	if err := d.job.Wait(); err != nil {
		return err
	}
	return d.checkFinal(ctx, head)
}

// reach raises the gate to the phase's stop point and waits until every
// source task has reached it; it returns the orders produced.
func (d *driver) reach(ctx context.Context) (int64, error) {
	limit := d.stops[d.i]
	d.gt.raise(limit)
	reps, err := d.gt.wait(ctx, d.job.Done(), fmt.Sprintf("the sources to reach index %d", limit), allReached(d.tasks, limit))
	if err != nil {
		return 0, d.ended(err)
	}
	var produced int64
	for _, t := range d.tasks {
		produced += reps[t].emitted
	}
	return produced, nil
}

// stopWithSavepoint stops the job with a savepoint at the phase's stop
// point, reads the savepoint back and checks that its totals count
// exactly the orders its sources produced.
func (d *driver) stopWithSavepoint(ctx context.Context, head string) error {
	if _, err := d.reach(ctx); err != nil {
		return err
	}
	name := d.ph.savepoint
	id, err := d.job.StopWithSavepoint(ctx, name)
	if err != nil {
		return fmt.Errorf("stop with savepoint %q: %w", name, err)
	}
	if err := d.job.Wait(); !errors.Is(err, actors.ErrStopped) {
		return fmt.Errorf("the job after savepoint %q: %v, want it stopped", name, err)
	}
	rp, err := d.cps.LoadSavepoint(ctx, name)
	if err != nil {
		return err
	}
	st, err := readStored(rp)
	if err != nil {
		return fmt.Errorf("savepoint %q: %w", name, err)
	}
	if st.counted() != st.produced {
		return fmt.Errorf("savepoint %q: totals counts %d orders, but its sources had produced %d: %w", name, st.counted(), st.produced, errNotExact)
	}
	fmt.Fprintf(d.stdout, "%s; stopped with savepoint %q (checkpoint %d) at %d of %d orders\n", head, name, id, st.produced, d.shape.records)
	d.prev = name
	return nil
}

// hold stops producing at the phase's stop point, takes a checkpoint if
// asked, says so and waits until the process is killed or interrupted.
func (d *driver) hold(ctx context.Context, head string) error {
	produced, err := d.reach(ctx)
	if err != nil {
		return err
	}
	id := d.last.Load()
	if d.o.holdCheckpoint {
		// Its id, not the listener's: the event may come after the reply.
		if id, err = d.job.Checkpoint(ctx); err != nil {
			return fmt.Errorf("the checkpoint at the hold: %w", err)
		}
	}
	last := "none"
	if id != 0 {
		last = strconv.FormatUint(id, 10)
	}
	fmt.Fprintf(d.stdout, "%s; holding at %d of %d orders, last checkpoint of this phase: %s; waiting to be killed\n",
		head, produced, d.shape.records, last)
	select {
	case <-ctx.Done():
		return fmt.Errorf("interrupted while holding: %w", context.Cause(ctx))
	case <-d.job.Done():
		return d.ended(errors.New("the job ended while holding"))
	}
}

// checkFinal reads the final checkpoint back from the store, ends the
// phase's line with it, and compares every customer's totals with the
// closed form.
func (d *driver) checkFinal(ctx context.Context, head string) error {
	rp, err := d.cps.LoadLatest(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("read the final checkpoint: %w", err)
	case rp == nil || !rp.Manifest.GetFinal():
		return fmt.Errorf("the job finished, but its newest checkpoint in the store is not the final one")
	}
	st, err := readStored(rp)
	if err != nil {
		return err
	}
	fmt.Fprintf(d.stdout, "%s; finished (final checkpoint %d) at %d of %d orders\n", head, rp.Manifest.GetCheckpointId(), st.produced, d.shape.records)
	want := d.shape.want()
	var wantOrders, wantAmount int64
	for _, t := range want {
		wantOrders, wantAmount = wantOrders+t.orders, wantAmount+t.amount
	}
	fmt.Fprintf(d.stdout, "final state, read from checkpoint %d (totals in %d task%s): %d customers, %d orders, %d cents; closed form: %d customers, %d orders, %d cents\n",
		rp.Manifest.GetCheckpointId(), st.totalsTasks, plural(st.totalsTasks), len(st.totals), st.counted(), st.amount(), len(want), wantOrders, wantAmount)
	diffs := diff(st.totals, want)
	if st.produced != d.shape.records {
		diffs = append([]string{fmt.Sprintf("the sources produced %d orders, want %d", st.produced, d.shape.records)}, diffs...)
	}
	if len(diffs) > 0 {
		for _, l := range diffs {
			fmt.Fprintln(d.stdout, "  "+l)
		}
		fmt.Fprintln(d.stdout, "exactly-once: FAILED")
		return errNotExact
	}
	fmt.Fprintln(d.stdout, "exactly-once: OK")
	return nil
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// quote quotes s for a POSIX shell when it holds anything but safe
// characters.
func quote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("/._-:+,=@", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
