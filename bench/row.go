package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/actors/baseline"
	"github.com/snapflow/snapflow/actors/restart"
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
	// whole state); "" in rows from before it was recorded, which are full.
	Checkpointing string        `json:"checkpointing,omitempty"`
	Rate          float64       `json:"rate"` // records/s offered (0: as fast as possible)
	Records       int64         `json:"-"`    // stop after this many (0: run for Duration)
	Duration      time.Duration `json:"-"`
	Store         string        `json:"store"`
	SinkRate      float64       `json:"sink_rate,omitempty"` // records/s the sink is limited to (0: unlimited)
	Backlog       int64         `json:"backlog,omitempty"`   // kafka rows without a rate: records filled in before the row (0: sized by kafkaBacklog)
	Recovery      bool          `json:"-"`                   // inject one failure and measure the recovery
	// Monitored rows serve the job's metrics, API and dashboard
	// (internal/serve), scraped and polled every second and with an event
	// stream open, as a Prometheus server and an open dashboard would.
	Monitored  bool   `json:"monitored,omitempty"`
	CPUProfile string `json:"-"` // the run's CPU profiles: this path and an ending ("": none)
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
	BytesPerCkpt     metric `json:"bytes_per_ckpt"`
	// StateBytes is the state size of the last checkpoint completed in the
	// measuring window (actors.Event.Bytes).
	StateBytes metric `json:"state_bytes"`
	// UploadedBytesPerCkpt is the bytes written to the store per checkpoint
	// completed in the window: what was Put between each one's completion
	// and the completion before it (states, manifest), averaged.
	UploadedBytesPerCkpt metric `json:"uploaded_bytes_per_ckpt"`
	LatencyP50Ms         metric `json:"latency_p50_ms"`
	LatencyP99Ms         metric `json:"latency_p99_ms"`
	PeakRSSBytes         int64  `json:"peak_rss_bytes"` // 0: not measured (no /proc)
	RecoveryMs           metric `json:"recovery_ms"`
	// WireBytesPerRecord is, for a cluster row, the bytes of records the
	// workers encoded for another node per record that reached the sink.
	WireBytesPerRecord metric `json:"wire_bytes_per_record"`
	// Placement is, for a cluster row, where its tasks ran: "task,task ->
	// worker; ..." (actors.EventPlaced).
	Placement string `json:"placement,omitempty"`
	// RatioToLoop is a kafka snapflow row's records/s against the plain
	// loop's (kafka.go).
	RatioToLoop metric `json:"ratio_to_loop"`
	// CPUPerRecordUs is, for a kafka row, the CPU time the process used in
	// the window (broker, row and reader together) per record counted.
	CPUPerRecordUs metric `json:"cpu_us_per_record"`
	// RatioToUnmonitored is a monitored row's records/s against the same
	// row's without monitoring.
	RatioToUnmonitored metric `json:"ratio_to_unmonitored"`
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
	opts := []actors.Option{
		actors.WithStore(store), actors.WithCheckpointInterval(interval), actors.WithCheckpointTimeout(time.Minute),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventCheckpointCompleted:
				stats.completed(e, store.written(), p.window.Load())
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
		opts = append(opts, actors.WithSynchronousSnapshots())
	}
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
	var counted int64
	var elapsed time.Duration
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
		p.window.Store(true)
		r0, t0 := p.records.Load(), time.Now()
		if rc.Recovery {
			p.failAt.Store(r0 + 1)
		}
		sleepCtx(ctx, rc.Duration)
		elapsed, counted = time.Since(t0), p.records.Load()-r0
		p.window.Store(false)
		if rc.Recovery {
			select {
			case <-done:
			case <-time.After(time.Minute):
				return Row{}, fmt.Errorf("bench: recovery: the job was not running again within a minute of the injected failure")
			}
		}
		if stopErr := job.Stop(); stopErr != nil && !isStopped(stopErr) {
			err = stopErr
		}
	}
	if err != nil {
		return Row{}, err
	}
	row := Row{Records: counted, Seconds: elapsed.Seconds(), RecordsPerSec: per(float64(counted), elapsed.Seconds())}
	stats.fill(&row)
	row.LatencyP50Ms, row.LatencyP99Ms = latencies(&p.latency)
	if rc.Recovery && !runningAt.IsZero() {
		row.RecoveryMs = msOf(runningAt.Sub(failedAt))
	}
	return row, nil
}

// ckptStats gathers the checkpoints completed in a row's measuring window,
// from the job's listener: their durations, alignments and state sizes, and
// the bytes written to the store for them.
type ckptStats struct {
	ckpt, align []time.Duration
	bytes, last uint64 // state bytes of every checkpoint counted; of the last one
	uploaded    int64  // bytes Put for the checkpoints counted
	written     int64  // bytes Put before the last completion, counted or not
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
		s.bytes, s.last = s.bytes+e.Bytes, e.Bytes
		s.uploaded += written - s.written
	}
	s.written = written
}

// fill sets row's checkpoint figures: not measured without a checkpoint.
func (s *ckptStats) fill(row *Row) {
	n := len(s.ckpt)
	row.Checkpoints = n
	row.CkptP50Ms, row.CkptP99Ms = quantiles(s.ckpt)
	row.AlignP50Ms, row.AlignP99Ms = quantiles(s.align)
	row.BytesPerCkpt = per(float64(s.bytes), float64(n))
	if n > 0 {
		row.StateBytes = measured(float64(s.last))
		row.UploadedBytesPerCkpt = per(float64(s.uploaded), float64(n))
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
