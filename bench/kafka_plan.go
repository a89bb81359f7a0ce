package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// planKafka lists the rows of -topology kafka: a loop row, an alo row
// (checkpoints off) and an eo row per interval, in the order of -modes.
// -modes and -intervals left at their defaults read as defaultKafkaModes
// and defaultKafkaIntervals.
func planKafka(f flags, base rowConfig) ([]rowConfig, error) {
	if f.sweep != "" {
		return nil, fmt.Errorf("%w: -sweep %s: the sweeps run the paritysum shapes, not -topology kafka", errUsage, f.sweep)
	}
	if f.recordSize < kafkaMinSize {
		return nil, fmt.Errorf("%w: -topology kafka: -record-size %d, want at least %d", errUsage, f.recordSize, kafkaMinSize)
	}
	modes, intervals := f.modes, f.intervals
	if modes == defaultModes {
		modes = defaultKafkaModes
	}
	if intervals == defaultIntervals {
		intervals = defaultKafkaIntervals
	}
	var out []rowConfig
	for _, m := range strings.Split(modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case kafkaLoop, kafkaALO:
			rc := base
			rc.Mode = m
			out = append(out, rc)
		case kafkaEO:
			for _, iv := range strings.Split(intervals, ",") {
				iv = strings.TrimSpace(iv)
				if _, err := parseInterval(iv); err != nil {
					return nil, fmt.Errorf("%w: -intervals: %v", errUsage, err)
				}
				if iv == "off" {
					continue // an eo row commits at its checkpoints
				}
				rc := base
				rc.Mode, rc.Interval = m, iv
				out = append(out, rc)
			}
		default:
			return nil, fmt.Errorf("%w: -topology kafka: unknown mode %q in -modes (%s)", errUsage, m, strings.Join(kafkaModes, ", "))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: -topology kafka: no row in -modes %s with -intervals %s", errUsage, modes, intervals)
	}
	return out, nil
}

// kafkaLatencyRows are the rows that follow the unthrottled kafka rows:
// each of them again with its input produced at one common rate, a tenth
// of the records/s of the slowest, so that every row keeps up and their
// latencies compare. A tenth, not a half: a pipeline that has caught up
// fetches and produces in small requests, which cost kfake (one goroutine)
// far more per record than a backlog's; at half the slowest backlog rate
// even the plain loop fell behind here. There are none when a row's
// records/s was not measured.
// kafkaLatencyDivisor: the latency rows offer the slowest row's records/s
// divided by this.
const kafkaLatencyDivisor = 10

func kafkaLatencyRows(progress io.Writer, rows []Row) []rowConfig {
	slowest := 0.0
	for _, r := range rows {
		v, ok := r.RecordsPerSec.value()
		if !ok || v <= 0 {
			fmt.Fprintf(progress, "bench: kafka: no latency rows: the records/s of %s was not measured\n", describe(r.rowConfig))
			return nil
		}
		if slowest == 0 || v < slowest {
			slowest = v
		}
	}
	out := make([]rowConfig, 0, len(rows))
	for _, r := range rows {
		rc := r.rowConfig
		rc.Rate = float64(int64(slowest / kafkaLatencyDivisor))
		out = append(out, rc)
	}
	return out
}

// kafkaRunTime is about how long a run of a kafka row takes: starting the
// broker, filling the backlog (about 3M records/s here), the warm-up, the
// window, and the wait for its last records to be visible.
func kafkaRunTime(rc rowConfig) time.Duration {
	d := 500*time.Millisecond + kafkaWarm(rc) + rc.Duration + kafkaTail
	if iv, err := parseInterval(rc.Interval); err == nil {
		d += iv
	}
	if rc.Rate == 0 {
		d += time.Duration(float64(kafkaBacklog(rc)) / 3e6 * float64(time.Second))
	}
	return d
}

// kafkaNote explains the kafka rows under the table.
func kafkaNote(rows []Row) string {
	for _, r := range rows {
		if r.Topology == "kafka" {
			return `kafka: on kfake in each run's process; loop: a plain franz-go consume -> produce loop per partition share, no
  transactions; alo: snapflow, kafka.Source -> work -> a plain franz-go producer sink, checkpoints off; eo: snapflow with
  kafka.Sink (transactional), committing at each checkpoint. Without offered/s the input is a backlog filled before the
  run, and records/s counts the records processed in the window, once visible to a read_committed consumer; with
  offered/s (a tenth of the slowest row's records/s unless -rate) the input is produced at that rate, and latency is
  from production to visibility to that consumer. Every producer, the input's included, has franz-go's defaults (10 ms
  linger). For these rows % of off is against the alo row, % of loop against the loop row; CPU µs/record: the CPU time
  of the process (broker, row and reader) in the window per record counted; peak RSS: kfake and its topics included.
`
		}
	}
	return ""
}
