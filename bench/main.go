// Command bench measures snapflow's barrier overhead. Every configuration is
// a row, measured side by side in one run: snapflow with asynchronous barrier
// snapshots (abs) at each checkpoint interval, the stop-the-world synchronous
// mode (sync), a hand-written protoactor-go pipeline of the same shape and
// work (protoactor), and a Go-channels pipeline (channels). Each row runs in
// its own child process, so that its peak RSS is its own.
//
//	go run ./bench -topology paritysum -intervals off,1s,100ms,20ms -duration 5s -json rows.json -plot rows.png
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"time"
)

type flags struct {
	topology    string
	modes       string
	intervals   string
	parallelism int
	recordSize  int
	keys        uint64
	stateSize   int
	rate        float64
	duration    time.Duration
	store       string
	sweep       string
	jsonOut     string
	plotOut     string
	child       string
	repeat      int
}

func parseFlags(args []string) (flags, error) {
	var f flags
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&f.topology, "topology", "paritysum", "paritysum, chain-N, fanout, union, diamond or fanin-F")
	fs.StringVar(&f.modes, "modes", "abs,sync,protoactor,channels", "modes to run, comma-separated (protoactor and channels: paritysum only)")
	fs.StringVar(&f.intervals, "intervals", "off,1s,100ms,20ms", "checkpoint intervals, comma-separated (off: no periodic checkpoint)")
	fs.IntVar(&f.parallelism, "parallelism", 2, "parallelism of the keyed sum")
	fs.IntVar(&f.recordSize, "record-size", 16, "bytes per record")
	fs.Uint64Var(&f.keys, "keys", 1024, "number of keys")
	fs.IntVar(&f.stateSize, "state-size", 0, "bytes of keyed state per key, besides the sum")
	fs.Float64Var(&f.rate, "rate", 0, "records/s offered by the source (0: as fast as possible)")
	fs.DurationVar(&f.duration, "duration", 5*time.Second, "measuring time per row (after a warm-up)")
	fs.StringVar(&f.store, "store", "mem://", "snapshot store URL: mem://, a directory, or s3://BUCKET/PREFIX?endpoint=HOST:PORT&secure=false")
	fs.StringVar(&f.sweep, "sweep", "", "a sweep instead: state-size, fan-in, recovery, parallelism, backpressure or latency")
	fs.StringVar(&f.jsonOut, "json", "", "write the rows as a JSON array to this file")
	fs.StringVar(&f.plotOut, "plot", "", "draw throughput and p99 latency against the interval into this PNG")
	fs.StringVar(&f.child, "child", "", "internal: run one row given as JSON and print it")
	fs.IntVar(&f.repeat, "repeat", 1, "run the list of rows this many times, interleaved, and report each row's median run by records/s")
	err := fs.Parse(args)
	return f, err
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	f, err := parseFlags(args)
	if err != nil {
		return err
	}
	if f.child != "" {
		return runChild(ctx, f.child)
	}
	configs, err := plan(f)
	if err != nil {
		return err
	}
	rows, err := measure(ctx, configs, max(1, f.repeat))
	if err != nil {
		return err
	}
	var more []rowConfig
	for _, r := range rows {
		more = append(more, followUps(f.sweep, r)...)
	}
	if len(more) > 0 {
		extra, err := measure(ctx, more, max(1, f.repeat))
		if err != nil {
			return err
		}
		rows = append(rows, extra...)
	}
	ratios(rows)
	printTable(os.Stdout, rows)
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

// measure runs every configuration repeat times, round robin so that the
// machine's drifts spread evenly, and keeps each one's median run.
func measure(ctx context.Context, configs []rowConfig, repeat int) ([]Row, error) {
	runs := make([][]Row, len(configs))
	for k := range repeat {
		for i, rc := range configs {
			fmt.Fprintf(os.Stderr, "[%d/%d] %s %s interval=%s p=%d state=%dB rate=%.0f sink-rate=%.0f ...", k*len(configs)+i+1, repeat*len(configs),
				rc.Topology, rc.Mode, rc.Interval, rc.Parallelism, rc.StateSize, rc.Rate, rc.SinkRate)
			row, err := runInChild(ctx, rc)
			if err != nil {
				fmt.Fprintln(os.Stderr, " failed")
				return nil, fmt.Errorf("%s %s %s: %w", rc.Topology, rc.Mode, rc.Interval, err)
			}
			fmt.Fprintf(os.Stderr, " %.0f records/s\n", row.RecordsPerSec)
			runs[i] = append(runs[i], row)
		}
	}
	rows := make([]Row, len(configs))
	for i, rs := range runs {
		slices.SortFunc(rs, func(a, b Row) int { return cmp.Compare(a.RecordsPerSec, b.RecordsPerSec) })
		rows[i] = rs[(len(rs)-1)/2] // the lower middle when even: no upward lean
	}
	return rows, nil
}

// plan lists the rows of a run.
func plan(f flags) ([]rowConfig, error) {
	base := rowConfig{Topology: f.topology, Parallelism: f.parallelism, RecordSize: f.recordSize, Keys: f.keys,
		StateSize: f.stateSize, Rate: f.rate, Duration: f.duration, Store: f.store, Interval: "off"}
	if f.recordSize < 16 || f.parallelism < 1 || f.keys < 1 || f.duration <= 0 || f.stateSize < 0 || f.rate < 0 {
		return nil, fmt.Errorf("bad flags: record-size >= 16, parallelism >= 1, keys >= 1, duration > 0, state-size >= 0, rate >= 0")
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
	case "latency": // the maximum, then 50% of it (added once measured)
		add(func(rc *rowConfig) { rc.Mode, rc.Interval = "abs", "100ms" })
		return out, nil
	case "parallelism": // throughput against parallelism, checkpoints off
		for _, p := range []int{1, 2, 4} {
			for _, m := range []string{"abs", "protoactor"} {
				add(func(rc *rowConfig) { rc.Mode, rc.Parallelism = m, p })
			}
		}
		return out, nil
	default:
		return nil, fmt.Errorf("unknown sweep %q (state-size, fan-in, recovery, parallelism, backpressure, latency)", f.sweep)
	}
	for _, m := range strings.Split(f.modes, ",") {
		switch m = strings.TrimSpace(m); m {
		case "abs", "sync":
			for _, iv := range strings.Split(f.intervals, ",") {
				iv = strings.TrimSpace(iv)
				if _, err := parseInterval(iv); err != nil {
					return nil, err
				}
				if m == "sync" && iv == "off" {
					continue // without checkpoints sync is abs
				}
				add(func(rc *rowConfig) { rc.Mode, rc.Interval = m, iv })
			}
		case "protoactor", "channels":
			if f.topology == "paritysum" {
				add(func(rc *rowConfig) { rc.Mode = m })
			}
		default:
			return nil, fmt.Errorf("unknown mode %q (abs, sync, protoactor, channels)", m)
		}
	}
	return out, nil
}

// followUps are the rows a sweep adds once the first is measured.
func followUps(sweep string, first Row) []rowConfig {
	if first.SinkRate > 0 || first.Rate > 0 {
		return nil
	}
	rc := first.rowConfig
	switch sweep {
	case "backpressure":
		rc.SinkRate = first.RecordsPerSec / 10
	case "latency":
		rc.Rate = first.RecordsPerSec / 2
	default:
		return nil
	}
	return []rowConfig{rc}
}

// childConfig is a rowConfig with the fields JSON leaves out of rows.
type childConfig struct {
	rowConfig
	Records  int64         `json:"records_limit"`
	Duration time.Duration `json:"duration_ns"`
	Recovery bool          `json:"recovery"`
}

func runInChild(ctx context.Context, rc rowConfig) (Row, error) {
	cc, err := json.Marshal(childConfig{rowConfig: rc, Records: rc.Records, Duration: rc.Duration, Recovery: rc.Recovery})
	if err != nil {
		return Row{}, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-child", string(cc))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return Row{}, fmt.Errorf("child: %w", err)
	}
	var row Row
	if err := json.Unmarshal(out, &row); err != nil {
		return Row{}, fmt.Errorf("child output %q: %w", out, err)
	}
	row.rowConfig = rc
	return row, nil
}

func runChild(ctx context.Context, spec string) error {
	var cc childConfig
	if err := json.Unmarshal([]byte(spec), &cc); err != nil {
		return err
	}
	rc := cc.rowConfig
	rc.Records, rc.Duration, rc.Recovery = cc.Records, cc.Duration, cc.Recovery
	row, err := runRow(ctx, rc)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(row)
}

// ratios sets each row's throughput relative to the checkpoints-off row of
// its topology and parallelism.
func ratios(rows []Row) {
	for i := range rows {
		for _, o := range rows {
			if o.Mode == "abs" && o.Interval == "off" && o.Topology == rows[i].Topology && o.Parallelism == rows[i].Parallelism &&
				o.StateSize == rows[i].StateSize && o.SinkRate == 0 && o.Rate == 0 && o.RecordsPerSec > 0 {
				rows[i].RatioToOff = rows[i].RecordsPerSec / o.RecordsPerSec
			}
		}
	}
}
