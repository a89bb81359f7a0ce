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
	Topology    string        `json:"topology"`
	Mode        string        `json:"mode"`     // abs, sync, protoactor, channels
	Interval    string        `json:"interval"` // off, 1s, 100ms, 20ms, as given
	Parallelism int           `json:"parallelism"`
	RecordSize  int           `json:"record_size"`
	Keys        uint64        `json:"keys"`
	StateSize   int           `json:"state_size"` // bytes of keyed state per key
	Rate        float64       `json:"rate"`       // records/s offered (0: as fast as possible)
	Records     int64         `json:"-"`          // stop after this many (0: run for Duration)
	Duration    time.Duration `json:"-"`
	Store       string        `json:"store"`
	SinkRate    float64       `json:"sink_rate,omitempty"` // records/s the sink is limited to (0: unlimited)
	Recovery    bool          `json:"-"`                   // inject one failure and measure the recovery
}

// Row is a measured configuration.
type Row struct {
	rowConfig
	Records       int64   `json:"records"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_sec"`
	RatioToOff    float64 `json:"ratio_to_off,omitempty"`
	Checkpoints   int     `json:"checkpoints"`
	CkptP50Ms     float64 `json:"ckpt_p50_ms"`
	CkptP99Ms     float64 `json:"ckpt_p99_ms"`
	AlignP50Ms    float64 `json:"align_p50_ms"`
	AlignP99Ms    float64 `json:"align_p99_ms"`
	BytesPerCkpt  float64 `json:"bytes_per_ckpt"`
	LatencyP50Ms  float64 `json:"latency_p50_ms"`
	LatencyP99Ms  float64 `json:"latency_p99_ms"`
	PeakRSSBytes  int64   `json:"peak_rss_bytes"`
	RecoveryMs    float64 `json:"recovery_ms,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
	switch rc.Mode {
	case "abs", "sync":
		row, err = runSnapflow(ctx, rc)
	case "protoactor", "channels":
		row, err = runBaseline(ctx, rc)
	default:
		return row, fmt.Errorf("unknown mode %q (abs, sync, protoactor, channels)", rc.Mode)
	}
	row.rowConfig = rc
	row.PeakRSSBytes = peakRSS()
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
	return Row{
		Records: res.Records, Seconds: res.Elapsed.Seconds(), RecordsPerSec: float64(res.Records) / res.Elapsed.Seconds(),
		LatencyP50Ms: ms(res.Latency.Quantile(0.5)), LatencyP99Ms: ms(res.Latency.Quantile(0.99)),
	}, nil
}

func runSnapflow(ctx context.Context, rc rowConfig) (Row, error) {
	interval, err := parseInterval(rc.Interval)
	if err != nil {
		return Row{}, err
	}
	store, err := snapshots.Open(ctx, rc.Store)
	if err != nil {
		return Row{}, err
	}
	defer store.Close()
	var p probe
	g, err := buildJob(rc, &p)
	if err != nil {
		return Row{}, err
	}
	var ckpt, align []time.Duration
	var bytes uint64
	var failedAt, runningAt time.Time
	done := make(chan struct{})
	opts := []actors.Option{
		actors.WithStore(store), actors.WithCheckpointInterval(interval), actors.WithCheckpointTimeout(time.Minute),
		actors.WithRestartPolicy(restart.Policy{InitialBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}),
		actors.WithListener(func(e actors.Event) {
			switch e.Kind {
			case actors.EventCheckpointCompleted:
				if !e.Final && p.window.Load() {
					ckpt, align = append(ckpt, e.Duration), append(align, e.Alignment)
					bytes += e.Bytes
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
		opts = append(opts, actors.WithSynchronousSnapshots())
	}
	job, err := actors.Start(ctx, g, opts...)
	if err != nil {
		return Row{}, err
	}
	start := time.Now()
	var measured int64
	var elapsed time.Duration
	if rc.Records > 0 {
		p.window.Store(true)
		err = job.Wait()
		elapsed, measured = time.Since(start), p.records.Load()
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
		elapsed, measured = time.Since(t0), p.records.Load()-r0
		p.window.Store(false)
		if rc.Recovery {
			select {
			case <-done:
			case <-time.After(time.Minute):
				return Row{}, fmt.Errorf("no recovery within a minute")
			}
		}
		if stopErr := job.Stop(); stopErr != nil && !isStopped(stopErr) {
			err = stopErr
		}
	}
	if err != nil {
		return Row{}, err
	}
	ck50, ck99 := benchwork.Quantiles(ckpt)
	al50, al99 := benchwork.Quantiles(align)
	row := Row{
		Records: measured, Seconds: elapsed.Seconds(), RecordsPerSec: float64(measured) / elapsed.Seconds(),
		Checkpoints: len(ckpt), CkptP50Ms: ms(ck50), CkptP99Ms: ms(ck99), AlignP50Ms: ms(al50), AlignP99Ms: ms(al99),
		LatencyP50Ms: ms(p.latency.Quantile(0.5)), LatencyP99Ms: ms(p.latency.Quantile(0.99)),
	}
	if len(ckpt) > 0 {
		row.BytesPerCkpt = float64(bytes) / float64(len(ckpt))
	}
	if rc.Recovery && !runningAt.IsZero() {
		row.RecoveryMs = ms(runningAt.Sub(failedAt))
	}
	return row, nil
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
