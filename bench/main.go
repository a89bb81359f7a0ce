// Command bench measures snapflow's barrier overhead: the records/s of the
// parity job with checkpoints off and at several intervals, side by side in
// one run.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/snapflow/snapflow/snapshots"
)

func main() {
	n := flag.Int64("n", 5_000_000, "records per run")
	intervals := flag.String("intervals", "off,1s,100ms,20ms", "checkpoint intervals, comma-separated")
	runs := flag.Int("runs", 3, "runs per interval; the median is reported")
	flag.Parse()
	if err := run(*n, *intervals, *runs); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func parseInterval(s string) (time.Duration, error) {
	if s == "off" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("interval %q: want off or a positive duration", s)
	}
	return d, nil
}

func run(n int64, intervals string, runs int) error {
	ctx := context.Background()
	fmt.Printf("%-10s %14s %10s %12s\n", "interval", "records/s", "vs off", "checkpoints")
	var off float64
	for _, s := range strings.Split(intervals, ",") {
		d, err := parseInterval(strings.TrimSpace(s))
		if err != nil {
			return err
		}
		var rates []float64
		ckpts := 0
		for range max(1, runs) {
			r, err := runParity(ctx, n, d, snapshots.NewMem())
			if err != nil {
				return err
			}
			if r.records != n {
				return fmt.Errorf("interval %s: the sink saw %d records, want %d", s, r.records, n)
			}
			rates = append(rates, r.recordsPerSec())
			ckpts += r.checkpoints
		}
		rate := median(rates)
		if d == 0 {
			off = rate
		}
		ratio := "-"
		if off > 0 {
			ratio = fmt.Sprintf("%.3f", rate/off)
		}
		fmt.Printf("%-10s %14.0f %10s %12d\n", s, rate, ratio, ckpts/max(1, runs))
	}
	return nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s[len(s)/2]
}
