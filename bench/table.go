package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

func printTable(w io.Writer, rows []Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "topology\tmode\tinterval\tp\tstate/key\trecords/s\tvs off\tckpts\tckpt p50 ms\tckpt p99 ms\talign p50 ms\talign p99 ms\tbytes/ckpt\tlat p50 ms\tlat p99 ms\tpeak RSS MiB\trecovery ms\t")
	for _, r := range rows {
		ratio, recovery := "-", "-"
		if r.RatioToOff > 0 {
			ratio = fmt.Sprintf("%.3f", r.RatioToOff)
		}
		if r.RecoveryMs > 0 {
			recovery = fmt.Sprintf("%.1f", r.RecoveryMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.0f\t%.2f\t%.2f\t%.1f\t%s\t\n",
			r.Topology, r.Mode, r.Interval, r.Parallelism, r.StateSize, r.RecordsPerSec, ratio, r.Checkpoints,
			r.CkptP50Ms, r.CkptP99Ms, r.AlignP50Ms, r.AlignP99Ms, r.BytesPerCkpt, r.LatencyP50Ms, r.LatencyP99Ms,
			float64(r.PeakRSSBytes)/(1<<20), recovery)
	}
	tw.Flush()
}
