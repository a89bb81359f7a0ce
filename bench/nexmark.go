package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/snapflow/snapflow/actors"
	"github.com/snapflow/snapflow/internal/nexmark"
	"github.com/snapflow/snapflow/snapshots"
	"github.com/snapflow/snapflow/topology"
)

// flinkPerCore is Flink 1.13's published Nexmark throughput, events/s per
// core, with exactly-once checkpoints and RocksDB on 8-core machines (the
// nexmark/nexmark repository's README): other hardware than this one.
var flinkPerCore = map[string]float64{
	"q0": 155_000, "q1": 157_900, "q2": 175_200, "q3": 152_100,
	"q5": 22_140, "q7": 12_330, "q8": 146_140, "q11": 39_700,
}

// flinkTarget is issue 24's target: snapflow's events/s per core against
// Flink's.
func flinkTarget(q string) float64 {
	switch q {
	case "q5", "q7", "q11":
		return 5
	}
	return 10
}

// nexmarkRun is one measured run.
type nexmarkRun struct {
	events, rows int64
	wall, cpu    time.Duration
	checkpoints  int64
}

func (r nexmarkRun) perSecond() float64 { return float64(r.events) / r.wall.Seconds() }
func (r nexmarkRun) perCore() float64   { return float64(r.events) / r.cpu.Seconds() }

// medianRun is the run with the median events per CPU second.
func medianRun(rs []nexmarkRun) nexmarkRun {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b nexmarkRun) int {
		switch {
		case a.perCore() < b.perCore():
			return -1
		case a.perCore() > b.perCore():
			return 1
		}
		return 0
	})
	return rs[len(rs)/2]
}

// heavy are the queries that run on half the events, so that every run
// takes a similar time.
var heavy = map[string]bool{"q4": true, "q5": true, "q7": true, "q11": true}

// nexmarkJobs numbers the jobs, whose names must differ on one store.
var nexmarkJobs atomic.Int64

// runNexmark checks every query's output against its reference, then
// measures each with checkpoints off, exactly once at 1s and as the
// hand-written loop, the runs interleaved, and prints the table. With
// -backend disk it checks and measures the queries with their state on
// disk too (actors.WithDiskState), beside the heap rows.
func runNexmark(ctx context.Context, f flags, stdout, stderr io.Writer) error {
	modes := []string{"loop", "off", "eo-1s"}
	switch f.backend {
	case "", "heap":
	case "disk":
		modes = append(modes, "disk-off", "disk-eo-1s")
	default:
		return fmt.Errorf("%w: -topology nexmark: -backend %q: want heap or disk (disk runs both)", errUsage, f.backend)
	}
	events := f.records
	if events == 0 {
		events = 40_000_000 // several seconds a run: several checkpoints at 1s
	}
	repeat := f.repeat
	if !f.set["repeat"] {
		repeat = 3
	}
	cfg := nexmark.Config{Events: events, Splits: 8, OutOfOrder: 10 * time.Millisecond, Seed: 1}
	params := nexmark.Params{Parallelism: f.parallelism}
	var queries []nexmark.Query
	for _, name := range strings.Split(f.queries, ",") {
		if name == "all" {
			queries = nexmark.Queries
			break
		}
		q, ok := nexmark.QueryNamed(strings.TrimSpace(name))
		if !ok {
			return fmt.Errorf("%w: -queries: no query %q", errUsage, name)
		}
		queries = append(queries, q)
	}
	store, err := snapshots.Open(ctx, f.store)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: nexmark, %d events (%v of event time; q4, q5, q7 and q11 half of them), parallelism %d, %d runs of each row\n",
		events, time.Duration(events)*time.Second/100_000, f.parallelism, repeat)
	check := cfg
	check.Events = min(events, 2_000_000) // the reference's rows are held and sorted
	backends := []bool{false}             // on disk?
	if f.backend == "disk" {
		backends = append(backends, true)
	}
	for _, q := range queries {
		for _, disk := range backends {
			n, err := checkNexmark(ctx, q, check, params, store, disk)
			if err != nil {
				return err
			}
			where := ""
			if disk {
				where = ", state on disk"
			}
			fmt.Fprintf(stderr, "bench: %s: %d rows over %d events%s, equal to the reference\n", q.Name, n, check.Events, where)
		}
	}
	runs := map[string][]nexmarkRun{} // query/mode
	slideSmall, slideLarge := params, params
	slideSmall.Window, slideSmall.Slide = 10*time.Second, time.Second
	slideLarge.Window, slideLarge.Slide = 10*time.Second, 5*time.Second
	for r := range repeat {
		for _, q := range queries {
			qcfg := cfg
			if heavy[q.Name] {
				qcfg.Events /= 2
			}
			for _, mode := range modes {
				run, err := measureNexmark(ctx, q, qcfg, params, mode, store)
				if err != nil {
					return fmt.Errorf("%s %s: %w", q.Name, mode, err)
				}
				if loop := runs[q.Name+"/loop"]; mode != "loop" && run.rows != loop[len(loop)-1].rows {
					return fmt.Errorf("%s %s: %d rows, the hand-written loop %d", q.Name, mode, run.rows, loop[len(loop)-1].rows)
				}
				runs[q.Name+"/"+mode] = append(runs[q.Name+"/"+mode], run)
			}
			if q.Name == "q5" {
				for name, p := range map[string]nexmark.Params{"slide-size/10": slideSmall, "slide-size/2": slideLarge} {
					run, err := measureNexmark(ctx, q, qcfg, p, "off", store)
					if err != nil {
						return err
					}
					runs["q5/"+name] = append(runs["q5/"+name], run)
				}
			}
		}
		fmt.Fprintf(stderr, "bench: round %d of %d done\n", r+1, repeat)
	}
	return printNexmark(stdout, queries, runs)
}

// checkNexmark runs q once with its rows formatted, its state on disk if
// disk, and compares them with the reference's; it returns the number of
// rows.
func checkNexmark(ctx context.Context, q nexmark.Query, cfg nexmark.Config, p nexmark.Params, store snapshots.Store, disk bool) (int64, error) {
	want := q.Reference(cfg, p)
	g := topology.New(fmt.Sprintf("nexmark-check-%s-%d", q.Name, nexmarkJobs.Add(1)))
	out := q.Build(nexmark.Source(g, "events", cfg, topology.Parallelism(p.Parallelism)), p)
	var mu sync.Mutex
	var got []string
	topology.Sink(out.Lines(), "rows", func(r string) error { mu.Lock(); got = append(got, r); mu.Unlock(); return nil })
	opts := []actors.Option{actors.WithStore(store), actors.WithCheckpointInterval(time.Second),
		actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if disk {
		dir, err := os.MkdirTemp("", "bench-nexmark-")
		if err != nil {
			return 0, fmt.Errorf("bench: %w", err)
		}
		defer os.RemoveAll(dir)
		opts = append(opts, actors.WithDiskState(actors.DiskState{Dir: dir}))
	}
	if err := actors.Run(ctx, g, opts...); err != nil {
		return 0, fmt.Errorf("%s: %w", q.Name, err)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		return 0, fmt.Errorf("%s: %d rows differ from the reference's %d", q.Name, len(got), len(want))
	}
	return int64(len(got)), nil
}

func measureNexmark(ctx context.Context, q nexmark.Query, cfg nexmark.Config, p nexmark.Params, mode string, store snapshots.Store) (nexmarkRun, error) {
	runtime.GC()
	cpu0, _ := processCPU()
	start := time.Now()
	run := nexmarkRun{events: cfg.Events}
	if mode == "loop" {
		q.Plain(cfg, p, func(fmt.Stringer) { run.rows++ })
	} else {
		interval := time.Duration(0)
		base, disk := strings.CutPrefix(mode, "disk-")
		if base == "eo-1s" {
			interval = time.Second
		}
		var opts []actors.Option
		if disk {
			dir, err := os.MkdirTemp("", "bench-nexmark-")
			if err != nil {
				return run, fmt.Errorf("bench: %w", err)
			}
			defer os.RemoveAll(dir)
			opts = append(opts, actors.WithDiskState(actors.DiskState{Dir: dir}))
		}
		g := topology.New(fmt.Sprintf("nexmark-%s-%s-%d", q.Name, mode, nexmarkJobs.Add(1)))
		out := q.Build(nexmark.Source(g, "events", cfg, topology.Parallelism(p.Parallelism)), p)
		var rows, checkpoints atomic.Int64
		out.Discard("rows", func(n int) { rows.Add(int64(n)) })
		err := actors.Run(ctx, g, append(opts, actors.WithStore(store), actors.WithCheckpointInterval(interval),
			actors.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
			actors.WithListener(func(e actors.Event) {
				if e.Kind == actors.EventCheckpointCompleted && !e.Final {
					checkpoints.Add(1)
				}
			}))...)
		if err != nil {
			return run, err
		}
		run.rows, run.checkpoints = rows.Load(), checkpoints.Load()
	}
	run.wall = time.Since(start)
	cpu1, _ := processCPU()
	run.cpu = cpu1 - cpu0
	return run, nil
}

func printNexmark(w io.Writer, queries []nexmark.Query, runs map[string][]nexmarkRun) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "query\tloop ev/s\toff ev/s\toff ev/s/core\teo-1s ev/s/core\tckpts\teo/off\toff/loop\tFlink ev/s/core*\t×Flink (eo)\ttarget\t")
	for _, q := range queries {
		loop, off, eo := medianRun(runs[q.Name+"/loop"]), medianRun(runs[q.Name+"/off"]), medianRun(runs[q.Name+"/eo-1s"])
		flink, vsFlink, target := "-", "-", "-"
		if fl, ok := flinkPerCore[q.Name]; ok {
			flink = fmt.Sprintf("%.0f", fl)
			vsFlink = fmt.Sprintf("%.1f×", eo.perCore()/fl)
			target = fmt.Sprintf("≥%.0f×", flinkTarget(q.Name))
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%.3f\t%.3f\t%s\t%s\t%s\t\n", q.Name, loop.perCore(), off.perSecond(), off.perCore(), eo.perCore(),
			eo.checkpoints, eo.perCore()/off.perCore(), off.perCore()/loop.perCore(), flink, vsFlink, target)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if small, large := runs["q5/slide-size/10"], runs["q5/slide-size/2"]; len(small) > 0 && len(large) > 0 {
		s, l := medianRun(small), medianRun(large)
		fmt.Fprintf(w, "\nq5 sliding 10s windows, checkpoints off: slide 1s %.0f ev/s/core, slide 5s %.0f ev/s/core: %.3f× (target ≥0.8×)\n",
			s.perCore(), l.perCore(), s.perCore()/l.perCore())
	}
	if _, ok := runs[queries[0].Name+"/disk-off"]; ok {
		fmt.Fprintln(w, "\nThe state on disk (actors.WithDiskState, default cache), the same events:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "query\tdisk off ev/s\tdisk off ev/s/core\tdisk eo-1s ev/s/core\tckpts\tdisk eo/off\tdisk/heap off\tdisk/heap eo-1s\t")
		for _, q := range queries {
			off, eo := medianRun(runs[q.Name+"/off"]), medianRun(runs[q.Name+"/eo-1s"])
			doff, deo := medianRun(runs[q.Name+"/disk-off"]), medianRun(runs[q.Name+"/disk-eo-1s"])
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%d\t%.3f\t%.3f\t%.3f\t\n", q.Name, doff.perSecond(), doff.perCore(), deo.perCore(),
				deo.checkpoints, deo.perCore()/doff.perCore(), doff.perCore()/off.perCore(), deo.perCore()/eo.perCore())
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(w, "disk/heap: events/s per core on disk against the heap's, same mode.")
	}
	fmt.Fprintln(w, "\nckpts: checkpoints completed in the median eo-1s run. eo/off and off/loop compare events/s per core.")
	fmt.Fprintln(w, "ev/s/core: events over the process's CPU seconds (user+system) during the run; the loop is one goroutine.")
	fmt.Fprintln(w, "* Flink 1.13's published figures (nexmark/nexmark README): exactly-once, RocksDB, 8-core machines; other hardware.")
	return nil
}
