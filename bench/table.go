package main

import (
	"cmp"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// column is one column of the table: its header and how a row fills it.
type column struct {
	name string
	cell func(Row) string
}

// columns are the table's columns, in order. Cells print "–" for what does
// not apply or was not measured, and numbers with thousands separators.
var columns = []column{
	{"topology", func(r Row) string { return r.Topology }},
	{"mode", func(r Row) string {
		m := r.Mode
		if r.Monitored {
			m += "+mon"
		}
		switch r.EventTime {
		case "watermarks":
			m += "+wm"
		case "timers":
			m += "+timers"
		}
		return m
	}},
	{"interval", func(r Row) string { return ifSnapflow(r, r.Interval) }},
	{"p", func(r Row) string { return count(int64(r.Parallelism)) }},
	{"state/key B", stateCell},
	{"key groups", func(r Row) string {
		if r.MaxParallelism == 0 {
			return notMeasured
		}
		return count(int64(r.MaxParallelism))
	}},
	{"updated/s", func(r Row) string { return fractionCell(r.UpdateFraction) }},
	{"ckpt kind", func(r Row) string { return cmp.Or(r.Checkpointing, notMeasured) }},
	{"ckpt mode", func(r Row) string { return cmp.Or(r.CheckpointMode, notMeasured) }},
	{"backend", func(r Row) string {
		if r.Backend == "" && r.Checkpointing == "" {
			return notMeasured
		}
		return cmp.Or(r.Backend, "heap")
	}},
	{"offered/s", func(r Row) string { return limit(r.Rate) }},
	{"sink limit/s", func(r Row) string { return sinkLimit(r.rowConfig) }},
	{"records/s", func(r Row) string { return r.RecordsPerSec.cell(0) }},
	{"spread", func(r Row) string { return percent(r.Spread) }},
	{"% of off", func(r Row) string { return percent(r.RatioToOff) }},
	{"% of heap", func(r Row) string { return percent(r.RatioToHeap) }},
	{"% of in-proc off", func(r Row) string { return percent(r.RatioToInProcess) }},
	{"% of loop", func(r Row) string { return percent(r.RatioToLoop) }},
	{"% of unmonitored", func(r Row) string { return percent(r.RatioToUnmonitored) }},
	{"% of untimed", func(r Row) string { return percent(r.RatioToUntimed) }},
	{"% of aligned", func(r Row) string { return percent(r.RatioToAligned) }},
	{"p99 % of aligned", func(r Row) string { return percent(r.RatioP99ToAligned) }},
	{"ckpts", checkpointsCell},
	{"ckpt p50/p99 ms", func(r Row) string { return pair(r.CkptP50Ms, r.CkptP99Ms) }},
	{"align p50/p99 ms", func(r Row) string { return pair(r.AlignP50Ms, r.AlignP99Ms) }},
	{"sync p50/p99 ms", func(r Row) string { return pair(r.SyncP50Ms, r.SyncP99Ms) }},
	{"sync % of heap", func(r Row) string { return percent(r.SyncRatioToHeap) }},
	{"bytes/ckpt", func(r Row) string { return r.BytesPerCkpt.cell(0) }},
	{"state B", func(r Row) string { return r.StateBytes.cell(0) }},
	{"uploaded B/ckpt", func(r Row) string { return r.UploadedBytesPerCkpt.cell(0) }},
	{"% uploaded", func(r Row) string { return percent(uploadedShare(r)) }},
	{"in-flight B/ckpt", func(r Row) string { return r.InFlightBytesPerCkpt.cell(0) }},
	{"p99 % of full", func(r Row) string { return percent(r.RatioP99ToFull) }},
	{"wire B/record", func(r Row) string { return r.WireBytesPerRecord.cell(1) }},
	{"latency p50/p99 ms", func(r Row) string { return pair(r.LatencyP50Ms, r.LatencyP99Ms) }},
	{"CPU µs/record", func(r Row) string { return r.CPUPerRecordUs.cell(2) }},
	{"peak RSS MiB", rssCell},
	{"recovery ms", func(r Row) string { return r.RecoveryMs.cell(1) }},
	{"recovery local B", func(r Row) string { return r.RecoveryLocalBytes.cell(0) }},
	{"recovery downloaded B", func(r Row) string { return r.RecoveryDownloadedBytes.cell(0) }},
	{"restore ms", func(r Row) string { return r.RestoreMs.cell(1) }},
	{"restore read B", func(r Row) string { return r.RestoreReadBytes.cell(0) }},
	{"ckpt B", func(r Row) string { return r.RestoredCkptBytes.cell(0) }},
	{"raw read ms", func(r Row) string { return r.RawReadMs.cell(1) }},
	{"restore % of raw", func(r Row) string { return percent(r.RestoreToRawRead) }},
}

// optional columns are printed only when some row has a value in them.
var optional = map[string]bool{"ckpt mode": true, "% of aligned": true, "p99 % of aligned": true, "in-flight B/ckpt": true, "backend": true, "sync p50/p99 ms": true, "sync % of heap": true, "% of heap": true, "key groups": true, "updated/s": true, "ckpt kind": true, "state B": true, "uploaded B/ckpt": true, "% uploaded": true, "p99 % of full": true, "restore ms": true, "restore read B": true, "ckpt B": true, "raw read ms": true, "restore % of raw": true, "offered/s": true, "sink limit/s": true, "recovery ms": true, "recovery local B": true, "recovery downloaded B": true, "% of in-proc off": true, "wire B/record": true, "% of loop": true, "CPU µs/record": true, "% of unmonitored": true}

// tableNote explains the table's symbols and relative columns.
const tableNote = `–: does not apply to the row, or was not measured (no record, no checkpoint, no time).
spread: (max - min) / median of the runs' records/s; the row is the median run.
% of off: records/s against the unthrottled abs row with checkpoints off of the same topology, parallelism and state.
`

// printTable writes rows as an aligned table with a note on its symbols,
// and on the cluster rows when there are some.

func printTable(w io.Writer, rows []Row) error {
	cols := tableColumns(rows)
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
	_, err := io.WriteString(w, tableNote+clusterNote(rows)+kafkaNote(rows)+monitorNote(rows)+uploadNote(rows)+restoreNote(rows))
	return err
}

// tableColumns are the columns printed for rows: every column but the
// optional ones in which no row has a value.
func tableColumns(rows []Row) []column {
	var cols []column
	for _, c := range columns {
		keep := !optional[c.name]
		for _, r := range rows {
			keep = keep || c.cell(r) != notMeasured
		}
		if keep {
			cols = append(cols, c)
		}
	}
	return cols
}

// ifSnapflow is s for a snapflow row, and "–" for a baseline, which has no
// checkpoint interval and no state beyond its sums.
func ifSnapflow(r Row, s string) string {
	if r.baseline() {
		return notMeasured
	}
	return s
}

// checkpointsCell is the number of checkpoints in the measuring window; "–"
// where none were asked for (a baseline, or the interval off).
func checkpointsCell(r Row) string {
	if r.baseline() || (r.Interval == "off" && r.Checkpoints == 0) {
		return notMeasured
	}
	return count(int64(r.Checkpoints))
}

// stateCell is the bytes of keyed state per key; "–" for a baseline and a
// kafka row, which keep none.
func stateCell(r Row) string {
	if r.Topology == "kafka" {
		return notMeasured
	}
	return ifSnapflow(r, count(int64(r.StateSize)))
}

// uploadNote explains the columns of what a checkpoint uploads, when some
// row has them.
func uploadNote(rows []Row) string {
	for _, r := range rows {
		if _, ok := r.UploadedBytesPerCkpt.value(); ok {
			note := `updated/s: the fraction of the keys whose state changes per second (the source's moving hot window).
state B: the state size of the last checkpoint in the window; uploaded B/ckpt: every byte Put to the store per
checkpoint, manifest included (full checkpoints: about 100% of the state; incremental ones: the key groups
written since the last checkpoint, a spread share rewritten, the non-keyed states, and the manifest with its
references); % uploaded: uploaded B/ckpt against state B.
`
			for _, r := range rows {
				if r.Checkpointing != "" {
					return note + `ckpt kind: a row of -sweep incremental; its window opens once a checkpoint holding the whole state has
completed (the first checkpoint, full in either kind, is not in it) and lasts until one has completed in it.
p99 % of full: the incremental row's checkpoint p99 against the full row's of the same interval.
`
				}
			}
			return note
		}
	}
	return ""
}

// restoreNote explains the restore columns, when some row has them.
func restoreNote(rows []Row) string {
	for _, r := range rows {
		if _, ok := r.RestoreMs.value(); ok {
			return `restore ms: after the window the job is stopped and started again, restoring its newest checkpoint: from
actors.Start to running; restore read B: all it read from the store meanwhile (manifests, state heads, the tasks'
streamed key groups); ckpt B: the bytes of the checkpoint restored (manifest, state objects, sections of earlier
objects referenced, database files of the on-disk backend); raw read ms: reading those from the same store, with as many reads at once as the restore
had; restore % of raw: the restore's throughput against the raw reads' (raw read ms / restore ms).
`
		}
	}
	return ""
}

// fractionCell is the fraction of keys updated per second as a percentage;
// "–" for every key (0 or 1).
func fractionCell(f float64) string {
	if f <= 0 || f >= 1 {
		return notMeasured
	}
	return strconv.FormatFloat(f*100, 'g', 3, 64) + "%"
}

// uploadedShare is the bytes uploaded per checkpoint against the state's
// size, when both were measured.
func uploadedShare(r Row) metric {
	up, ok := r.UploadedBytesPerCkpt.value()
	st, ok2 := r.StateBytes.value()
	if !ok || !ok2 {
		return metric{}
	}
	return per(up, st)
}

func rssCell(r Row) string {
	if r.PeakRSSBytes <= 0 {
		return notMeasured
	}
	return thousands(float64(r.PeakRSSBytes)/(1<<20), 1)
}

// sinkLimit is the sink's limit, with how often it sleeps when that is not
// every paceEvery records ("1,000 (sleeps per record)").
func sinkLimit(rc rowConfig) string {
	s := limit(rc.SinkRate)
	switch {
	case rc.SinkRate <= 0 || rc.SinkPaceEvery <= 0:
	case rc.SinkPaceEvery == 1:
		s += " (sleeps per record)"
	default:
		s += fmt.Sprintf(" (sleeps every %d)", rc.SinkPaceEvery)
	}
	return s
}

// limit is a rate limit in records/s, or "–" for none.
func limit(v float64) string {
	if v <= 0 {
		return notMeasured
	}
	return thousands(v, 0)
}

// percent is a ratio as a percentage with one decimal, or under 1% with
// two significant digits at least (0.17%, 0.043%, 0.0033%), so that a
// small ratio does not read 0.0%; or "–".
func percent(m metric) string {
	v, ok := m.value()
	if !ok {
		return notMeasured
	}
	if v > 0 && v < 0.01 {
		d := 2
		for x := 100 * v; x < 0.1 && d < 8; x *= 10 {
			d++
		}
		return thousands(100*v, d) + "%"
	}
	return thousands(100*v, 1) + "%"
}

// pair is "p50 / p99" with two decimals, or "–" when neither was measured.
func pair(p50, p99 metric) string {
	if _, ok := p50.value(); !ok {
		if _, ok := p99.value(); !ok {
			return notMeasured
		}
	}
	return p50.cell(2) + " / " + p99.cell(2)
}

// monitorNote explains the monitored rows, when there are some.
func monitorNote(rows []Row) string {
	for _, r := range rows {
		if r.Monitored {
			return `+mon: the job's metrics, JSON API and dashboard are served (actors/dashboard) and, every second, /metrics is
  scraped and the API polled as Prometheus and an open dashboard would, with the event stream read throughout;
  % of unmonitored: records/s against the same row without them, in the same run.
`
		}
	}
	return ""
}
