// Command kafka runs a keyed aggregation job Kafka -> snapflow -> Kafka
// and checks that every input record's effect is visible exactly once to a
// read_committed consumer.
//
// The input topic holds orders (id, customer, amount in cents). The job
// reads it with kafka.Source (read_committed, partitions as splits, their
// offsets in snapflow's checkpoints), keys it by customer, keeps each
// customer's order count and running total, and emits one effect per order
// (its id, the customer's count and new total) to the output topic through
// kafka.Sink, in one Kafka transaction per sink task and checkpoint.
//
// With no flags it starts kfake, franz-go's in-process Kafka cluster,
// creates both topics, fills the input, and runs the job with checkpoints
// every 50 ms while it injects seeded task failures (panics of tasks, and
// one failure of a sink task between a checkpoint's completion and its
// commit). Once half the effects are committed it restarts the whole job
// (Stop, then Start on the same store; -restart chooses). Once the
// read_committed output holds an effect for every order, it stops the job
// with a savepoint, reads the output back with a read_committed consumer,
// and prints "exactly-once: OK" (exit 0) or what differs (exit 1).
//
//	go run ./examples/kafka
//	go run ./examples/kafka -brokers localhost:9092 -records 100000
//	go run ./examples/kafka -brokers localhost:9092 -phase fill -in orders -out totals
//	go run ./examples/kafka -brokers localhost:9092 -phase run -in orders -out totals -store /tmp/totals
//	go run ./examples/kafka -brokers localhost:9092 -phase verify -in orders -out totals
//
// The source never ends by itself: the job is stopped once the output,
// read as a consumer reads it, is complete.
//
// With -http ADDR the job's dashboard, /metrics and JSON API are served
// while it runs (-phase all or run), across its restart:
//
//	go run ./examples/kafka -records 1000000 -http 127.0.0.1:8080
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := exitCode(run(ctx, os.Args[1:], os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage is wrapped by errors about the command line (exit 2).
var errUsage = errors.New("usage")

// exitCode is 0 for success and -h, 2 for bad flags, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "kafka example:", err)
		return 2
	}
	fmt.Fprintln(stderr, "kafka example:", err)
	return 1
}

// Bounds of the flags.
const (
	maxRecords    = 10_000_000
	maxCustomers  = 10_000_000
	maxPartitions = 1000
)

// The phases.
const (
	phaseAll    = "all"
	phaseFill   = "fill"
	phaseRun    = "run"
	phaseVerify = "verify"
)

// The ways to restart the whole job part way.
const (
	restartStop      = "stop"
	restartSavepoint = "savepoint"
	restartNone      = "none"
)

type options struct {
	brokers    []string
	inProcess  bool // the brokers are kfake's, in this process
	in, out    string
	partitions int
	records    int64
	customers  int64
	chunks     int
	store      string
	seed       uint64
	faults     int
	restart    string
	interval   time.Duration
	timeout    time.Duration
	phase      string
	verbose    bool
	http       string
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	var brokers string
	var seed int64
	fs := flag.NewFlagSet("kafka", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&brokers, "brokers", "", "seed brokers of a Kafka cluster, `HOST:PORT,...` (default: start kfake, an in-process broker)")
	fs.StringVar(&o.in, "in", "orders", "the input `topic`")
	fs.StringVar(&o.out, "out", "totals", "the output `topic`")
	fs.IntVar(&o.partitions, "partitions", 4, "partitions of the topics this program creates")
	fs.Int64Var(&o.records, "records", 20_000, "orders in the input; give the same to every phase")
	fs.Int64Var(&o.customers, "customers", 50, "customers the orders are spread over; give the same to every phase")
	fs.IntVar(&o.chunks, "chunks", 20, "with -phase all, write the input in this many chunks, each once the output holds the effects of all but the last (1: all before the job starts)")
	fs.StringVar(&o.store, "store", "", "snapshot store URL: a directory, file://DIR, mem:// or s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false (default: a fresh temporary directory)")
	fs.Int64Var(&seed, "seed", 0, "seed of the injected failures (default: from the clock; the run prints it)")
	fs.IntVar(&o.faults, "faults", 4, "task failures to inject: one between a checkpoint's completion and its commit, the others panics of distinct tasks (0: none)")
	fs.StringVar(&o.restart, "restart", restartStop, "how the whole job is restarted once half the output is committed: stop (Stop, then Start on the same store), savepoint (StopWithSavepoint, then Start), or none")
	fs.DurationVar(&o.interval, "interval", 50*time.Millisecond, "checkpoint interval")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "give up when the run takes longer")
	fs.StringVar(&o.phase, "phase", phaseAll, "what to do: all (fill, run, verify), fill (create the topics and fill the input), run (run the job until the output is complete, then stop it with a savepoint; resumes from the store), verify (check the output)")
	fs.BoolVar(&o.verbose, "v", false, "log the runtime's debug messages to stderr")
	fs.StringVar(&o.http, "http", "", "serve the job's dashboard, /metrics and JSON API on `ADDR` (host:port; a host-less :8080 is loopback) while it runs")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	bad := func(format string, args ...any) (options, error) {
		return o, fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	if fs.NArg() > 0 {
		return bad("unexpected arguments %q", fs.Args())
	}
	for b := range strings.SplitSeq(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.brokers = append(o.brokers, b)
		}
	}
	o.seed = uint64(seed)
	if seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	switch {
	case o.records < 1 || o.records > maxRecords:
		return bad("-records %d: must be between 1 and %d", o.records, maxRecords)
	case o.customers < 1 || o.customers > maxCustomers:
		return bad("-customers %d: must be between 1 and %d", o.customers, maxCustomers)
	case o.partitions < 1 || o.partitions > maxPartitions:
		return bad("-partitions %d: must be between 1 and %d", o.partitions, maxPartitions)
	case o.in == "" || o.out == "" || o.in == o.out:
		return bad("-in %q, -out %q: give two distinct topics", o.in, o.out)
	case o.chunks < 1 || o.phase == phaseAll && int64(o.chunks) > o.records:
		return bad("-chunks %d: must be between 1 and -records", o.chunks)
	case o.faults < 0:
		return bad("-faults %d: must not be negative", o.faults)
	case o.interval <= 0:
		return bad("-interval %v: must be positive (the sink commits at checkpoints)", o.interval)
	case o.timeout <= 0:
		return bad("-timeout %v: must be positive", o.timeout)
	}
	switch o.restart {
	case restartStop, restartSavepoint, restartNone:
	default:
		return bad("-restart %q: want stop, savepoint or none", o.restart)
	}
	switch o.phase {
	case phaseAll:
	case phaseFill, phaseRun, phaseVerify:
		if len(o.brokers) == 0 {
			return bad("-phase %s needs -brokers: an in-process broker ends with the process", o.phase)
		}
		if o.http != "" && o.phase != phaseRun {
			return bad("-http serves a running job: -phase %s runs none (give it with -phase all or run)", o.phase)
		}
	default:
		return bad("-phase %q: want all, fill, run or verify", o.phase)
	}
	return o, nil
}

// printer writes lines to stdout from any goroutine.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

// Write writes b as it is, for a writer that prints whole lines.
func (p *printer) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.w.Write(b)
}

func (p *printer) say(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format+"\n", args...)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the run took longer than -timeout %v", o.timeout))
	defer cancel()
	p := &printer{w: stdout}
	if len(o.brokers) == 0 {
		stopBroker, err := startKfake(&o)
		if err != nil {
			return err
		}
		defer stopBroker()
		p.say("kafka: kfake, an in-process cluster of %d brokers, at %s (-brokers HOST:PORT,... uses a real cluster)", kfakeBrokers, strings.Join(o.brokers, ","))
	}
	if o.phase == phaseAll || o.phase == phaseFill {
		if err := prepare(ctx, o, p); err != nil {
			return err
		}
	}
	if o.phase == phaseAll || o.phase == phaseRun {
		if err := runJob(ctx, o, p, stderr, o.phase == phaseAll && o.chunks > 1); err != nil {
			return err
		}
	}
	if o.phase == phaseAll || o.phase == phaseVerify {
		return verify(ctx, o, p)
	}
	return nil
}
