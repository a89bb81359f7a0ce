package main

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

// TestSigkillResumed: the job runs in a child process against a broker of
// the test process (which outlives the child). The child is SIGKILLed once
// the output holds committed effects while more input is arriving, and a
// new child on the same store resumes from its newest checkpoint and runs
// until the output is complete. The test then reads the output itself with
// a read_committed consumer (sentinels written after the job stopped): each
// order's effect exactly once, and each customer's final total equal to
// the closed form.
func TestSigkillResumed(t *testing.T) {
	const records, customers, parts = 30_000, 40, 3
	c, err := kfake.NewCluster(kfake.NumBrokers(kfakeBrokers), kfake.SeedTopics(4, "orders", "totals"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	part := func(k int64) {
		t.Helper()
		if err := fillRange(ctx, brokers, "orders", records*k/parts, records*(k+1)/parts, customers); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{"-phase", "run", "-brokers", strings.Join(brokers, ","), "-store", t.TempDir(),
		"-records", "30000", "-customers", "40", "-restart", "none", "-faults", "0"}

	part(0)
	first := startProc(t, "first", args...)
	w, err := watch(ctx, brokers, "totals", records)
	if err != nil {
		t.Fatal(err)
	}
	defer w.stop()
	if err := w.wait(ctx, 1, first.Exited()); err != nil {
		t.Fatalf("waiting for committed output of the first process: %v", err)
	}
	// The second part arrives while the first process runs; the third only
	// later, so that it cannot have finished when it is killed.
	part(1)
	first.Kill()
	if ws, ok := first.Cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("the first process ended by itself (%s), not by SIGKILL", first.Cmd.ProcessState)
	}
	t.Logf("killed the first process with %d of %d effects visible", w.committed(), records)

	second := startProc(t, "second", args...)
	part(2)
	if code := second.Exit(); code != 0 {
		t.Fatalf("second process: exit code %d, want 0", code)
	}
	// It resumed from a checkpoint: committed output means a completed one.
	second.MustFind(regexp.MustCompile(`^job "kafka-totals" running \(start 1, epoch \d+\) from checkpoint [1-9]\d*;`))
	second.MustFind(regexp.MustCompile(`^stopped with savepoint "final-1"`))
	t.Logf("second process:\n%s", strings.Join(second.Lines(false), "\n"))

	values, err := readOutput(ctx, brokers, "totals")
	if err != nil {
		t.Fatal(err)
	}
	times := map[int64]int{}
	final := map[int64]int64{} // customer -> the total with the highest count
	count := map[int64]int64{}
	for _, v := range values {
		e, err := decodeEffect(v)
		if err != nil {
			t.Fatal(err)
		}
		times[e.ID]++
		if e.Count > count[e.Customer] {
			count[e.Customer], final[e.Customer] = e.Count, e.Total
		}
	}
	var missing, dup []int64
	for id := range int64(records) {
		switch times[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			dup = append(dup, id)
		}
	}
	if len(missing) > 0 || len(dup) > 0 || len(values) != records {
		t.Fatalf("read_committed output: %d records, %d orders missing (%v...), %d duplicated (%v...)",
			len(values), len(missing), missing[:min(len(missing), 5)], len(dup), dup[:min(len(dup), 5)])
	}
	want := map[int64]int64{}
	for id := range int64(records) {
		want[customerOf(id, customers)] += amountOf(id)
	}
	for cust, total := range want {
		if final[cust] != total {
			t.Errorf("customer %d: final total %d, want %d (the sum of its orders)", cust, final[cust], total)
		}
	}
	if r := check(values, records, customers); !r.ok() {
		t.Errorf("check: %s\n%s", r.summary(), strings.Join(r.details(), "\n"))
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatal("ran out of time")
	}
}
