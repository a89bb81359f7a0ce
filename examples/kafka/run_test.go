package main

import (
	"regexp"
	"strconv"
	"testing"
)

// TestDefaultRun: the example with no flags (kfake in process, 20000
// orders fed in chunks, seeded task failures, one in the commit window,
// and a Stop and Start of the whole job half way) prints exactly-once: OK
// after reading every effect back exactly once.
func TestDefaultRun(t *testing.T) {
	p := startProc(t, "default run")
	if code := p.Exit(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	p.MustFind(regexp.MustCompile(`^exactly-once: OK$`))
	p.MustFind(regexp.MustCompile(`^verified with a read_committed consumer of "totals": read 20000 effects: 20000 of 20000 orders exactly once, 0 missing, 0 duplicated, 0 wrong running totals; final totals of 50 customers: 0 differ`))
	p.MustFind(regexp.MustCompile(`^injected: out#\d fails as checkpoint \d+ completes, before it commits its transaction$`))
	m := p.MustFind(regexp.MustCompile(`(\d+) of (\d+) planned faults injected`))
	if m[1] != m[2] || m[2] != "4" {
		t.Errorf("%s of %s planned faults injected, want 4 of 4", m[1], m[2])
	}
	m = p.MustFind(regexp.MustCompile(`^restart of the whole job: stopped \(Stop, no savepoint\) at (\d+) of 20000 effects committed`))
	if n, _ := strconv.Atoi(m[1]); n < 10000 {
		t.Errorf("restarted at %d effects, want at least half", n)
	}
	// The second start resumes from a checkpoint, not from the beginning.
	p.MustFind(regexp.MustCompile(`^job "kafka-totals" running \(start 2, epoch \d+\) from checkpoint [1-9]\d*;`))
}

// TestRestartWithSavepoint: with -restart savepoint the job is stopped
// with a savepoint half way and started again on the same store without
// naming it: it resumes from the savepoint, and the output is exactly
// once.
func TestRestartWithSavepoint(t *testing.T) {
	p := startProc(t, "savepoint restart", "-restart", "savepoint", "-records", "6000", "-chunks", "12", "-customers", "7", "-seed", "3")
	if code := p.Exit(); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	p.MustFind(regexp.MustCompile(`^exactly-once: OK$`))
	p.MustFind(regexp.MustCompile(`^restart of the whole job: stopped with savepoint "restart-1" \(checkpoint \d+\)`))
	p.MustFind(regexp.MustCompile(`^job "kafka-totals" running \(start 2, epoch \d+\) from savepoint "restart-1"`))
	p.MustFind(regexp.MustCompile(`^stopped with savepoint "final-1"`))
}
