package main

import (
	"regexp"
	"strings"
	"testing"
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

func TestParitySumRejectsBadFlags(t *testing.T) {
	var out strings.Builder
	if err := run([]string{"-n", "3"}, &out); err == nil {
		t.Fatal("n below the cut was accepted")
	}
	if err := run([]string{"-store", "ftp://nope"}, &out); err == nil || !strings.Contains(err.Error(), "unsupported store URL") {
		t.Fatalf("bad store URL: %v", err)
	}
}
