package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
)

// rescaleChildPrefix starts the -child argument of a rescale child: the
// rescaleSpec as JSON follows.
const rescaleChildPrefix = "rescale:"

// defaultRescaleSizes are the state sizes of -sweep rescale.
const defaultRescaleSizes = "16MiB,64MiB,256MiB"

// runRescaleSweep is -sweep rescale: it measures the rows (or reads them
// with -from), prints them, and writes them with -json.
func runRescaleSweep(ctx context.Context, f flags, stdout, stderr io.Writer) error {
	if f.plotOut != "" {
		return fmt.Errorf("%w: -sweep rescale draws no plot (-plot)", errUsage)
	}
	var rows []RescaleRow
	var err error
	if f.from != "" {
		rows, err = loadRescaleRows(f.from)
	} else {
		rows, err = measureRescale(ctx, stderr, f)
	}
	if err != nil {
		return err
	}
	rescaleRatios(rows)
	if err := printRescaleTable(stdout, rows); err != nil {
		return err
	}
	if f.jsonOut != "" {
		b, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return err
		}
		return os.WriteFile(f.jsonOut, append(b, '\n'), 0o644)
	}
	return nil
}

// measureRescale runs one child process per state size of -sizes.
func measureRescale(ctx context.Context, progress io.Writer, f flags) ([]RescaleRow, error) {
	backend := ""
	switch f.backend {
	case "", "heap":
	case "disk":
		backend = "disk"
		if !f.set["sizes"] {
			f.sizes = defaultDiskRescaleSizes
		}
	default:
		return nil, fmt.Errorf("%w: -sweep rescale -backend %q: want heap or disk", errUsage, f.backend)
	}
	sizes, err := parseSizes(f.sizes)
	if err != nil {
		return nil, fmt.Errorf("%w: -sizes: %v", errUsage, err)
	}
	if f.repeat < 1 || f.keys < 1 {
		return nil, fmt.Errorf("%w: want -repeat >= 1 and -keys >= 1", errUsage)
	}
	keysOf := func(int64) uint64 { return f.keys }
	if backend == "disk" && !f.set["keys"] { // a value of diskRescaleValueBytes per key
		keysOf = func(s int64) uint64 { return uint64(max(1, s/diskRescaleValueBytes)) }
	}
	for _, s := range sizes {
		if s < int64(keysOf(s)) {
			return nil, fmt.Errorf("%w: -sizes: %d bytes of state over %d keys is less than a byte per key", errUsage, s, keysOf(s))
		}
	}
	pairs := rescalePairs
	if backend == "disk" {
		pairs = diskRescalePairs
	}
	fmt.Fprintf(progress, "bench: rescale: %s × %s (%s) × %s, one process per state size, store %s\n",
		plural(len(sizes), "state size"), plural(len(pairs), "row"), pairsString(pairs), plural(f.repeat, "run"), f.store)
	var rows []RescaleRow
	for _, s := range sizes {
		keys := keysOf(s)
		spec := rescaleSpec{StateBytes: s / int64(keys) * int64(keys), Keys: keys, Store: f.store, Repeat: f.repeat, Profiles: f.cpuprofile, Backend: backend}
		got, err := runRescaleChild(ctx, progress, spec)
		if err != nil {
			return nil, err
		}
		rows = append(rows, got...)
	}
	return rows, nil
}

func pairsString(pairs []rescalePair) string {
	parts := make([]string, len(pairs))
	for i, p := range pairs {
		parts[i] = p.String()
	}
	return strings.Join(parts, ", ")
}

// runRescaleChild measures spec in a child process of this binary, so
// that each state size starts with a fresh heap.
func runRescaleChild(ctx context.Context, progress io.Writer, spec rescaleSpec) ([]RescaleRow, error) {
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-child", rescaleChildPrefix+string(b))
	cmd.Stderr = progress
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("bench: rescale %s: child: %w", mib(spec.StateBytes), err)
	}
	var rows []RescaleRow
	if err := json.Unmarshal(out, &rows); err != nil {
		return nil, fmt.Errorf("bench: rescale %s: child output %q: %w", mib(spec.StateBytes), tail(out, 200), err)
	}
	return rows, nil
}

// runRescaleChildSpec is a rescale child: it measures the spec given as
// JSON and prints its rows as JSON, its progress on stderr.
func runRescaleChildSpec(ctx context.Context, spec string, stdout io.Writer) error {
	var s rescaleSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		return fmt.Errorf("bench: rescale child spec %q: %w", spec, err)
	}
	run := runRescale
	if s.Backend == "disk" {
		run = runDiskRescale
	}
	rows, err := run(ctx, s, os.Stderr)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(rows)
}

// loadRescaleRows reads the rows of a file written by -sweep rescale -json.
func loadRescaleRows(path string) ([]RescaleRow, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("bench: -from: %w", err)
	}
	var rows []RescaleRow
	if err := json.Unmarshal(b, &rows); err != nil {
		return nil, fmt.Errorf("bench: -from %s: %w", path, err)
	}
	return rows, nil
}

// parseSizes reads a comma-separated list of byte counts, each a number
// with an optional KiB, MiB or GiB suffix.
func parseSizes(s string) ([]int64, error) {
	var out []int64
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		num, mult := part, int64(1)
		for suffix, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
			if n, ok := strings.CutSuffix(part, suffix); ok {
				num, mult = n, m
			}
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("size %q: want a positive number of bytes, KiB, MiB or GiB, such as 16MiB", part)
		}
		out = append(out, n*mult)
	}
	return out, nil
}

// rescaleColumn is one column of the rescale table: its header and how a
// row fills it.
type rescaleColumn struct {
	name string
	cell func(RescaleRow) string
}

// rescaleCols are the rescale table's columns, in order.
var rescaleCols = []rescaleColumn{
	{"state MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.StateBytes))) }},
	{"p", func(r RescaleRow) string { return r.pair().String() }},
	{"runs", func(r RescaleRow) string { return count(int64(r.Runs)) }},
	{"restore p50 ms", func(r RescaleRow) string { return r.RestoreP50Ms.cell(1) }},
	{"min / max ms", func(r RescaleRow) string { return r.RestoreMinMs.cell(1) + " / " + r.RestoreMaxMs.cell(1) }},
	{"CPU p50 ms", func(r RescaleRow) string { return r.CPUP50Ms.cell(1) }},
	{"× same p", func(r RescaleRow) string { return ratioCell(r.RatioToSameP) }},
	{"paired", func(r RescaleRow) string { return ratioCell(r.PairedRatio) }},
	{"read MiB", func(r RescaleRow) string { return mibCell(measured(float64(r.ReadBytes))) }},
	{"objects", func(r RescaleRow) string { return count(int64(r.ReadGets)) }},
	{"task read max / mean MiB", func(r RescaleRow) string {
		return mibCell(r.TaskReadMaxBytes) + " / " + mibCell(r.TaskReadMeanBytes)
	}},
	{"task share max / mean MiB", func(r RescaleRow) string {
		return mibCell(r.TaskShareMaxBytes) + " / " + mibCell(r.TaskShareMeanBytes)
	}},
	{"read / share", func(r RescaleRow) string { return ratioCell(r.TaskReadOverShare) }},
}

// rescaleNote explains the rescale table.
const rescaleNote = `restore: from actors.Start with FromSavepoint to EventRunning (every task has restored its state); the median run,
  and the fastest and slowest; the rows of a state size run interleaved (2→2, 2→3, 4→4, 4→2, again) in one process.
p: the savepoint's parallelism → the restored job's, of the keyed operator (max parallelism %d, keys: %s).
CPU: the process's CPU time (user and system) during a restore, the median run.
× same p: restore p50 against the same-parallelism restore of the same savepoint (2→3 against 2→2, 4→2 against 4→4);
  paired: the median of each run against the baseline's run of its round, just before it. Target: at most 1.5×.
read: bytes and objects one restore read from the store: the manifest and every task state (the keyed operator's are
  the state size).
task read: per task of the keyed operator, what it reads on its own, as on a worker of a cluster: its stored state whole
  at the same parallelism; rescaled, the bytes of its key groups in each stored state that held some (ranged reads
  through the key-group index). In one process the job reads each object once (read), and tasks share it.
  task share: the key groups it restores; read / share: the largest ratio of a task's read to its share.
`

// printRescaleTable writes rows as an aligned table with its note.
func printRescaleTable(w io.Writer, rows []RescaleRow) error {
	cols, note := rescaleCols, rescaleNote
	if slices.ContainsFunc(rows, func(r RescaleRow) bool { return r.Backend == "disk" }) {
		cols, note = diskRescaleCols, diskRescaleNote
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.name
	}
	fmt.Fprintln(tw, strings.Join(names, "\t")+"\t")
	for _, r := range rows {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = c.cell(r)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	stores, keys := distinct(rows, func(r RescaleRow) string { return r.Store }), distinct(rows, func(r RescaleRow) string { return count(int64(r.Keys)) })
	_, err := fmt.Fprintf(w, note+"store: %s\n", rescaleMaxParallelism, strings.Join(keys, ", "), strings.Join(stores, ", "))
	return err
}

// distinct lists the values of f over rows, each once, in order.
func distinct(rows []RescaleRow, f func(RescaleRow) string) []string {
	var out []string
	for _, r := range rows {
		if v := f(r); !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// ratioCell is a ratio as "1.23×", or "–".
func ratioCell(m metric) string {
	if _, ok := m.value(); !ok {
		return notMeasured
	}
	return m.cell(2) + "×"
}

// mibCell is a byte count in MiB with one decimal, or "–".
func mibCell(m metric) string {
	v, ok := m.value()
	if !ok {
		return notMeasured
	}
	return thousands(v/(1<<20), 1)
}
