package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/actorstest"
	"github.com/snapflow/snapflow/actors/restart"
	"github.com/snapflow/snapflow/bench/baseline"
	"github.com/snapflow/snapflow/internal/benchwork"
	"github.com/snapflow/snapflow/snapshots"
)

// rowConfig is one configuration of the benchmark: a row of the table.
type rowConfig struct {
	Topology    string `json:"topology"`
	Mode        string `json:"mode"`     // abs, sync, cluster, protoactor, channels
	Interval    string `json:"interval"` // off, 1s, 100ms, 20ms, as given
	Parallelism int    `json:"parallelism"`
	RecordSize  int    `json:"record_size"`
	Keys        uint64 `json:"keys"`
	StateSize   int    `json:"state_size"` // bytes of keyed state per key
	// UpdateFraction is the fraction of the keys whose state changes per
	// second: the source's hot window (benchwork.Generator.Hot). 0 or 1:
	// every key.
	UpdateFraction float64 `json:"update_fraction,omitempty"`
	// MaxParallelism is the job's number of key groups (0: the default,
	// max(128, Parallelism)). Incremental checkpoints track changes per key
	// group, so it bounds how little of the state a checkpoint can upload.
	MaxParallelism int `json:"max_parallelism,omitempty"`
	// Checkpointing is what a checkpoint uploads: "full" (every task's
	// whole state) or "incremental" (actors.WithIncrementalCheckpoints: the
	// key groups written since the last checkpoint, and a spread share of
	// rewrites); "" in rows from before it was recorded, which are full.
	// Rows that set it are rows of -sweep incremental: their measuring
	// window opens once a checkpoint holding the whole state has completed,
	// lasts until a checkpoint has completed in it, and is followed by a
	// restore (see measureRestore).
	Checkpointing string `json:"checkpointing,omitempty"`
	// Backend is where keyed state lives: "" on the heap, "disk" on the
	// on-disk backend (actors.WithDiskState, in a temporary directory).
	Backend string `json:"backend,omitempty"`
	// RewriteEvery is, for an incremental row, the rewriteEvery given to
	// actors.WithIncrementalCheckpoints (0: the runtime's default).
	RewriteEvery int           `json:"rewrite_every,omitempty"`
	Rate         float64       `json:"rate"` // records/s offered (0: as fast as possible)
	Records      int64         `json:"-"`    // stop after this many (0: run for Duration)
	Duration     time.Duration `json:"-"`
	Store        string        `json:"store"`
	SinkRate     float64       `json:"sink_rate,omitempty"` // records/s the sink is limited to (0: unlimited)
	// SinkPaceEvery is how many records a sink limited by SinkRate takes
	// between sleeps (0: paceEvery). 1 sleeps for every record, as the sink
	// of Flink's CheckpointingTimeBenchmark does.
	SinkPaceEvery int   `json:"sink_pace_every,omitempty"`
	Backlog       int64 `json:"backlog,omitempty"` // kafka rows without a rate: records filled in before the row (0: sized by kafkaBacklog)
	Recovery      bool  `json:"-"`                 // inject one failure and measure the recovery
	// Monitored rows serve the job's metrics, API and dashboard
	// (actors/dashboard), scraped and polled every second and with an event
	// stream open, as a Prometheus server and an open dashboard would.
	Monitored bool `json:"monitored,omitempty"`
	// EventTime is "" (no event time), "watermarks" (the sources stamp
	// records with their TS and send watermarks, out-of-orderness 0) or
	// "timers" (watermarks, and the keyed sum registers one event-time
	// timer per record, 1ms after it, which fires as the watermark
	// passes).
	EventTime  string `json:"event_time,omitempty"`
	CPUProfile string `json:"-"` // the run's CPU profiles: this path and an ending ("": none)
	// CheckpointMode is actors.WithCheckpointMode's: "aligned",
	// "unaligned" or "at-least-once", or "aligned-timeout-10ms" (aligned,
	// actors.WithAlignmentTimeout(10ms)); "" is aligned, in rows that do
	// not compare modes.
	CheckpointMode string `json:"checkpoint_mode,omitempty"`
}

// Row is a measured configuration. A metric that was not measured, or does
// not apply to the row (checkpoint figures with checkpoints off, a baseline's
// ratio to snapflow's off row), is null in JSON and "–" in the table.
type Row struct {
	rowConfig
	Runs          int     `json:"runs,omitempty"` // runs this row is the median of (0: not recorded)
	Records       int64   `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec metric  `json:"records_per_sec"`
	Spread        metric  `json:"records_per_sec_spread"` // (max-min)/median of the runs' records/s
	RatioToOff    metric  `json:"ratio_to_off"`           // records/s against abs (cluster: cluster) with checkpoints off
	// RatioToInProcess is a cluster row's records/s against abs with
	// checkpoints off, in one process.
	RatioToInProcess metric `json:"ratio_to_in_process"`
	Checkpoints      int    `json:"checkpoints"`
	CkptP50Ms        metric `json:"ckpt_p50_ms"`
	CkptP99Ms        metric `json:"ckpt_p99_ms"`
	AlignP50Ms       metric `json:"align_p50_ms"`
	AlignP99Ms       metric `json:"align_p99_ms"`
	// SyncP50Ms and SyncP99Ms are the synchronous part of the keyed
	// tasks' snapshots (records stop), over every keyed task of every
	// checkpoint counted.
	SyncP50Ms metric `json:"sync_p50_ms"`
	SyncP99Ms metric `json:"sync_p99_ms"`
	// RatioToHeap is an on-disk row's records/s against the same row's on
	// the heap; SyncRatioToHeap its sync p50 against the heap row's.
	RatioToHeap     metric `json:"ratio_to_heap"`
	SyncRatioToHeap metric `json:"sync_ratio_to_heap"`
	BytesPerCkpt    metric `json:"bytes_per_ckpt"`
	// StateBytes is the state size of the last checkpoint completed in the
	// measuring window (actors.Event.Bytes).
	StateBytes metric `json:"state_bytes"`
	// UploadedBytesPerCkpt is the bytes written to the store per checkpoint
	// completed in the window: what was Put between each one's completion
	// and the completion before it (states, manifest), averaged.
	UploadedBytesPerCkpt metric `json:"uploaded_bytes_per_ckpt"`
	// StateUploadedBytesPerCkpt is what the tasks stored per checkpoint in
	// the window by their own count (actors.Event.Uploaded): state objects
	// only, no manifest, and nothing for states inline in the manifest.
	StateUploadedBytesPerCkpt metric `json:"state_uploaded_bytes_per_ckpt"`
	// InFlightBytesPerCkpt is the channel state (records in flight) an
	// unaligned checkpoint stored, per checkpoint in the window
	// (actors.Event.InFlight).
	InFlightBytesPerCkpt metric `json:"in_flight_bytes_per_ckpt"`
	// RatioToAligned is a row's records/s against the same row's with
	// aligned checkpoints (rows of another CheckpointMode).
	RatioToAligned metric `json:"ratio_to_aligned"`
	// RatioP99ToAligned is such a row's checkpoint p99 against the aligned
	// row's: the targets of the checkpoint modes under backpressure.
	RatioP99ToAligned metric `json:"ckpt_p99_ratio_to_aligned"`
	// RatioP99ToFull is an incremental row's checkpoint p99 against that of
	// the full row of the same interval, state and store.
	RatioP99ToFull metric `json:"ckpt_p99_ratio_to_full"`
	// The restore of a row of -sweep incremental (measureRestore): the job
	// is stopped after its window and started again from its newest
	// checkpoint. RestoreMs is from actors.Start to EventRunning;
	// RestoreReadBytes and RestoreReads what it read from the store
	// meanwhile (Get and GetRange, whatever for: manifests, state heads and
	// streamed key groups; retention runs once the job runs), RestoreReadParallelism the most
	// reads under way at once. RestoredCkptBytes is the bytes of the
	// checkpoint restored (manifest, the tasks' state objects, the sections
	// of earlier objects they reference), and RawReadMs the time to read
	// them from the same store with RestoreReadParallelism reads at once;
	// RestoreToRawRead is RawReadMs over RestoreMs, the restore's throughput
	// against the raw reads' for the same bytes.
	RestoreMs              metric `json:"restore_ms"`
	RestoreReadBytes       metric `json:"restore_read_bytes"`
	RestoreReads           int    `json:"restore_reads,omitempty"`
	RestoreReadParallelism int    `json:"restore_read_parallelism,omitempty"`
	RestoredCkptBytes      metric `json:"restored_checkpoint_bytes"`
	RawReadMs              metric `json:"raw_read_ms"`
	RestoreToRawRead       metric `json:"restore_ratio_to_raw_read"`
	LatencyP50Ms           metric `json:"latency_p50_ms"`
	LatencyP99Ms           metric `json:"latency_p99_ms"`
	PeakRSSBytes           int64  `json:"peak_rss_bytes"` // 0: not measured (no /proc)
	RecoveryMs             metric `json:"recovery_ms"`
	// RecoveryLocalBytes and RecoveryDownloadedBytes are, for a recovery
	// row on disk, the bytes of database files its restore took from
	// local copies (task-local recovery) and from the store.
	RecoveryLocalBytes      metric `json:"recovery_local_bytes"`
	RecoveryDownloadedBytes metric `json:"recovery_downloaded_bytes"`
	// WireBytesPerRecord is, for a cluster row, the bytes of records the
	// workers encoded for another node per record that reached the sink.
	WireBytesPerRecord metric `json:"wire_bytes_per_record"`
	// Placement is, for a cluster row, where its tasks ran: "task,task ->
	// worker; ..." (actors.EventPlaced).
	Placement string `json:"placement,omitempty"`
	// RatioToLoop is a kafka snapflow row's records/s against the plain
	// loop's (kafka.go).
	RatioToLoop metric `json:"ratio_to_loop"`
	// CPUPerRecordUs is the CPU time the process used in the window per
	// record counted: for a kafka row (broker, row and reader together),
	// and for a snapflow row with keyed state measured over a duration.
	CPUPerRecordUs metric `json:"cpu_us_per_record"`
	// RatioToUnmonitored is a monitored row's records/s against the same
	// row's without monitoring.
	RatioToUnmonitored metric `json:"ratio_to_unmonitored"`
	// RatioToUntimed is an event-time row's records/s against the same row
	// without event time, in the same run.
	RatioToUntimed metric `json:"ratio_to_untimed"`
}

// baseline reports whether the row is a hand-written baseline, which takes
// no checkpoint.
func (r rowConfig) baseline() bool {
	return r.Mode == "protoactor" || r.Mode == "channels" || r.Mode == kafkaLoop
}

// latencies is the p50 and p99 of h, not measured when h is empty.
func latencies(h *benchwork.Histogram) (p50, p99 metric) {
	if h == nil || h.Count() == 0 {
		return metric{}, metric{}
	}
	return msOf(h.Quantile(0.5)), msOf(h.Quantile(0.99))
}

// quantiles is the p50 and p99 of d in milliseconds, not measured when d is
// empty.
func quantiles(d []time.Duration) (p50, p99 metric) {
	if len(d) == 0 {
		return metric{}, metric{}
	}
	a, b := benchwork.Quantiles(d)
	return msOf(a), msOf(b)
}

func parseInterval(s string) (time.Duration, error) {
	if s == "off" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("interval %q: want off or a positive duration such as 100ms", s)
	}
	return d, nil
}

// runRow measures one configuration in this process.
func runRow(ctx context.Context, rc rowConfig) (Row, error) {
	var row Row
	var err error
	switch {
	case rc.Topology == "kafka":
		row, err = runKafka(ctx, rc)
	case rc.Mode == "abs", rc.Mode == "sync":
		row, err = runSnapflow(ctx, rc)
	case rc.Mode == "cluster":
		row, err = runCluster(ctx, rc)
	case rc.Mode == "protoactor", rc.Mode == "channels":
		row, err = runBaseline(ctx, rc)
	default:
		return row, fmt.Errorf("unknown mode %q (abs, sync, cluster, protoactor, channels)", rc.Mode)
	}
	row.rowConfig = rc
	row.PeakRSSBytes += peakRSS() // a cluster row has its workers' peaks already
	return row, err
}

// windowProfiled reports whether a row's CPU profile covers its
// measuring window only: a snapflow row with keyed state and a duration,
// whose window opens once the state is written, so that its profile is not
// the writing of the state.
func windowProfiled(rc rowConfig) bool {
	return rc.CPUProfile != "" && (rc.Mode == "abs" || rc.Mode == "sync") && rc.Topology != "kafka" &&
		rc.StateSize > 0 && rc.Records == 0 && !rc.Recovery
}

func runBaseline(ctx context.Context, rc rowConfig) (Row, error) {
	if rc.Topology != "paritysum" {
		return Row{}, fmt.Errorf("mode %s runs the paritysum topology only", rc.Mode)
	}
	cfg := baseline.Config{Parallelism: rc.Parallelism, Keys: rc.Keys, RecordSize: rc.RecordSize, Records: rc.Records, Rate: rc.Rate}
	if rc.Records == 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, rc.Duration)
		defer cancel()
	}
	run := baseline.RunProtoactor
	if rc.Mode == "channels" {
		run = runChannels
	}
	res, err := run(ctx, cfg)
	if err != nil {
		return Row{}, err
	}
	return baselineRow(res), nil
}

// baselineRow is the row of a baseline's result: a run that carried no
// record, or took no time, has its throughput and latency not measured.
func baselineRow(res baseline.Result) Row {
	row := Row{Records: res.Records, Seconds: res.Elapsed.Seconds(), RecordsPerSec: per(float64(res.Records), res.Elapsed.Seconds())}
	row.LatencyP50Ms, row.LatencyP99Ms = latencies(res.Latency)
	return row
}

func runSnapflow(ctx context.Context, rc rowConfig) (_ Row, err error) {
	interval, err := parseInterval(rc.Interval)
	if err != nil {
		return Row{}, err
	}
	opened, err := snapshots.Open(ctx, rc.Store)
	if err != nil {
		return Row{}, err
	}
	defer opened.Close()
	store := newCountingStore(opened)
	// Every run is a job of its own: on a store that outlives the process
	// (a directory, s3) a run must not resume from the checkpoints of the
	// run before it, and it leaves none behind.
	name := fmt.Sprintf("bench-%s-%d", rc.Topology, time.Now().UnixNano())
	defer removeJob(store, name)
	var p probe
	g, err := buildJob(name, rc, &p)
	if err != nil {
		return Row{}, err
	}
	var stats ckptStats
	var failedAt, runningAt time.Time
	done := make(chan struct{})
	// A row of -sweep incremental opens its window once a checkpoint
	// holding the whole state (every key filled) has completed, so that the
	// window sees neither a short state nor the first checkpoint, which is
	// full in either kind, and closes it only once a checkpoint has
	// completed in it.
	sweepRow := rc.Checkpointing != "" && interval > 0 && rc.Records == 0
	wholeState := rc.Keys * uint64(rc.StateSize)
	filled, inWindow := make(chan struct{}, 1), make(chan struct{}, 1)
	// On disk the state's stored size is its database's compressed
	// files: a checkpoint holds the whole state when it was triggered
	// after every key had been written once (the sink had seen a record
	// per key when the checkpoint before it completed).
	var keysSeenBy atomic.Uint64
	opts := []actors.Option{
		actors.WithStore(store.store()), actors.WithCheckpointInterval(interval), actors.WithCheckpointTimeout(time.Minute),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventCheckpointCompleted:
				in := p.window.Load()
				stats.completed(e, store.written(), in)
				if by := keysSeenBy.Load(); !e.Final && (e.Bytes >= wholeState || (by != 0 && e.Checkpoint > by)) {
					notify(filled)
				}
				if keysSeenBy.Load() == 0 && p.records.Load() >= int64(rc.Keys) {
					keysSeenBy.Store(e.Checkpoint)
				}
				if !e.Final && in {
					notify(inWindow)
				}
			case actors.EventTaskFailed:
				failedAt = e.Time
			case actors.EventRunning:
				if !failedAt.IsZero() && runningAt.IsZero() {
					runningAt = e.Time
					close(done)
				}
			}
		}),
	}
	if rc.Mode == "sync" {
		opts = append(opts, actorstest.WithSynchronousSnapshots())
	}
	if rc.Checkpointing == "incremental" {
		opts = append(opts, actors.WithIncrementalCheckpoints(rc.RewriteEvery))
	}
	opts = append(opts, backendOptions(rc)...)
	var mon *monitoring
	if rc.Monitored {
		if mon, err = startMonitoring(ctx); err != nil {
			return Row{}, err
		}
		opts = append(mon.srv.Options(), opts...)
	}
	job, err := actors.Start(ctx, g, opts...)
	if err != nil {
		if mon != nil {
			mon.stop()
		}
		return Row{}, err
	}
	defer func() { _ = job.Stop() }() // on every path, before removeJob
	if mon != nil {
		mon.watch(job)
		defer func() {
			if merr := mon.stop(); merr != nil && err == nil {
				err = merr
			}
		}()
	}
	start := time.Now()
	var localB, downloadedB int64 // of a recovery on disk: state files from local copies, from the store
	var counted int64
	var elapsed time.Duration
	var cpuPerRecord metric // CPU µs per record in the window, of a row with state
	if rc.Records > 0 {
		p.window.Store(true)
		err = job.Wait()
		elapsed, counted = time.Since(start), p.records.Load()
	} else {
		// Warm up, then count what the sink sees during the duration.
		warm := min(time.Second, rc.Duration/5)
		if !sleepCtx(ctx, warm) {
			return Row{}, ctx.Err()
		}
		if sweepRow {
			if err := awaitCheckpoint(ctx, job, filled, fmt.Sprintf("holding the whole state (%d bytes)", wholeState)); err != nil {
				return Row{}, err
			}
		} else if rc.StateSize > 0 { // the window measures the state written, not its writing
			if err := awaitRecords(ctx, job, &p, int64(rc.Keys)); err != nil {
				return Row{}, err
			}
		}
		cpu0, cpuOK := processCPU()
		stopProfile := func() {}
		if windowProfiled(rc) {
			if stopProfile, err = startProfile(rc.CPUProfile + ".pprof"); err != nil {
				return Row{}, err
			}
		}
		p.window.Store(true)
		r0, t0 := p.records.Load(), time.Now()
		if rc.Recovery {
			p.failAt.Store(r0 + 1)
		}
		sleepCtx(ctx, rc.Duration)
		if sweepRow {
			if err := awaitCheckpoint(ctx, job, inWindow, "in the measuring window"); err != nil {
				return Row{}, err
			}
		}
		elapsed, counted = time.Since(t0), p.records.Load()-r0
		stopProfile()
		if cpu1, ok := processCPU(); ok && cpuOK && counted > 0 && rc.StateSize > 0 && !rc.Recovery {
			cpuPerRecord = measured(float64(cpu1-cpu0) / float64(time.Microsecond) / float64(counted))
		}
		p.window.Store(false)
		if rc.Recovery {
			select {
			case <-done:
			case <-time.After(time.Minute):
				return Row{}, fmt.Errorf("bench: recovery: the job was not running again within a minute of the injected failure")
			}
			localB, downloadedB = job.DiskRestoreBytes()
		}
		if stopErr := job.Stop(); stopErr != nil && !isStopped(stopErr) {
			err = stopErr
		}
	}
	if err != nil {
		return Row{}, err
	}
	row := Row{Records: counted, Seconds: elapsed.Seconds(), RecordsPerSec: per(float64(counted), elapsed.Seconds()), CPUPerRecordUs: cpuPerRecord}
	stats.fill(&row)
	row.LatencyP50Ms, row.LatencyP99Ms = latencies(&p.latency)
	if rc.Recovery && !runningAt.IsZero() {
		row.RecoveryMs = msOf(runningAt.Sub(failedAt))
		if strings.HasPrefix(rc.Backend, "disk") {
			row.RecoveryLocalBytes, row.RecoveryDownloadedBytes = measured(float64(localB)), measured(float64(downloadedB))
		}
	}
	if sweepRow && row.Checkpoints > 0 {
		rf, err := measureRestore(ctx, store, name, rc)
		if err != nil {
			return Row{}, err
		}
		rf.fill(&row)
	}
	return row, nil
}

// ckptTimeout is how long a row of -sweep incremental waits for each
// checkpoint it needs (see rowConfig.Checkpointing).
const ckptTimeout = 5 * time.Minute

// notify signals c, a channel of capacity 1, without blocking.
func notify(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// awaitCheckpoint waits for c, signalled when a checkpoint that is what
// says completes, or fails when the job ends, ctx ends or ckptTimeout
// passes first.
func awaitCheckpoint(ctx context.Context, job *actors.Job, c <-chan struct{}, what string) error {
	t := time.NewTimer(ckptTimeout)
	defer t.Stop()
	select {
	case <-c:
		return nil
	case <-job.Done():
		return fmt.Errorf("bench: the job ended before a checkpoint %s completed: %w", what, job.Wait())
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("bench: no checkpoint %s completed within %v", what, ckptTimeout)
	}
}

// awaitRecords waits until the sink has seen n records: the first record
// of each key writes its state, so with n the keys the state is whole.
func awaitRecords(ctx context.Context, job *actors.Job, p *probe, n int64) error {
	deadline := time.NewTimer(ckptTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for p.records.Load() < n {
		select {
		case <-tick.C:
		case <-job.Done():
			return fmt.Errorf("bench: the job ended before its state was written (%d of %d records): %w", p.records.Load(), n, job.Wait())
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("bench: the state was not written within %v (%d of %d records)", ckptTimeout, p.records.Load(), n)
		}
	}
	return nil
}

// ckptStats gathers the checkpoints completed in a row's measuring window,
// from the job's listener: their durations, alignments and state sizes, and
// the bytes written to the store for them.
type ckptStats struct {
	ckpt, align []time.Duration
	sync        []time.Duration // of the keyed tasks ("sum"), every checkpoint counted
	bytes, last uint64          // state bytes of every checkpoint counted; of the last one
	uploaded    int64           // bytes Put for the checkpoints counted
	written     int64           // bytes Put before the last completion, counted or not
	stateUp     uint64          // the tasks' own count of what they stored (Event.Uploaded) for the checkpoints counted
	inFlight    uint64          // channel state of the checkpoints counted (Event.InFlight)
}

// completed takes a completed checkpoint, with written the bytes Put to
// the store so far: the bytes Put since the completion before it are
// counted as its upload. A final checkpoint, or one outside the window, is
// not counted.
func (s *ckptStats) completed(e actors.Event, written int64, inWindow bool) {
	if e.Kind != actors.EventCheckpointCompleted {
		return
	}
	if !e.Final && inWindow {
		s.ckpt, s.align = append(s.ckpt, e.Duration), append(s.align, e.Alignment)
		for _, tc := range e.Tasks {
			if strings.HasPrefix(tc.Task, "sum#") {
				s.sync = append(s.sync, tc.Sync)
			}
		}
		s.bytes, s.last = s.bytes+e.Bytes, e.Bytes
		s.uploaded += written - s.written
		s.stateUp += e.Uploaded
		s.inFlight += e.InFlight
	}
	s.written = written
}

// fill sets row's checkpoint figures: not measured without a checkpoint.
func (s *ckptStats) fill(row *Row) {
	n := len(s.ckpt)
	row.Checkpoints = n
	row.CkptP50Ms, row.CkptP99Ms = quantiles(s.ckpt)
	row.AlignP50Ms, row.AlignP99Ms = quantiles(s.align)
	row.SyncP50Ms, row.SyncP99Ms = quantiles(s.sync)
	row.BytesPerCkpt = per(float64(s.bytes), float64(n))
	if n > 0 {
		row.StateBytes = measured(float64(s.last))
		row.UploadedBytesPerCkpt = per(float64(s.uploaded), float64(n))
		row.StateUploadedBytesPerCkpt = per(float64(s.stateUp), float64(n))
		row.InFlightBytesPerCkpt = per(float64(s.inFlight), float64(n))
	}
}

// removeJob deletes every object of job from store; what it cannot delete
// is reported on stderr and left.
func removeJob(store snapshots.Store, job string) {
	ctx := context.Background()
	keys, err := store.List(ctx, job+"/")
	for _, k := range keys {
		err = errors.Join(err, store.Delete(ctx, k))
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: remove the checkpoints of job %s from %s: %v\n", job, store, err)
	}
}

func isStopped(err error) bool { return errors.Is(err, actors.ErrStopped) }

// sleepCtx waits d (the benchmark's measuring window), or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// peakRSS is the process's peak resident set size (VmHWM), or 0 where
// /proc is not available.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// backendOptions are the job options of rc's state backend: the on-disk
// one keeps its task databases under the system's temporary directory.
func backendOptions(rc rowConfig) []actors.Option {
	switch rc.CheckpointMode {
	case "unaligned":
		return append(backendOptions(rowConfig{Backend: rc.Backend}), actors.WithCheckpointMode(actors.CheckpointUnaligned))
	case "at-least-once":
		return append(backendOptions(rowConfig{Backend: rc.Backend}), actors.WithCheckpointMode(actors.CheckpointAtLeastOnce))
	case "aligned-timeout-10ms":
		return append(backendOptions(rowConfig{Backend: rc.Backend}), actors.WithAlignmentTimeout(10*time.Millisecond))
	}
	switch rc.Backend {
	case "disk":
		return []actors.Option{actors.WithDiskState(actors.DiskState{})}
	case "disk-nolocal":
		return []actors.Option{actors.WithDiskState(actors.DiskState{NoLocalRecovery: true})}
	}
	return nil
}
