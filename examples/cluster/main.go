// Command cluster runs one snapflow job across several processes: a
// coordinator and workers, each a process of this same binary, talking over
// protoactor-go remote.
//
// The job: two source tasks emit the records 0..N-1 (paced by -rate), keyed
// by i % keys into a keyed sum of parallelism 3 that keeps each key's count
// and sum in keyed state, into a sink. The KeyBy is a shuffle: every source
// task sends to every sum task, across nodes. When the job ends, the
// coordinator reads the final checkpoint back from the store and checks
// every key's count and sum against the closed form.
//
// With no flags (or -role demo) it is a demo: it starts a coordinator and 3
// workers as child processes on loopback, with a temporary directory as the
// shared store, SIGKILLs a worker once a checkpoint has completed, and tells
// what happened, down to "exactly-once: OK".
//
// By hand, in three shells (every node gets the same job flags and the
// same secret; the coordinator writes the secret's file, mode 0600 in a
// directory of mode 0700, when it does not exist; a node uses the file only
// if it is its user's own and private, as ssh does with keys):
//
//	go run ./examples/cluster -role coordinator -listen 127.0.0.1:7070 -store /tmp/snapflow-cluster -workers 2 -secret-file ~/.snapflow/cluster.secret
//	go run ./examples/cluster -role worker -join 127.0.0.1:7070 -secret-file ~/.snapflow/cluster.secret
//	go run ./examples/cluster -role worker -join 127.0.0.1:7070 -secret-file ~/.snapflow/cluster.secret
//
// The nodes refuse every connection that does not prove the secret
// (docs/cluster.md); without -secret-file they read it from
// $SNAPFLOW_CLUSTER_SECRET, and the demo makes one for its children.
//
// One job on one store has one running coordinator (docs/holder.md): a
// second one is refused, naming the first, unless it is started with
// -takeover, which fences the first (it fails at its next write).
// -inline-limit 0 stores every task state as an object of its own, and
// -sink-dir DIR (given to every node) makes the sink write its output
// exactly once into part files there, which the coordinator checks at the
// end.
//
// With -http ADDR the coordinator (the only node that serves; in the demo,
// the coordinator child) serves the job's dashboard, /metrics and JSON API:
//
//	go run ./examples/cluster -http 127.0.0.1:8080
//
// The lines printed on stdout are described in lines.go.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/actors/restart"
)

func main() {
	os.Exit(exitCode(run(os.Args[1:], os.Stdout, os.Stderr), os.Stderr))
}

// errUsage is wrapped by errors about the command line.
var errUsage = errors.New("usage")

// exitCode is 0 for success and for -h, 2 for bad usage, 1 otherwise.
func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "cluster:", err)
		return 2
	}
	fmt.Fprintln(stderr, "cluster:", err)
	return 1
}

// options are the command line's.
type options struct {
	role             string
	listen, join     string
	store            string
	workers, slots   int
	interval         time.Duration
	batch            int
	batchBytes       int
	heartbeat        time.Duration
	heartbeatTimeout time.Duration
	registerTimeout  time.Duration
	tlsCert, tlsKey  string
	tlsCA            string
	secretFile       string
	secret           string // read from secretFile
	allowPlaintext   bool
	slotTimeout      time.Duration
	loseFrom         int
	startOver        bool
	takeOver         bool
	leaseTimeout     time.Duration
	inlineLimit      int
	retained         int
	fromCheckpoint   uint64
	checkpointMode   string
	alignTimeout     time.Duration
	verbose          bool
	http             string
	maxFailures      int
	failureWindow    time.Duration
	job              jobParams
}

// hiddenFlags are for the tests only and left out of -h.
var hiddenFlags = map[string]bool{"variant": true, "lose-from": true}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.role, "role", "demo", "demo, coordinator or worker")
	fs.StringVar(&o.listen, "listen", cluster.DefaultListen, "this node's address, host:port (port 0 picks a free port)")
	fs.StringVar(&o.join, "join", "", "worker: the coordinator's address, host:port")
	fs.StringVar(&o.store, "store", "", "coordinator: the snapshot store every node opens: a shared directory, file://DIR or s3://BUCKET/PREFIX?endpoint=HOST:PORT")
	fs.IntVar(&o.workers, "workers", 3, "coordinator: how many workers to wait for")
	fs.IntVar(&o.slots, "slots", jobTasks, "worker: how many tasks it runs at most (the default runs the whole job, so that one worker can carry it when the others are lost)")
	fs.DurationVar(&o.interval, "interval", 200*time.Millisecond, "coordinator: the checkpoint interval (0: no periodic checkpoints; a failure reruns the job from the start)")
	fs.IntVar(&o.batch, "batch", actors.DefaultBatchSize, "coordinator: records per batch")
	fs.IntVar(&o.batchBytes, "batch-bytes", 0, "coordinator: bytes per batch (0: the runtime's default)")
	fs.DurationVar(&o.heartbeat, "heartbeat", cluster.DefaultHeartbeatInterval, "coordinator: the heartbeat interval")
	fs.DurationVar(&o.heartbeatTimeout, "heartbeat-timeout", cluster.DefaultHeartbeatTimeout, "coordinator: a worker silent this long is lost")
	fs.DurationVar(&o.registerTimeout, "register-timeout", cluster.DefaultRegisterTimeout, "worker: how long it tries to register with the coordinator")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "mutual TLS: this node's certificate (PEM)")
	fs.StringVar(&o.tlsKey, "tls-key", "", "mutual TLS: this node's private key (PEM)")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "mutual TLS: the CA that signs every node's certificate (PEM)")
	fs.StringVar(&o.secretFile, "secret-file", "", "coordinator and worker: the `file` holding the cluster's secret, the same on every node; used only if it is this user's own with no group or other access; the coordinator writes a new one (mode 0600, in a private directory) when it does not exist (\"\": $"+envSecret+")")
	fs.BoolVar(&o.allowPlaintext, "allow-plaintext", false, "coordinator and worker: let -listen be off loopback without TLS (the cluster's secret still authenticates every connection, but anyone on the network can read the data); logged as a warning")
	fs.IntVar(&o.loseFrom, "lose-from", 0, "test only: a worker's sources lose every batch to another node from this seq on, in the first incarnation (a cut link)")
	fs.DurationVar(&o.slotTimeout, "slot-timeout", cluster.DefaultSlotTimeout, "coordinator: how long a failover waits for workers to offer a slot for every task, when lost workers took too many with them; start a worker meanwhile and the job goes on")
	fs.IntVar(&o.maxFailures, "max-failures", restart.DefaultMaxFailures, "coordinator: failures restarted within -failure-window before the job fails")
	fs.DurationVar(&o.failureWindow, "failure-window", restart.DefaultWindow, "coordinator: how long a failure counts against -max-failures")
	fs.BoolVar(&o.startOver, "start-over", false, "coordinator: discard the job's checkpoints in the store and run it from the beginning")
	fs.BoolVar(&o.takeOver, "takeover", false, "coordinator: take the job over from a coordinator of it that still runs on the same store (it is fenced: it fails at its next write); without it, such a coordinator makes this one exit, naming it")
	fs.DurationVar(&o.leaseTimeout, "lease-timeout", 0, "coordinator: how long another coordinator of the job waits for this one's lease renewals (every tenth of it) before it takes the job over without -takeover (0: the runtime's default, 10s)")
	fs.IntVar(&o.inlineLimit, "inline-limit", -1, "coordinator: keep a task's state in the checkpoint's manifest up to this many `bytes`; 0 stores every state as an object of its own (-1: the runtime's default, which keeps small states inline)")
	fs.StringVar(&o.checkpointMode, "checkpoint-mode", "aligned", "coordinator: aligned, unaligned or at-least-once checkpoints (see actors.WithCheckpointMode)")
	fs.DurationVar(&o.alignTimeout, "align-timeout", 0, "coordinator: switch an aligned checkpoint to unaligned once this long has passed since it was triggered (0: never; see actors.WithAlignmentTimeout)")
	fs.Uint64Var(&o.fromCheckpoint, "from-checkpoint", 0, "coordinator: start the job from this checkpoint of the store (0: resume from the newest); with another -variant, its state and the records in flight of an unaligned checkpoint are redistributed over the new parallelism")
	fs.IntVar(&o.retained, "retain", 0, "coordinator: how many complete checkpoints to keep in the store (0: the runtime's default)")
	fs.BoolVar(&o.verbose, "v", false, "log the runtime's debug messages")
	fs.StringVar(&o.http, "http", "", "coordinator and demo: serve the job's dashboard, /metrics and JSON API on `ADDR` (host:port; a host-less :8080 is loopback)")
	fs.Int64Var(&o.job.records, "records", 20_000, "job: the records in all (the same on every node)")
	fs.Int64Var(&o.job.keys, "keys", 1000, "job: the number of keys (the same on every node)")
	fs.Float64Var(&o.job.rate, "rate", 5000, "job: records/s of all the sources together, so that a run lasts a while (0: as fast as possible)")
	fs.IntVar(&o.job.recordBytes, "record-bytes", 0, "job: pad each record to this many bytes (the same on every node)")
	fs.StringVar(&o.job.sinkDir, "sink-dir", "", "job: the sink writes its output, a line \"key sum\" per record, exactly once into part files in this `directory` (topology/filesink), which every node shares; the coordinator checks them at the end (\"\": the sink discards the output)")
	fs.DurationVar(&o.job.sinkDelay, "sink-delay", 0, "job: the sink (without -sink-dir) spends this long per record, a slow consumer: the records queue behind it, and unaligned checkpoints store those a barrier overtakes (0: none)")
	fs.StringVar(&o.job.hold, "hold", "", "job: the sources pause halfway until this file exists (the demo and the tests use it to act while the job runs)")
	fs.IntVar(&o.job.variant, "variant", 1, "test only: 2 changes the sum's parallelism, and so the topology's fingerprint")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: cluster [-role demo|coordinator|worker] [flags]")
		fs.VisitAll(func(f *flag.Flag) {
			if hiddenFlags[f.Name] {
				return
			}
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(fs.Output(), "  -%s %s\n    \t%s (default %q)\n", f.Name, name, usage, f.DefValue)
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	o.job.holdPoll = 20 * time.Millisecond
	return o, o.check()
}

// check refuses inconsistent options.
func (o options) check() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{errUsage}, args...)...)
	}
	switch o.role {
	case "demo":
	case "coordinator":
		if o.store == "" {
			return bad("-role coordinator needs -store: a store every node opens (a shared directory or s3://...)")
		}
		if o.workers < 1 {
			return bad("-workers %d: want at least 1", o.workers)
		}
	case "worker":
		if o.join == "" {
			return bad("-role worker needs -join HOST:PORT, the coordinator's address")
		}
		if _, _, err := net.SplitHostPort(o.join); err != nil {
			return bad("-join %q: want host:port", o.join)
		}
		if o.slots < 1 {
			return bad("-slots %d: want at least 1", o.slots)
		}
		if o.http != "" {
			return bad("-http is for the coordinator, which holds the job: a worker serves nothing")
		}
	default:
		return bad("-role %q: want demo, coordinator or worker", o.role)
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		return bad("-listen %q: want host:port (port 0 picks a free port)", o.listen)
	}
	switch {
	case o.job.records < 1:
		return bad("-records %d: want at least 1", o.job.records)
	case o.job.keys < 1:
		return bad("-keys %d: want at least 1", o.job.keys)
	case o.job.rate < 0:
		return bad("-rate %v: want 0 (unpaced) or more", o.job.rate)
	case o.job.recordBytes < 0 || o.job.recordBytes > cluster.MaxWireRecord:
		return bad("-record-bytes %d: want 0..%d", o.job.recordBytes, cluster.MaxWireRecord)
	case o.job.sinkDelay < 0 || (o.job.sinkDelay > 0 && o.job.sinkDir != ""):
		return bad("-sink-delay %v: want 0 (none) or a positive duration, without -sink-dir", o.job.sinkDelay)
	case o.job.variant != 1 && o.job.variant != 2:
		return bad("-variant %d: want 1 or 2", o.job.variant)
	case o.interval < 0:
		return bad("-interval %v: want a positive duration, or 0 for no periodic checkpoints", o.interval)
	case o.inlineLimit < -1 || o.inlineLimit > actors.MaxInlineStateLimit:
		return bad("-inline-limit %d: want -1 (the default) or 0..%d", o.inlineLimit, actors.MaxInlineStateLimit)
	case o.leaseTimeout < 0:
		return bad("-lease-timeout %v: want 0 (the default) or a positive duration", o.leaseTimeout)
	case o.retained < 0:
		return bad("-retain %d: want 0 (the default) or more", o.retained)
	case o.checkpointMode != "aligned" && o.checkpointMode != "unaligned" && o.checkpointMode != "at-least-once":
		return bad("-checkpoint-mode %q: want aligned, unaligned or at-least-once", o.checkpointMode)
	case o.alignTimeout < 0 || (o.alignTimeout > 0 && o.checkpointMode != "aligned"):
		return bad("-align-timeout %v: want 0 (the default) or a positive duration with -checkpoint-mode aligned", o.alignTimeout)
	}
	if n := countSet(o.tlsCert, o.tlsKey, o.tlsCA); n != 0 && n != 3 {
		return bad("mutual TLS needs -tls-cert, -tls-key and -tls-ca together")
	}
	return nil
}

func countSet(s ...string) int {
	n := 0
	for _, x := range s {
		if x != "" {
			n++
		}
	}
	return n
}

// envSecret is where the nodes read the cluster's secret from without
// -secret-file.
const envSecret = "SNAPFLOW_CLUSTER_SECRET"

// newSecret returns a random secret: 32 bytes, hex-encoded.
func newSecret() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// loadSecret reads the cluster's secret from file ("" and nil error without
// a file: the runtime reads $SNAPFLOW_CLUSTER_SECRET), only if the file is
// the user's own and private (cluster.ReadSecretFile). A coordinator writes
// a new one there, mode 0600 in a private directory, when the file does not
// exist.
func loadSecret(file string, create bool, logger *slog.Logger) (string, error) {
	if file == "" {
		return "", nil
	}
	if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		if !create {
			return "", fmt.Errorf("-secret-file %s does not exist: start the coordinator with the same -secret-file first (it writes the file), or copy the coordinator's file here (mode 0600)", file)
		}
		secret, err := cluster.CreateSecretFile(file)
		if errors.Is(err, fs.ErrExist) { // another coordinator just wrote it
			return loadSecret(file, false, logger)
		}
		if err != nil {
			return "", fmt.Errorf("-secret-file: %w", err)
		}
		logger.Info("wrote a new cluster secret; give the workers the same -secret-file", "file", file)
		return secret, nil
	}
	secret, err := cluster.ReadSecretFile(file)
	if err != nil {
		return "", fmt.Errorf("-secret-file: %w", err)
	}
	return secret, nil
}

// tls returns the TLS settings, nil without TLS.
func (o options) tls() *cluster.TLS {
	if o.tlsCert == "" {
		return nil
	}
	return &cluster.TLS{CertFile: o.tlsCert, KeyFile: o.tlsKey, CAFile: o.tlsCA}
}

func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	// SIGINT and SIGTERM end ctx with errSignalled as its cause.
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case s := <-sigs:
			cancel(fmt.Errorf("%w (%v)", errSignalled, s))
		case <-ctx.Done():
		}
	}()
	// Info by default, without protoactor-go's own Info lines; -v logs
	// everything down to Debug.
	var h slog.Handler = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})
	if o.verbose {
		h = slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug})
	} else {
		h = quietProtoactor{Handler: h}
	}
	logger := slog.New(h).With("role", o.role)
	if o.role != "demo" {
		if o.secret, err = loadSecret(o.secretFile, o.role == "coordinator", logger); err != nil {
			return err
		}
	}
	switch o.role {
	case "coordinator":
		return runCoordinator(ctx, o, stdout, logger)
	case "worker":
		return runWorker(ctx, o, stdout, logger)
	}
	return runDemo(ctx, o, stdout, stderr)
}
