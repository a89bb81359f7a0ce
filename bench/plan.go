package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// plan lists the rows of a run.
func plan(f flags) ([]rowConfig, error) {
	base := rowConfig{Topology: f.topology, Parallelism: f.parallelism, RecordSize: f.recordSize, Keys: f.keys,
		StateSize: f.stateSize, Rate: f.rate, Duration: f.duration, Records: f.records, Store: f.store, Interval: "off", Backlog: f.backlog}
	if f.fraction < 1 {
		base.UpdateFraction = f.fraction
	}
	if f.maxPar != 0 && f.maxPar < f.parallelism {
		return nil, fmt.Errorf("%w: -max-parallelism %d: want 0 (the default) or at least -parallelism (%d)", errUsage, f.maxPar, f.parallelism)
	}
	base.MaxParallelism = f.maxPar
	switch f.backend {
	case "", "heap":
	case "disk", "disk-nolocal":
		base.Backend = f.backend
	default:
		return nil, fmt.Errorf("%w: -backend %q: want heap, disk or disk-nolocal", errUsage, f.backend)
	}
	if f.recordSize < 16 || f.parallelism < 1 || f.keys < 1 || f.duration <= 0 || f.stateSize < 0 || f.rate < 0 || f.records < 0 || f.repeat < 1 || f.backlog < 0 {
		return nil, fmt.Errorf("%w: want -record-size >= 16, -parallelism >= 1, -keys >= 1, -duration > 0, -state-size >= 0, -rate >= 0, -records >= 0, -repeat >= 1, -backlog >= 0", errUsage)
	}
	if f.topology == "kafka" {
		return planKafka(f, base)
	}
	if f.records > 0 && f.sweep == "recovery" {
		return nil, fmt.Errorf("%w: -sweep recovery measures a failure during -duration; it does not take -records", errUsage)
	}
	var out []rowConfig
	add := func(mut func(*rowConfig)) {
		rc := base
		mut(&rc)
		out = append(out, rc)
	}
	switch f.sweep {
	case "":
	case "state-size": // checkpoint duration against state size, 100ms
		for _, kib := range []int{1, 16, 64, 256} {
			add(func(rc *rowConfig) { rc.Mode, rc.Interval, rc.StateSize = "abs", "100ms", kib<<10 })
		}
		return out, nil
	case "fan-in": // alignment time against the number of inputs, 100ms
		for _, n := range []int{2, 4, 8, 16} {
			add(func(rc *rowConfig) { rc.Mode, rc.Interval, rc.Topology = "abs", "100ms", fmt.Sprintf("fanin-%d", n) })
		}
		return out, nil
	case "recovery": // recovery time against state size
		for _, kib := range []int{1, 16, 64, 256} {
			add(func(rc *rowConfig) { rc.Mode, rc.Interval, rc.StateSize, rc.Recovery = "abs", "100ms", kib<<10, true })
		}
		return out, nil
	case "backpressure": // unthrottled, then a sink 10 times slower (added once measured)
		add(func(rc *rowConfig) { rc.Mode = "abs" })
		return out, nil
	case "backpressure-checkpoints": // checkpoints off, then each mode unthrottled and with a sink 10 times slower (added once measured)
		add(func(rc *rowConfig) { rc.Mode = "abs" })
		return out, nil
	case "latency": // the maximum, then 50% of it (added once measured)
		add(func(rc *rowConfig) { rc.Mode, rc.Interval = "abs", "100ms" })
		return out, nil
	case "eventtime": // watermarks, and one event-time timer per record, against neither
		for _, iv := range []string{"off", "100ms"} {
			for _, et := range []string{"", "watermarks", "timers"} {
				add(func(rc *rowConfig) { rc.Mode, rc.Interval, rc.EventTime = "abs", iv, et })
			}
		}
		return out, nil
	case "monitoring": // metrics, API and dashboard served and polled, against none
		for _, iv := range []string{"off", "100ms"} {
			for _, mon := range []bool{false, true} {
				add(func(rc *rowConfig) { rc.Mode, rc.Interval, rc.Monitored = "abs", iv, mon })
			}
		}
		return out, nil
	case "incremental": // what a checkpoint uploads against the state, at a fraction of keys updated; off first
		intervals := "100ms"
		if f.set["intervals"] {
			intervals = f.intervals
		}
		// Checkpoints off first: the throughput the others cost.
		add(func(rc *rowConfig) { rc.Mode = "abs" })
		for _, iv := range strings.Split(intervals, ",") {
			iv = strings.TrimSpace(iv)
			if d, err := parseInterval(iv); err != nil || d == 0 {
				return nil, fmt.Errorf("%w: -sweep incremental: -intervals %q: want checkpoint intervals, such as 100ms", errUsage, iv)
			}
			for _, kind := range checkpointKinds {
				add(func(rc *rowConfig) {
					rc.Mode, rc.Interval, rc.Checkpointing = "abs", iv, kind
					if kind == "incremental" {
						rc.RewriteEvery = f.rewrite
					}
				})
			}
		}
		return out, nil
	case "statebackend": // the heap backend against the on-disk one: checkpoints off, then full and incremental
		intervals := "1s"
		if f.set["intervals"] {
			intervals = f.intervals
		}
		for _, b := range []string{"", "disk"} {
			add(func(rc *rowConfig) { rc.Mode, rc.Backend = "abs", b })
		}
		if strings.TrimSpace(intervals) == "off" { // the two backends' throughput alone
			return out, nil
		}
		for _, iv := range strings.Split(intervals, ",") {
			iv = strings.TrimSpace(iv)
			if d, err := parseInterval(iv); err != nil || d == 0 {
				return nil, fmt.Errorf("%w: -sweep statebackend: -intervals %q: want checkpoint intervals, such as 1s", errUsage, iv)
			}
			for _, kind := range checkpointKinds {
				for _, b := range []string{"", "disk"} {
					add(func(rc *rowConfig) {
						rc.Mode, rc.Interval, rc.Checkpointing, rc.Backend = "abs", iv, kind, b
						if kind == "incremental" {
							rc.RewriteEvery = f.rewrite
						}
					})
				}
			}
		}
		// Recovery from a failure, incremental checkpoints at the first
		// interval: on disk with task-local recovery and without.
		iv := strings.TrimSpace(strings.Split(intervals, ",")[0])
		for _, b := range []string{"", "disk", "disk-nolocal"} {
			add(func(rc *rowConfig) {
				rc.Mode, rc.Interval, rc.Checkpointing, rc.Backend, rc.Recovery = "abs", iv, "incremental", b, true
				rc.RewriteEvery = f.rewrite
			})
		}
		return out, nil
	case "parallelism": // throughput against parallelism, checkpoints off
		for _, p := range []int{1, 2, 4} {
			for _, m := range []string{"abs", "protoactor"} {
				add(func(rc *rowConfig) { rc.Mode, rc.Parallelism = m, p })
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("%w: unknown -sweep %q (state-size, fan-in, recovery, parallelism, backpressure, backpressure-checkpoints, latency, monitoring, rescale, incremental, statebackend, eventtime)", errUsage, f.sweep)
	}
	for _, m := range strings.Split(f.modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "abs", "sync":
			for _, iv := range strings.Split(f.intervals, ",") {
				iv = strings.TrimSpace(iv)
				if _, err := parseInterval(iv); err != nil {
					return nil, fmt.Errorf("%w: -intervals: %v", errUsage, err)
				}
				if m == "sync" && iv == "off" {
					continue // without checkpoints sync is abs
				}
				add(func(rc *rowConfig) { rc.Mode, rc.Interval = m, iv })
			}
		case "cluster":
			if f.topology != "paritysum" {
				continue
			}
			for _, iv := range strings.Split(f.intervals, ",") {
				iv = strings.TrimSpace(iv)
				if _, err := parseInterval(iv); err != nil {
					return nil, fmt.Errorf("%w: -intervals: %v", errUsage, err)
				}
				add(func(rc *rowConfig) { rc.Mode, rc.Interval = m, iv })
			}
		case "protoactor", "channels":
			if f.topology == "paritysum" {
				add(func(rc *rowConfig) { rc.Mode = m })
			}
		default:
			return nil, fmt.Errorf("%w: unknown mode %q in -modes (abs, sync, cluster, protoactor, channels)", errUsage, m)
		}
	}
	return out, nil
}

// flinkSinkWindow is the shortest measuring window of the
// backpressure-checkpoints rows behind a sink of 1 ms per record.
const flinkSinkWindow = 20 * time.Second

// checkpointModes are the modes -sweep backpressure-checkpoints compares.
var checkpointModes = []string{"aligned", "unaligned", "aligned-timeout-10ms", "at-least-once"}

// followUps are the rows a sweep adds once the first is measured. A first
// row whose records/s was not measured, or is 0, has none: its rate could not
// be derived.
func followUps(progress io.Writer, sweep string, first Row) []rowConfig {
	if first.SinkRate > 0 || first.Rate > 0 || (sweep != "backpressure" && sweep != "latency" && sweep != "backpressure-checkpoints") {
		return nil
	}
	top, ok := first.RecordsPerSec.value()
	if !ok || top <= 0 {
		fmt.Fprintf(progress, "bench: -sweep %s: no follow-up row: the first row's records/s was not measured\n", sweep)
		return nil
	}
	rc := first.rowConfig
	if sweep == "backpressure-checkpoints" {
		// Each mode at 100ms, unthrottled (what the mode costs without
		// backpressure) and behind a sink 10 times slower; behind the slow
		// sink again with one failure (the recovery time); the skewed
		// union: one of its two inputs lags, 10 times slower; and behind
		// a sink 1,000 times slower, where full queues take long to drain;
		// and behind a sink that sleeps 1 ms per record, as the sink of
		// Flink's CheckpointingTimeBenchmark does, measured for at least
		// flinkSinkWindow so that aligned checkpoints, which then take
		// seconds, complete in it.
		var out []rowConfig
		add := func(f func(r *rowConfig)) {
			for _, m := range checkpointModes {
				r := rc
				r.Interval, r.CheckpointMode = "100ms", m
				f(&r)
				out = append(out, r)
			}
		}
		add(func(*rowConfig) {})
		add(func(r *rowConfig) { r.SinkRate = top / 10 })
		add(func(r *rowConfig) { r.SinkRate, r.Recovery = top/10, true })
		add(func(r *rowConfig) { r.SinkRate, r.Topology = top/10, "union-skewed" })
		add(func(r *rowConfig) { r.SinkRate = top / 1000 })
		if rc.Records > 0 {
			// At 1,000 records/s, a run of -records N would take N/1,000 s.
			fmt.Fprintf(progress, "bench: -sweep %s: the rows behind a sink of 1 ms per record run for a time; left out with -records\n", sweep)
			return out
		}
		add(func(r *rowConfig) {
			r.SinkRate, r.SinkPaceEvery = 1000, 1
			r.Duration = max(r.Duration, flinkSinkWindow)
		})
		return out
	}
	if sweep == "backpressure" {
		rc.SinkRate = top / 10
	} else {
		rc.Rate = top / 2
	}
	return []rowConfig{rc}
}
