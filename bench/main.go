// Command bench measures snapflow's barrier overhead. Every configuration is
// a row, measured side by side in one run: snapflow with asynchronous barrier
// snapshots (abs) at each checkpoint interval, the stop-the-world synchronous
// mode (sync), the same job across a coordinator and two worker processes
// on loopback (cluster), a hand-written protoactor-go pipeline of the same
// shape and work (protoactor), and a Go-channels pipeline (channels). Each
// run of a row is its own child process, so that its peak RSS is its own. The rows are
// run -repeat times (5 by default), interleaved, and each reports its median
// run and the spread of its runs. `go run ./bench -h` lists the flags.
//
// Sweeps vary one thing instead (-sweep): state size, fan-in, recovery,
// parallelism, backpressure, latency, rescale, which measures
// restoring a savepoint at its parallelism and at another (rescale.go), and
// incremental, which measures full and incremental checkpoints side by side:
// what a checkpoint uploads (uploaded_bytes_per_ckpt) against the state
// (state_bytes) when only a fraction of the keys changes per second
// (-update-fraction), with -state-size given as a total such as 64MiB, the
// checkpoint p99 of the incremental row against the full row's, and the
// restore of the newest checkpoint against the raw reads of the same bytes
// (restore.go).
//
//	go run ./bench -topology paritysum -intervals off,1s,100ms,20ms -duration 4s -repeat 9 -json rows.json -plot rows.png
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snapflow/snapflow/internal/racedetect"
)

type flags struct {
	topology    string
	modes       string
	intervals   string
	parallelism int
	recordSize  int
	keys        uint64
	stateSize   int             // bytes of keyed state per key, from -state-size
	fraction    float64         // -update-fraction
	maxPar      int             // -max-parallelism
	backend     string          // -backend
	rewrite     int             // -rewrite-every
	set         map[string]bool // flags given on the command line
	rate        float64
	duration    time.Duration
	records     int64
	store       string
	sweep       string
	jsonOut     string
	plotOut     string
	child       string
	repeat      int
	from        string
	cpuprofile  string
	sizes       string
	backlog     int64
	queries     string
}

// Defaults of -modes and -intervals, which -topology kafka reads as
// defaultKafkaModes and defaultKafkaIntervals.
const (
	defaultModes          = "abs,sync,cluster,protoactor,channels"
	defaultIntervals      = "off,1s,100ms,20ms"
	defaultKafkaModes     = "loop,alo,eo"
	defaultKafkaIntervals = "1s,100ms"
)

// Defaults of the flags that decide how long a run takes.
const (
	defaultDuration = 2 * time.Second
	defaultRepeat   = 5
)

// Defaults of -sweep incremental, where -state-size and -update-fraction
// are not given.
const (
	defaultIncrementalState    = "64MiB"
	defaultIncrementalFraction = "0.01"
)

// parseStateSize reads -state-size: a bare number is bytes per key; a
// number with a unit (KiB, MiB, GiB) is the total over keys keys, and the
// bytes per key are total/keys, rounded down, at least 1. total reports
// which it was.
func parseStateSize(s string, keys uint64) (perKey int, total bool, err error) {
	s = strings.TrimSpace(s)
	num, mult := s, int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			num, mult, total = strings.TrimSpace(n), u.m, true
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 || (total && n == 0) || n > math.MaxInt64/mult {
		return 0, false, fmt.Errorf("%q: want bytes per key (a number >= 0), or a total over -keys with a unit, such as 64MiB", s)
	}
	if !total {
		return int(n), false, nil
	}
	per := uint64(n*mult) / max(keys, 1)
	if per == 0 {
		return 0, false, fmt.Errorf("%q over %d keys is less than a byte per key", s, keys)
	}
	return int(per), true, nil
}

// errUsage marks a command line that cannot run: main exits 2.
var errUsage = errors.New("bench: usage")

const usageHead = `usage: go run ./bench [flags]

bench measures snapflow's barrier overhead. Every configuration is a row: snapflow
with asynchronous barrier snapshots (abs) at each checkpoint interval, stop-the-world
snapshots (sync), the same job across a coordinator and 2 worker processes (cluster),
and two hand-written baselines of the same work (protoactor, channels). Each run of a row is its own child process; the rows are run -repeat times,
interleaved, and each row reports its median run. With the defaults this takes about
two minutes.

flags:
`

func parseFlags(args []string, stderr io.Writer) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usageHead)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.topology, "topology", "paritysum", "paritysum, chain-N, fanout, union, diamond, fanin-F, kafka (Kafka in and out on\n"+
		"kfake: modes loop, alo and eo; see bench/kafka.go), or nexmark (the Nexmark queries, checked against\n"+
		"their references, with checkpoints off and exactly-once at 1s, beside a hand-written loop and Flink's\n"+
		"published figures; -records is the events per run, default 2M; see bench/nexmark.go)")
	fs.StringVar(&f.modes, "modes", defaultModes, "modes to run, comma-separated (cluster, protoactor and channels: paritysum only;\n"+
		"with -topology kafka the default is "+defaultKafkaModes+")")
	fs.StringVar(&f.intervals, "intervals", defaultIntervals, "checkpoint intervals, comma-separated (off: no periodic checkpoint;\n"+
		"with -topology kafka the default is "+defaultKafkaIntervals+", the eo rows' intervals)")
	fs.Int64Var(&f.backlog, "backlog", 0, "-topology kafka without -rate: records filled into the input topic before each run\n"+
		"(0: enough for 3.5M records/s through the warm-up, -duration and the tail)")
	fs.StringVar(&f.queries, "queries", "all", "-topology nexmark: the queries to run, comma-separated (q0,q1,q2,q3,q4,q5,q7,q8,q11);\n"+
		"-backend disk runs them with their state on disk too, beside the heap rows")
	fs.IntVar(&f.parallelism, "parallelism", 2, "parallelism of the keyed sum")
	fs.StringVar(&f.backend, "backend", "", "where keyed state lives in the rows: heap (the default), disk (actors.WithDiskState)\n"+
		"or disk-nolocal (on disk, without task-local recovery); "+
		"-sweep statebackend runs both")
	fs.IntVar(&f.maxPar, "max-parallelism", 0, "key groups of the job's keyed state (0: max(128, -parallelism)); changes are tracked per\n"+
		"key group, so with hashed keys this bounds how little an incremental checkpoint can upload")
	fs.IntVar(&f.recordSize, "record-size", 16, "bytes per record")
	fs.Uint64Var(&f.keys, "keys", 1024, "number of keys")
	fs.IntVar(&f.rewrite, "rewrite-every", 0, "-sweep incremental: the incremental rows store every key group again at least once every N\n"+
		"checkpoints, spread over them (actors.WithIncrementalCheckpoints); 0: the runtime's default")
	stateSpec := fs.String("state-size", "0", "keyed state besides the sums: a bare number is bytes per key (as before, e.g. 1024);\n"+
		"a number with a unit, KiB, MiB or GiB, is the total over -keys keys (e.g. 64MiB: 64 KiB per key of 1024),\n"+
		"rounded down to whole bytes per key. Every key holds its bytes from the first records on")
	fs.Float64Var(&f.fraction, "update-fraction", 1, "fraction F (0 < F <= 1) of the keys whose state changes per second: the source writes\n"+
		"a window of max(1, F*keys) keys, which moves on each second (after one record per key);\n"+
		"1: every key in turn")
	fs.Float64Var(&f.rate, "rate", 0, "records/s offered by the source (0: as fast as possible)")
	fs.DurationVar(&f.duration, "duration", defaultDuration, "measuring time per run of a row (after a warm-up of a fifth of it, at most 1s)")
	fs.Int64Var(&f.records, "records", 0, "instead of -duration, run each row until this many records have reached the sink, and measure the whole run")
	fs.StringVar(&f.store, "store", "mem://", "snapshot store URL: mem://, a directory, or s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false")
	fs.StringVar(&f.sweep, "sweep", "", "a sweep instead: state-size, fan-in, recovery, parallelism, backpressure, latency, monitoring (metrics, API and dashboard served and polled, against none),\n"+
		"backpressure-checkpoints (aligned, unaligned, aligned with a 10ms timeout and at-least-once checkpoints at 100ms: unthrottled,\n"+
		"behind a sink 10 times slower, with a failure there, a skewed union, and behind a sink 1,000 times slower),\n"+
		"eventtime (sources with watermarks, and one event-time timer per record, against neither),\n"+
		"rescale, or incremental (full and incremental checkpoints side by side: what a checkpoint uploads against\n"+
		"the state, checkpoint p99, and a restore against raw reads of the same bytes, at 100ms or -intervals;\n"+
		"-state-size defaults to "+defaultIncrementalState+" and -update-fraction to "+defaultIncrementalFraction+" there),\n"+
		"or statebackend (the heap backend against the on-disk one, with checkpoints off, then full and incremental\n"+
		"checkpoints at 1s or -intervals, measured as -sweep incremental measures them; -intervals off: the two\n"+
		"checkpoints-off rows alone)")
	fs.StringVar(&f.sizes, "sizes", defaultRescaleSizes, "-sweep rescale: sizes of keyed state (over -keys keys), comma-separated, in bytes, KiB, MiB or GiB;\n"+
		"with -backend disk the default is "+defaultDiskRescaleSizes+" over a key per "+fmt.Sprint(diskRescaleValueBytes)+" bytes (unless -keys is given), restored from\n"+
		"incremental checkpoints at 2→2, 2→3, 3→3 and 3→2, each restore split into download, rebuild and restart")
	fs.StringVar(&f.jsonOut, "json", "", "write the rows as a JSON array to this file (a metric not measured is null)")
	fs.StringVar(&f.plotOut, "plot", "", "draw throughput and p99 latency against the interval into this PNG")
	fs.StringVar(&f.from, "from", "", "measure nothing: read the rows of a file written by -json, and print, -json and -plot them")
	fs.StringVar(&f.child, "child", "", "internal: run one row given as JSON and print it, or a cluster row's worker ("+clusterWorkerPrefix+"JSON)")
	fs.StringVar(&f.cpuprofile, "cpuprofile", "", "write a CPU profile of every run into this directory: TOPOLOGY-MODE-INTERVAL-runK.pprof\n"+
		"(with -stateN, -rateN, -sinkrateN or -recovery before -runK for such rows; a kafka row's covers its window),\n"+
		"and for a cluster row one for the coordinator (-coordinator.pprof) and each worker (-workerI.pprof)")
	fs.IntVar(&f.repeat, "repeat", defaultRepeat, "runs of each row, interleaved; a row reports its median run by records/s.\n"+
		"On a shared machine one run of a row can differ from the next by 1.7x, so one run says\n"+
		"little; the median of 5 keeps one outlier from deciding a row, and the spread column\n"+
		"shows how far the runs differ")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, errUsage // the flag set has printed the error and the usage
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("%w: unexpected arguments %q (flags only; -h lists them)", errUsage, fs.Args())
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	if f.sweep == "incremental" || f.sweep == "statebackend" {
		if !f.set["state-size"] {
			*stateSpec = defaultIncrementalState
		}
		if !f.set["update-fraction"] {
			f.fraction, _ = strconv.ParseFloat(defaultIncrementalFraction, 64)
		}
	}
	var err error
	if f.stateSize, _, err = parseStateSize(*stateSpec, f.keys); err != nil {
		return f, fmt.Errorf("%w: -state-size: %v", errUsage, err)
	}
	if !(f.fraction > 0 && f.fraction <= 1) { // also NaN
		return f, fmt.Errorf("%w: -update-fraction %v: want 0 < F <= 1", errUsage, f.fraction)
	}
	if f.rewrite < 0 {
		return f, fmt.Errorf("%w: -rewrite-every %d: want 0 (the runtime's default) or at least 1", errUsage, f.rewrite)
	}
	return f, nil
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode is 0 for success and -h, 2 for a command line that cannot run,
// and 1 for a failed run. It prints the error, unless the flag set has.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		if err != errUsage {
			fmt.Fprintln(stderr, err)
		}
		return 2
	default:
		msg := err.Error()
		if !strings.HasPrefix(msg, "bench: ") {
			msg = "bench: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
}

// run is the bench program: the table goes to stdout, progress to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if f.child != "" {
		return runChild(ctx, f.child, stdout)
	}
	if f.cpuprofile != "" {
		if err := os.MkdirAll(f.cpuprofile, 0o755); err != nil {
			return fmt.Errorf("bench: -cpuprofile: %w", err)
		}
	}
	if f.sweep == "rescale" {
		return runRescaleSweep(ctx, f, stdout, stderr)
	}
	if f.topology == "nexmark" {
		return runNexmark(ctx, f, stdout, stderr)
	}
	var rows []Row
	if f.from != "" {
		rows, err = loadRows(f.from)
	} else {
		rows, err = measureAll(ctx, stderr, f)
	}
	if err != nil {
		return err
	}
	ratios(rows)
	if err := printTable(stdout, rows); err != nil {
		return err
	}
	if f.jsonOut != "" {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(f.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if f.plotOut != "" {
		if err := plotRows(f.plotOut, rows); err != nil {
			return err
		}
	}
	return nil
}

// measureAll measures the rows that f asks for, and the follow-up rows of a
// sweep.
func measureAll(ctx context.Context, stderr io.Writer, f flags) ([]Row, error) {
	configs, err := plan(f)
	if err != nil {
		return nil, err
	}
	if f.records == 0 {
		perRun := f.duration + min(time.Second, f.duration/5) + 300*time.Millisecond // warm-up, start and stop
		var total time.Duration
		for _, rc := range configs {
			switch {
			case rc.Topology == "kafka":
				total += kafkaRunTime(rc)
			case rc.Mode == "cluster":
				total += perRun + clusterOverhead
			default:
				total += perRun
			}
		}
		fmt.Fprintf(stderr, "bench: %s × %s of about %v each: about %v in all\n",
			plural(len(configs), "row"), plural(f.repeat, "run"), (total / time.Duration(len(configs))).Round(100*time.Millisecond),
			(total * time.Duration(f.repeat)).Round(100*time.Millisecond))
	}
	rows, err := measure(ctx, stderr, configs, f.repeat, f.cpuprofile)
	if err != nil {
		return nil, err
	}
	var more []rowConfig
	for _, r := range rows {
		more = append(more, followUps(stderr, f.sweep, r)...)
	}
	if f.topology == "kafka" && f.records == 0 && f.rate == 0 {
		more = kafkaLatencyRows(stderr, rows)
	}
	if len(more) > 0 {
		extra, err := measure(ctx, stderr, more, f.repeat, f.cpuprofile)
		if err != nil {
			return nil, err
		}
		rows = append(rows, extra...)
	}
	return rows, nil
}

// loadRows reads the rows of a JSON file written by -json. Files written
// before metrics could be null hold 0 for what was not measured: a figure
// of no checkpoint, no record or no recovery reads as not measured.
func loadRows(path string) ([]Row, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: -from: %w", err)
	}
	var rows []Row
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("bench: -from %s: %w", path, err)
	}
	for i := range rows {
		r := &rows[i]
		if r.Checkpoints == 0 {
			r.CkptP50Ms, r.CkptP99Ms, r.AlignP50Ms, r.AlignP99Ms, r.BytesPerCkpt = metric{}, metric{}, metric{}, metric{}, metric{}
			r.StateBytes, r.UploadedBytesPerCkpt = metric{}, metric{}
		}
		if r.Records == 0 {
			r.LatencyP50Ms, r.LatencyP99Ms = metric{}, metric{}
			if r.Seconds == 0 {
				r.RecordsPerSec = metric{}
			}
		}
		if v, ok := r.RecoveryMs.value(); ok && v == 0 {
			r.RecoveryMs = metric{}
		}
		// Recovery is not in the JSON (a child gets it apart): a row that
		// measured a recovery injected a failure, and its ratios are set
		// against the rows that did too.
		if _, ok := r.RecoveryMs.value(); ok {
			r.Recovery = true
		}
	}
	return rows, nil
}

// plural is "1 row" or "n rows".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// measure runs every configuration repeat times, round robin so that the
// machine's drifts spread evenly, and keeps each one's median run, with the
// spread of the runs' records/s. With a profile directory, each run writes
// its CPU profiles there.
func measure(ctx context.Context, progress io.Writer, configs []rowConfig, repeat int, profiles string) ([]Row, error) {
	runs := make([][]Row, len(configs))
	names := map[string]bool{} // profile names taken, with a row number added to a repeated one
	for k := range repeat {
		for i, rc := range configs {
			fmt.Fprintf(progress, "[%d/%d] %s ...", k*len(configs)+i+1, repeat*len(configs), describe(rc))
			if profiles != "" {
				name := profileName(rc, k)
				if names[name] {
					name = fmt.Sprintf("%s-row%d", name, i+1)
				}
				names[name] = true
				rc.CPUProfile = filepath.Join(profiles, name)
			}
			row, err := runInChild(ctx, progress, rc)
			if err != nil {
				fmt.Fprintln(progress, " failed")
				return nil, fmt.Errorf("%s: %w", describe(rc), err)
			}
			if v, ok := row.RecordsPerSec.value(); ok {
				fmt.Fprintf(progress, " %s records/s\n", thousands(v, 0))
			} else {
				fmt.Fprintf(progress, " records/s not measured (%s records in %.3fs)\n", count(row.Records), row.Seconds)
			}
			row.CPUProfile = ""
			runs[i] = append(runs[i], row)
		}
	}
	rows := make([]Row, len(configs))
	for i, rs := range runs {
		rows[i] = median(rs)
	}
	return rows, nil
}

// median is the run with the median records/s (the lower middle when even:
// no upward lean; runs not measured rank lowest), with Runs and Spread set.
func median(rs []Row) Row {
	slices.SortFunc(rs, func(a, b Row) int {
		av, aok := a.RecordsPerSec.value()
		bv, bok := b.RecordsPerSec.value()
		if aok != bok {
			if aok {
				return 1
			}
			return -1
		}
		return cmp.Compare(av, bv)
	})
	row := rs[(len(rs)-1)/2]
	row.Runs = len(rs)
	var lo, hi float64
	n := 0
	for _, r := range rs {
		if v, ok := r.RecordsPerSec.value(); ok {
			if n == 0 {
				lo = v
			}
			hi, n = v, n+1
		}
	}
	if mid, ok := row.RecordsPerSec.value(); ok && n >= 2 && mid > 0 {
		row.Spread = measured((hi - lo) / mid)
	}
	return row
}

// describe names a configuration in progress lines, leaving out what is
// unset (no rate limit, no state) or does not apply (a baseline's interval).
func describe(rc rowConfig) string {
	parts := []string{rc.Topology, rc.Mode}
	if !rc.baseline() {
		parts = append(parts, "interval="+rc.Interval)
	}
	parts = append(parts, fmt.Sprintf("p=%d", rc.Parallelism))
	if rc.StateSize > 0 {
		parts = append(parts, "state="+count(int64(rc.StateSize))+"B/key")
	}
	if rc.UpdateFraction > 0 && rc.UpdateFraction < 1 {
		parts = append(parts, fmt.Sprintf("updated=%g/s", rc.UpdateFraction))
	}
	if rc.MaxParallelism > 0 {
		parts = append(parts, fmt.Sprintf("maxp=%d", rc.MaxParallelism))
	}
	if rc.Checkpointing != "" {
		parts = append(parts, rc.Checkpointing)
	}
	if rc.RewriteEvery > 0 {
		parts = append(parts, fmt.Sprintf("rewrite-every=%d", rc.RewriteEvery))
	}
	if rc.Rate > 0 {
		parts = append(parts, "rate="+thousands(rc.Rate, 0)+"/s")
	}
	if rc.SinkRate > 0 {
		parts = append(parts, "sink-rate="+thousands(rc.SinkRate, 0)+"/s")
		if rc.SinkPaceEvery > 0 {
			parts = append(parts, fmt.Sprintf("sink-pace-every=%d", rc.SinkPaceEvery))
		}
	}
	if rc.Recovery {
		parts = append(parts, "recovery")
	}
	if rc.Monitored {
		parts = append(parts, "monitored")
	}
	return strings.Join(parts, " ")
}

// childConfig is a rowConfig with the fields JSON leaves out of rows.
type childConfig struct {
	rowConfig
	Records    int64         `json:"records_limit"`
	Duration   time.Duration `json:"duration_ns"`
	Recovery   bool          `json:"recovery"`
	CPUProfile string        `json:"cpuprofile,omitempty"`
}

// profileName is the name, without its ending, of the CPU profiles of run
// k of rc: TOPOLOGY-MODE-INTERVAL, then what else sets the row apart (its
// state size, offered rate, sink limit, recovery), then -runK.
func profileName(rc rowConfig, k int) string {
	iv := rc.Interval
	if rc.baseline() {
		iv = "none"
	}
	name := fmt.Sprintf("%s-%s-%s", rc.Topology, rc.Mode, iv)
	if rc.StateSize > 0 {
		name += fmt.Sprintf("-state%d", rc.StateSize)
	}
	if rc.UpdateFraction > 0 && rc.UpdateFraction < 1 {
		name += fmt.Sprintf("-updated%g", rc.UpdateFraction)
	}
	if rc.MaxParallelism > 0 {
		name += fmt.Sprintf("-maxp%d", rc.MaxParallelism)
	}
	if rc.Checkpointing != "" {
		name += "-" + rc.Checkpointing
	}
	if rc.RewriteEvery > 0 {
		name += fmt.Sprintf("-rewrite%d", rc.RewriteEvery)
	}
	if rc.Rate > 0 {
		name += fmt.Sprintf("-rate%.0f", rc.Rate)
	}
	if rc.SinkRate > 0 {
		name += fmt.Sprintf("-sinkrate%.0f", rc.SinkRate)
		if rc.SinkPaceEvery > 0 {
			name += fmt.Sprintf("-every%d", rc.SinkPaceEvery)
		}
	}
	if rc.Recovery {
		name += "-recovery"
	}
	return fmt.Sprintf("%s-run%d", name, k+1)
}

func runInChild(ctx context.Context, stderr io.Writer, rc rowConfig) (Row, error) {
	cc, err := json.Marshal(childConfig{rowConfig: rc, Records: rc.Records, Duration: rc.Duration, Recovery: rc.Recovery, CPUProfile: rc.CPUProfile})
	if err != nil {
		return Row{}, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-child", string(cc))
	cmd.Stderr = stderr
	var races strings.Builder // see clusterEnv
	if cmd.Env = clusterEnv(rc); cmd.Env != nil {
		cmd.Stderr = io.MultiWriter(stderr, &races)
	}
	out, err := cmd.Output()
	if err != nil {
		return Row{}, fmt.Errorf("child: %w", err)
	}
	if r := racedetect.Foreign(races.String()); len(r) > 0 {
		return Row{}, fmt.Errorf("child: %d data races, the first:\n%s", len(r), r[0])
	}
	var row Row
	if err := json.Unmarshal(out, &row); err != nil {
		return Row{}, fmt.Errorf("child output %q: %w", out, err)
	}
	row.rowConfig = rc
	return row, nil
}

// runChild is a child process: it runs the row of spec and prints it as
// JSON, or, for a spec with clusterWorkerPrefix, serves as a worker of a
// cluster row, taking its commands on stdin.
func runChild(ctx context.Context, spec string, stdout io.Writer) error {
	if ws, ok := strings.CutPrefix(spec, clusterWorkerPrefix); ok {
		return runClusterWorker(ctx, ws, os.Stdin, stdout)
	}
	if rs, ok := strings.CutPrefix(spec, rescaleChildPrefix); ok {
		return runRescaleChildSpec(ctx, rs, stdout)
	}
	var cc childConfig
	if err := json.Unmarshal([]byte(spec), &cc); err != nil {
		return err
	}
	rc := cc.rowConfig
	rc.Records, rc.Duration, rc.Recovery = cc.Records, cc.Duration, cc.Recovery
	if cc.CPUProfile != "" {
		rc.CPUProfile = cc.CPUProfile
	}
	// A kafka row profiles its window (kafkaProfile), and so does a row
	// whose window opens once its state is written (windowProfiled).
	if cc.CPUProfile != "" && rc.Topology != "kafka" && !windowProfiled(rc) {
		path := cc.CPUProfile + ".pprof"
		if rc.Mode == "cluster" {
			path = cc.CPUProfile + "-coordinator.pprof"
		}
		stop, err := startProfile(path)
		if err != nil {
			return err
		}
		defer stop()
	}
	row, err := runRow(ctx, rc)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(row)
}

// checkpointKinds are the rows of -sweep incremental at each interval, by
// what a checkpoint uploads: every task's whole state, or what changed
// (actors.WithIncrementalCheckpoints).
var checkpointKinds = []string{"full", "incremental"}
