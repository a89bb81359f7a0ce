package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/snapflow/snapflow/snapshots"
)

// TestParitySum runs the example as a user would and checks its story: the
// lecture's cut read back from the store, one failure, one rollback, and the
// exact final sums.
func TestParitySum(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-n", "100000", "-store", t.TempDir()}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, re := range []string{
		`(?m)^checkpoint \d+: source=5 sum_even=6 sum_odd=9$`,
		`(?m)^  sum#1 +-> sum_odd +   = 9 `,
		`task sum#1 failed in epoch 1: .*injected failure on record 7`,
		`rolling back to checkpoint \d+ in epoch 2`,
		`(?m)^final sums: sum_even=2500050000 sum_odd=2500000000 `,
		`(?m)^exactly-once: OK$`,
	} {
		if !regexp.MustCompile(re).MatchString(s) {
			t.Errorf("output lacks %s:\n%s", re, s)
		}
	}
}

// TestParitySumRunsAgain: every run on the same store tells the whole
// story again (a second run must not find the first one's final checkpoint
// and end at once).
func TestParitySumRunsAgain(t *testing.T) {
	store := t.TempDir()
	for i := range 2 {
		var out strings.Builder
		if err := run([]string{"-n", "20000", "-store", store}, &out); err != nil {
			t.Fatalf("run %d: %v\n%s", i+1, err, out.String())
		}
		if !strings.Contains(out.String(), "source=5 sum_even=6 sum_odd=9") || !strings.Contains(out.String(), "exactly-once: OK") {
			t.Fatalf("run %d:\n%s", i+1, out.String())
		}
	}
}

// TestParitySumDefaultStore: without -store the job uses the embedded
// default store, snapflow-data in the working directory, and leaves nothing
// else behind.
func TestParitySumDefaultStore(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var out strings.Builder
	if err := run([]string{"-n", "10000"}, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != snapshots.DefaultDir {
		t.Fatalf("the working directory holds %v, want only %s", entries, snapshots.DefaultDir)
	}
}

func TestParitySumExitCodes(t *testing.T) {
	var out, stderr strings.Builder
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-h"}, 0},
		{[]string{"-n", "3"}, 2},
		{[]string{"-no-such-flag"}, 2},
		{[]string{"-store", "ftp://nope"}, 1},
	} {
		if got := exitCode(run(c.args, &out), &stderr); got != c.code {
			t.Errorf("%v: exit code %d, want %d", c.args, got, c.code)
		}
	}
}

func TestParitySumRejectsBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-n", "3"}, &out); err == nil {
		t.Fatal("n below the cut was accepted")
	}
	if err := run([]string{"-store", "ftp://nope"}, &out); err == nil || !strings.Contains(err.Error(), "unsupported store URL") {
		t.Fatalf("bad store URL: %v", err)
	}
}
