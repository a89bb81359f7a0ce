package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/cluster"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/internal/dataflow"
	"github.com/snapflow/snapflow/internal/nodeauth"
	"github.com/snapflow/snapflow/internal/racedetect"
	"github.com/snapflow/snapflow/topology"
)

// A cluster row runs the parity job across processes on loopback: the row's
// child process is the coordinator, and it starts clusterWorkers workers by
// running this binary again with -child cluster-worker:<spec>. The workers
// build the same graph from the same row configuration, so that their
// topology fingerprint is the coordinator's.
//
// The sink runs on a worker, so the coordinator counts no record itself: it
// opens and closes the measuring window by writing "open" and "close" lines
// to each worker's stdin, and each worker, when the job has ended, prints
// one statsPrefix line on stdout with what its sink counted in the window
// and what its tasks sent to the other node. A worker whose stdin closes
// (its coordinator is gone) stops.
const (
	clusterWorkers      = 2
	clusterWorkerPrefix = "cluster-worker:"
	statsPrefix         = "bench-cluster-worker-stats "
	// clusterStartTimeout bounds the wait for the workers to register and
	// the job to run, and clusterEndTimeout the wait for the workers to
	// exit once the job has ended.
	clusterStartTimeout = time.Minute
	clusterEndTimeout   = 30 * time.Second
	// clusterOverhead is about what a cluster run takes besides its
	// measuring window: starting the workers, their registration, and the
	// end of the job on every node.
	clusterOverhead = 3 * time.Second
	// workerGrace is how long a worker whose coordinator is gone waits for
	// its runtime to stop before it exits anyway.
	workerGrace = 10 * time.Second
)

// workerSpec is what a worker child is given on its command line.
type workerSpec struct {
	Join   string      `json:"join"`   // the coordinator's address
	Job    string      `json:"job"`    // the graph's name, the coordinator's
	Index  int         `json:"index"`  // 0, 1, ...: names its profile and logs
	Config childConfig `json:"config"` // the row, as the coordinator has it
}

// workerStats is what a worker reports on its statsPrefix line.
type workerStats struct {
	Index int `json:"index"`
	// Records reached the sink on this worker in the measuring window of
	// Seconds; Total in the whole run.
	Records int64   `json:"records"`
	Seconds float64 `json:"seconds"`
	Total   int64   `json:"total"`
	// Wire is what this worker's tasks encoded for the other node in the
	// window (cluster.ReadWireStats).
	WireBatches uint64 `json:"wire_batches"`
	WireRecords uint64 `json:"wire_records"`
	WireBytes   uint64 `json:"wire_bytes"`
	// Latency p50/p99 of the sink's records in the window.
	LatencyP50Ms metric `json:"latency_p50_ms"`
	LatencyP99Ms metric `json:"latency_p99_ms"`
	PeakRSSBytes int64  `json:"peak_rss_bytes"`
}

// formatStats is the statsPrefix line of s.
func formatStats(s workerStats) (string, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return "", fmt.Errorf("bench: cluster worker %d: stats: %w", s.Index, err)
	}
	return statsPrefix + string(b) + "\n", nil
}

// errNoStats is wrapped by parseStats when a worker printed no stats line.
var errNoStats = errors.New("bench: cluster worker printed no stats line")

// parseStats reads the last statsPrefix line of a worker's stdout.
func parseStats(out []byte) (workerStats, error) {
	var line string
	for l := range strings.Lines(string(out)) {
		if rest, ok := strings.CutPrefix(l, statsPrefix); ok {
			line = rest
		}
	}
	if line == "" {
		return workerStats{}, fmt.Errorf("%w (stdout %q)", errNoStats, tail(out, 200))
	}
	var s workerStats
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		return workerStats{}, fmt.Errorf("bench: cluster worker stats %q: %w", strings.TrimSpace(line), err)
	}
	return s, nil
}

// tail is at most the last n bytes of b.
func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// clusterTotals are the workers' stats summed into the row's figures.
type clusterTotals struct {
	records, total int64
	seconds        float64 // the longest window of a worker
	wireBytes      uint64
	latencyP50Ms   metric // the sink worker's (the one that counted the most)
	latencyP99Ms   metric
	peakRSSBytes   int64 // summed over the workers
}

// sumStats adds up the workers' stats.
func sumStats(ss []workerStats) clusterTotals {
	var t clusterTotals
	var most int64 = -1
	for _, s := range ss {
		t.records += s.Records
		t.total += s.Total
		t.wireBytes += s.WireBytes
		t.peakRSSBytes += s.PeakRSSBytes
		t.seconds = max(t.seconds, s.Seconds)
		if s.Records > most {
			most, t.latencyP50Ms, t.latencyP99Ms = s.Records, s.LatencyP50Ms, s.LatencyP99Ms
		}
	}
	return t
}

// parsePlacement reads actors.EventPlaced's Placement, "a#0,b#1 -> w1@host:port;
// b#0 -> w2@host:port", into the worker of each task.
func parsePlacement(s string) (map[string]string, error) {
	out := map[string]string{}
	for part := range strings.SplitSeq(s, "; ") {
		tasks, worker, ok := strings.Cut(part, " -> ")
		if !ok || tasks == "" || worker == "" {
			return nil, fmt.Errorf("bench: cluster: placement %q: want \"task,task -> worker; ...\"", s)
		}
		for t := range strings.SplitSeq(tasks, ",") {
			if _, dup := out[t]; dup {
				return nil, fmt.Errorf("bench: cluster: placement %q: task %s placed twice", s, t)
			}
			out[t] = worker
		}
	}
	return out, nil
}

// checkCrossing checks that placement puts some task of operator from and
// some task of operator to on different workers: that the edge between them
// crosses nodes.
func checkCrossing(placement, from, to string) error {
	where, err := parsePlacement(placement)
	if err != nil {
		return err
	}
	var fromW, toW []string
	for task, w := range where {
		switch op, _, _ := strings.Cut(task, "#"); op {
		case from:
			fromW = append(fromW, w)
		case to:
			toW = append(toW, w)
		}
	}
	if len(fromW) == 0 || len(toW) == 0 {
		return fmt.Errorf("bench: cluster: placement %q has no task of %s or of %s", placement, from, to)
	}
	for _, a := range fromW {
		for _, b := range toW {
			if a != b {
				return nil
			}
		}
	}
	return fmt.Errorf("bench: cluster: placement %q keeps the edge %s -> %s on one node: the row would measure no cross-node traffic", placement, from, to)
}

// runCluster measures a cluster row: this process coordinates, and
// clusterWorkers child processes run the tasks, with a fresh temporary
// directory as the store they share.
func runCluster(ctx context.Context, rc rowConfig) (row Row, err error) {
	if rc.Topology != "paritysum" {
		return Row{}, fmt.Errorf("bench: mode cluster runs the paritysum topology only, not %s", rc.Topology)
	}
	if rc.Recovery || rc.SinkRate > 0 {
		return Row{}, errors.New("bench: mode cluster measures neither recovery nor a slow sink")
	}
	interval, err := parseInterval(rc.Interval)
	if err != nil {
		return Row{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return Row{}, fmt.Errorf("bench: cluster: find this binary to run the workers: %w", err)
	}
	dir, err := os.MkdirTemp("", "snapflow-bench-cluster-")
	if err != nil {
		return Row{}, fmt.Errorf("bench: cluster: store directory: %w", err)
	}
	name := fmt.Sprintf("bench-%s-%d", rc.Topology, time.Now().UnixNano())
	var p probe
	g, err := buildJob(name, rc, &p)
	if err != nil {
		os.RemoveAll(dir)
		return Row{}, err
	}
	var job *actors.Job
	var ws *workerSet
	defer func() {
		// Stop the job first: it tells the workers that the job has
		// ended. Then no worker outlives this function, and the store
		// they write to is removed last.
		if job != nil {
			if stopErr := job.Stop(); stopErr != nil && !isStopped(stopErr) && err == nil {
				err = stopErr
			}
		}
		ws.kill()
		if err != nil && ws != nil {
			fmt.Fprint(os.Stderr, ws.logs())
		}
		os.RemoveAll(dir)
	}()

	l := &clusterListener{running: make(chan struct{})}
	secret := nodeauth.NewSecret() // the workers get it through their environment
	job, err = actors.Start(ctx, g,
		cluster.WithCoordinator(cluster.Coordinator{Listen: cluster.DefaultListen, Workers: clusterWorkers, Store: dir, Secret: secret}),
		actors.WithCheckpointInterval(interval), actors.WithCheckpointTimeout(time.Minute),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}),
		actors.WithListener(l.on))
	if err != nil {
		return Row{}, err
	}
	spec := workerSpec{Join: job.Address(), Job: name,
		Config: childConfig{rowConfig: rc, Records: rc.Records, Duration: rc.Duration}}
	if ws, err = startWorkers(ctx, exe, spec, secret, clusterWorkers, rc.CPUProfile); err != nil {
		return Row{}, err
	}
	if rc.Records > 0 {
		l.window.Store(true) // a bounded run is measured whole
		ws.send("open")
	}
	if err := ws.await(ctx, job, l.running, clusterStartTimeout, "the job to run on the workers"); err != nil {
		return Row{}, err
	}
	runningAt := l.runningTime()
	if err := checkCrossing(l.placementSeen(), "source", "sum"); err != nil {
		return Row{}, err
	}
	var elapsed time.Duration
	if rc.Records > 0 {
		if err := ws.await(ctx, job, job.Done(), 0, "the bounded run to end"); err != nil {
			return Row{}, err
		}
		if err := job.Wait(); err != nil {
			return Row{}, err
		}
		// Up to the end of the records, not of the processes: the
		// workers' shutdown is no part of the run.
		elapsed = l.finishedTime().Sub(runningAt)
	} else {
		if err := ws.await(ctx, job, nil, min(time.Second, rc.Duration/5), ""); err != nil { // warm-up
			return Row{}, err
		}
		l.window.Store(true)
		ws.send("open")
		err := ws.await(ctx, job, nil, rc.Duration, "")
		ws.send("close")
		l.window.Store(false)
		if err != nil {
			return Row{}, err
		}
		l.ending.Store(true)
		if err := job.Stop(); err != nil && !isStopped(err) {
			return Row{}, err
		}
	}
	if err := l.failure(); err != nil {
		return Row{}, fmt.Errorf("bench: cluster: the run was not failure-free: %w", err)
	}
	stats, err := ws.wait(clusterEndTimeout)
	if err != nil {
		return Row{}, err
	}
	return l.row(rc, sumStats(stats), elapsed), nil
}

// clusterListener collects the coordinator's events.
type clusterListener struct {
	window  atomic.Bool // set while the measuring window is open
	ending  atomic.Bool // set once the job is being stopped: workers leave
	running chan struct{}

	mu          sync.Mutex
	placement   string
	ranOnce     bool
	runningAt   time.Time // the first EventRunning
	finishedAt  time.Time // EventFinished
	ckpt, align []time.Duration
	bytes       uint64
	failed      error
}

func (l *clusterListener) on(e actors.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch e.Kind {
	case actors.EventPlaced:
		if l.placement == "" {
			l.placement = e.Placement
		}
	case actors.EventRunning:
		if !l.ranOnce {
			l.ranOnce, l.runningAt = true, e.Time
			close(l.running)
		}
	case actors.EventCheckpointCompleted:
		if !e.Final && l.window.Load() {
			l.ckpt, l.align = append(l.ckpt, e.Duration), append(l.align, e.Alignment)
			l.bytes += e.Bytes
		}
	case actors.EventFinished:
		l.ending.Store(true)
		l.finishedAt = e.Time
	case actors.EventTaskFailed, actors.EventNodeLost, actors.EventFailed:
		if l.failed == nil && !l.ending.Load() {
			l.failed = fmt.Errorf("%s %s%s: %w", e.Kind, e.Task, e.Node, e.Err)
		}
	}
}

func (l *clusterListener) runningTime() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runningAt
}

// finishedTime is when the job finished, or now if it did not.
func (l *clusterListener) finishedTime() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.finishedAt.IsZero() {
		return time.Now()
	}
	return l.finishedAt
}

func (l *clusterListener) placementSeen() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.placement
}

func (l *clusterListener) failure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// row is the cluster row of the workers' totals t: records/s over the
// workers' window (a bounded run: over elapsed, from running to finished),
// and the wire bytes per record that reached the sink.
func (l *clusterListener) row(rc rowConfig, t clusterTotals, elapsed time.Duration) Row {
	l.mu.Lock()
	defer l.mu.Unlock()
	records, seconds := t.records, t.seconds
	if rc.Records > 0 {
		records, seconds = t.total, elapsed.Seconds()
	}
	row := Row{Records: records, Seconds: seconds, RecordsPerSec: per(float64(records), seconds), Checkpoints: len(l.ckpt),
		Placement: l.placement, PeakRSSBytes: t.peakRSSBytes}
	row.CkptP50Ms, row.CkptP99Ms = quantiles(l.ckpt)
	row.AlignP50Ms, row.AlignP99Ms = quantiles(l.align)
	row.BytesPerCkpt = per(float64(l.bytes), float64(len(l.ckpt)))
	row.LatencyP50Ms, row.LatencyP99Ms = t.latencyP50Ms, t.latencyP99Ms
	row.WireBytesPerRecord = per(float64(t.wireBytes), float64(records))
	return row
}

// workerSet is the worker processes of a cluster row.
type workerSet struct {
	procs  []*workerProc
	exited chan int // the index of each worker as it exits
}

type workerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout bytes.Buffer // read once the process has exited
	// stderr keeps the end of the worker's logs, shown when the row fails:
	// a worker logs every connection closed at the job's end.
	stderr tailBuffer
	done   chan struct{}
	err    error // cmd.Wait's, once done
}

// tailBuffer keeps the last tailBytes bytes written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

const tailBytes = 1 << 20 // room for race reports (see clusterEnv)

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - tailBytes; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// startWorkers starts n workers of spec, with the cluster's secret in their
// environment. Each is killed if this process dies first, where the
// platform allows (see childAttr), and stops by itself when its stdin
// closes.
func startWorkers(ctx context.Context, exe string, spec workerSpec, secret string, n int, profile string) (*workerSet, error) {
	ws := &workerSet{exited: make(chan int, n)}
	for i := range n {
		spec.Index = i
		spec.Config.CPUProfile = ""
		if profile != "" {
			spec.Config.CPUProfile = fmt.Sprintf("%s-worker%d.pprof", profile, i)
		}
		b, err := json.Marshal(spec)
		if err != nil {
			ws.kill()
			return nil, err
		}
		w := &workerProc{cmd: exec.Command(exe, "-child", clusterWorkerPrefix+string(b)), done: make(chan struct{})}
		w.cmd.SysProcAttr = childAttr()
		w.cmd.Env = append(os.Environ(), nodeauth.EnvSecret+"="+secret)
		w.cmd.Stdout, w.cmd.Stderr = &w.stdout, &w.stderr
		if w.stdin, err = w.cmd.StdinPipe(); err != nil {
			ws.kill()
			return nil, err
		}
		if err := w.cmd.Start(); err != nil {
			ws.kill()
			return nil, fmt.Errorf("bench: cluster: start worker %d: %w", i, err)
		}
		ws.procs = append(ws.procs, w)
		go func() {
			w.err = w.cmd.Wait()
			close(w.done)
			ws.exited <- i
		}()
	}
	return ws, nil
}

// send writes a command line to every worker's stdin; a worker that has
// exited is noticed by await and wait.
func (ws *workerSet) send(cmd string) {
	for _, w := range ws.procs {
		_, _ = io.WriteString(w.stdin, cmd+"\n")
	}
}

// await waits for done (nil: none) or, when d > 0, d. It fails when ctx
// ends, the job ends, a worker exits first, or, with a what to wait for, d
// passes before done. A worker that exits cleanly was told by the
// coordinator that the job has ended: while waiting for the job's end, that
// is no failure.
func (ws *workerSet) await(ctx context.Context, job *actors.Job, done <-chan struct{}, d time.Duration, what string) error {
	if done == nil && d <= 0 {
		return nil // nothing to wait for
	}
	var timeout <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timeout = t.C
	}
	jobDone := job.Done()
	waitingForEnd := done == jobDone
	if waitingForEnd {
		jobDone = nil
	}
	for {
		select {
		case <-done:
			return nil
		case <-timeout:
			if what != "" {
				return fmt.Errorf("bench: cluster: waited %v for %s", d, what)
			}
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-jobDone:
			if err := job.Wait(); err != nil {
				return fmt.Errorf("bench: cluster: the job ended early: %w", err)
			}
			return errors.New("bench: cluster: the job ended early")
		case i := <-ws.exited:
			w := ws.procs[i]
			if waitingForEnd && w.err == nil {
				continue
			}
			return fmt.Errorf("bench: cluster: worker %d exited while the job ran (%v): stdout %q", i, w.err, tail(w.stdout.Bytes(), 200))
		}
	}
}

// wait waits, within d, for every worker to exit after the job's end, and
// returns their stats.
func (ws *workerSet) wait(d time.Duration) ([]workerStats, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	stats := make([]workerStats, len(ws.procs))
	for i, w := range ws.procs {
		select {
		case <-w.done:
		case <-deadline.C:
			return nil, fmt.Errorf("bench: cluster: worker %d still running %v after the job ended", i, d)
		}
		if w.err != nil {
			return nil, fmt.Errorf("bench: cluster: worker %d: %w", i, w.err)
		}
		if r := racedetect.Foreign(w.stderr.String()); len(r) > 0 {
			return nil, fmt.Errorf("bench: cluster: worker %d: %d data races, the first:\n%s", i, len(r), r[0])
		}
		s, err := parseStats(w.stdout.Bytes())
		if err != nil {
			return nil, fmt.Errorf("worker %d: %w", i, err)
		}
		stats[i] = s
	}
	return stats, nil
}

// logs are the ends of the workers' logs, each line prefixed by its
// worker.
func (ws *workerSet) logs() string {
	var b strings.Builder
	for i, w := range ws.procs {
		for l := range strings.Lines(w.stderr.String()) {
			fmt.Fprintf(&b, "worker %d: %s", i, strings.TrimSuffix(l, "\n")+"\n")
		}
	}
	return b.String()
}

// kill closes every worker's stdin, kills the workers still running and
// reaps them. It is safe on a nil set.
func (ws *workerSet) kill() {
	if ws == nil {
		return
	}
	for _, w := range ws.procs {
		_ = w.stdin.Close()
		select {
		case <-w.done:
		default:
			killGroup(w.cmd.Process)
		}
	}
	for _, w := range ws.procs {
		<-w.done
	}
}

// runClusterWorker is a worker child: it serves the job of spec until the
// coordinator ends it, and then prints its stats on stdout. Lines on stdin
// open and close the measuring window; stdin's end means the coordinator
// is gone.
func runClusterWorker(ctx context.Context, specJSON string, stdin io.Reader, stdout io.Writer) error {
	var spec workerSpec
	if err := json.Unmarshal([]byte(specJSON), &spec); err != nil {
		return fmt.Errorf("bench: cluster worker spec: %w", err)
	}
	rc := spec.Config.rowConfig
	rc.Records, rc.Duration = spec.Config.Records, spec.Config.Duration
	var p probe
	g, err := buildJob(spec.Job, rc, &p)
	if err != nil {
		return err
	}
	plan, err := dataflow.NewPlan(g)
	if err != nil {
		return err
	}
	stop, err := startProfile(spec.Config.CPUProfile)
	if err != nil {
		return err
	}
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	win := &workerWindow{p: &p, stats: workerStats{Index: spec.Index}}
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			switch sc.Text() {
			case "open":
				win.open()
			case "close":
				win.close()
			}
		}
		cancel(errors.New("bench: cluster worker: stdin closed: the coordinator is gone"))
		// The runtime stops on ctx; exit anyway if it does not.
		time.AfterFunc(workerGrace, func() { os.Exit(3) })
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("bench_worker", spec.Index)
	err = serveWorker(ctx, cluster.Worker{Join: spec.Join, Slots: len(plan.Tasks), Logger: log,
		Jobs: []func() *topology.Graph{func() *topology.Graph { return g }}})
	if err != nil {
		return err
	}
	win.close()
	s := win.result()
	s.Total = p.records.Load()
	s.PeakRSSBytes = peakRSS()
	line, err := formatStats(s)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, line)
	return err
}

// shutdownPanic is the frame of protoactor-go's remote that panics, now and
// then, as a node shuts down: Remote.Shutdown sends on an endpoint reader's
// channel that the reader's stream handler has closed when the peer went
// away (the race also reported by the race detector, see clusterEnv).
const shutdownPanic = "protoactor-go/remote.(*endpointManager).stop"

// serveWorker is cluster.ServeWorker, surviving the panic of shutdownPanic
// (see survive).
func serveWorker(ctx context.Context, w cluster.Worker) error {
	return survive(w.Logger, func() error { return cluster.ServeWorker(ctx, w) })
}

// survive runs serve and returns its error, and nil when it panics in
// shutdownPanic: that comes after the coordinator has ended the job, and
// whether the run was sound is the coordinator's to say, so the worker
// still reports its stats. Any other panic goes on.
func survive(log *slog.Logger, serve func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if !isShutdownPanic(debug.Stack()) {
				panic(r)
			}
			log.Warn("protoactor-go panicked in Remote.Shutdown after the job; reporting the stats anyway", "panic", fmt.Sprint(r))
			err = nil
		}
	}()
	return serve()
}

// isShutdownPanic says whether a panicking goroutine's stack is in
// shutdownPanic.
func isShutdownPanic(stack []byte) bool { return bytes.Contains(stack, []byte(shutdownPanic)) }

// workerWindow is a worker's measuring window.
type workerWindow struct {
	p *probe

	mu     sync.Mutex
	opened bool
	closed bool
	r0     int64
	t0     time.Time
	w0     cluster.WireStats
	stats  workerStats
}

func (w *workerWindow) open() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.opened {
		return
	}
	w.opened = true
	w.p.window.Store(true)
	w.r0, w.t0, w.w0 = w.p.records.Load(), time.Now(), cluster.ReadWireStats()
}

// close ends the window (once; a window never opened stays empty).
func (w *workerWindow) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.opened || w.closed {
		return
	}
	w.closed = true
	w.p.window.Store(false)
	wire := cluster.ReadWireStats()
	w.stats.Records = w.p.records.Load() - w.r0
	w.stats.Seconds = time.Since(w.t0).Seconds()
	w.stats.WireBatches = wire.Batches - w.w0.Batches
	w.stats.WireRecords = wire.Records - w.w0.Records
	w.stats.WireBytes = wire.Bytes - w.w0.Bytes
	w.stats.LatencyP50Ms, w.stats.LatencyP99Ms = latencies(&w.p.latency)
}

func (w *workerWindow) result() workerStats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// clusterNote is printed under a table with cluster rows: what their
// columns mean, and where the first one's tasks ran.
func clusterNote(rows []Row) string {
	i := slices.IndexFunc(rows, func(r Row) bool { return r.Mode == "cluster" })
	if i < 0 {
		return ""
	}
	return fmt.Sprintf(`cluster: a coordinator and %d workers, each a process, on loopback, with a directory store; its "%% of off" is against
  the cluster row with checkpoints off, "%% of in-proc off" against the abs row with checkpoints off; wire B/record: bytes
  the workers encoded for the other node per record at the sink; peak RSS: the sum of the three processes' peaks.
cluster placement: %s
`, clusterWorkers, rows[i].Placement)
}
